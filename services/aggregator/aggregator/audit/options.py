"""The gateway's ``--audit-*`` flags (kube-apiserver's names, defaults and checks) and what they build.

No ``--audit-policy-file``: no auditing (kube's rule), only the ``Audit-ID`` header. A policy with
``--audit-log-path`` writes the log backend, with ``--audit-webhook-config-file`` the webhook
backend, both behind one bounded queue and writer thread (sink.py). The ``*-mode`` flags are
accepted with kube's values; every mode queues without blocking the event loop, dropping and counting
(``apiserver_audit_error_total{plugin="buffered"}``) when the queue is full, which is kube's batch
mode; kube's blocking modes would hold the request until the write is done.
"""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import dataclass

from genericapi.apimachinery.cel.typed import parse_duration

from . import logbackend, policy, sink, webhook
from .filter import Auditor

MODES = ("batch", "blocking", "blocking-strict")
VERSIONS = ("audit.k8s.io/v1",)


def _duration(text: str) -> float:
    """A Go duration flag (``30s``, ``1m``, ``250ms``)."""
    parsed = parse_duration(text)
    if parsed is None or parsed.total_seconds() < 0:
        raise argparse.ArgumentTypeError(f"invalid argument {text!r}: time: invalid duration {text!r}")
    return parsed.total_seconds()


def add_audit_flags(parser: argparse.ArgumentParser) -> None:
    """kube-apiserver's audit flags (k8s.io/apiserver/pkg/server/options/audit.go)."""
    group = parser.add_argument_group("audit")
    group.add_argument("--audit-policy-file", default="",
                       help="path to the file that defines the audit policy configuration")
    group.add_argument("--audit-log-path", default="",
                       help="if set, all requests coming to the apiserver will be logged to this file; '-' means "
                            "standard out")
    group.add_argument("--audit-log-maxage", type=int, default=0,
                       help="the maximum number of days to retain old audit log files based on the timestamp "
                            "encoded in their filename")
    group.add_argument("--audit-log-maxbackup", type=int, default=0,
                       help="the maximum number of old audit log files to retain; 0 means no restriction")
    group.add_argument("--audit-log-maxsize", type=int, default=0,
                       help="the maximum size in megabytes of the audit log file before it gets rotated")
    group.add_argument("--audit-log-compress", action="store_true",
                       help="if set, the rotated log files will be compressed using gzip")
    group.add_argument("--audit-log-format", default="json",
                       help='format of saved audits: "legacy" (one line of text per event) or "json"')
    group.add_argument("--audit-log-mode", default="blocking", help="strategy for sending audit events (" +
                       ", ".join(MODES) + "); events are always queued without blocking here")
    group.add_argument("--audit-log-batch-buffer-size", type=int, default=sink.DEFAULT_BUFFER_SIZE,
                       help="the size of the buffer to store events before batching and writing")
    group.add_argument("--audit-log-version", default="audit.k8s.io/v1",
                       help="API group and version used for serializing audit events written to log")
    group.add_argument("--audit-webhook-config-file", default="",
                       help="path to a kubeconfig formatted file that defines the audit webhook configuration")
    group.add_argument("--audit-webhook-initial-backoff", type=_duration, default=webhook.DEFAULT_INITIAL_BACKOFF,
                       help="the amount of time to wait before retrying the first failed request")
    group.add_argument("--audit-webhook-mode", default="batch", help="strategy for sending audit events (" +
                       ", ".join(MODES) + ")")
    group.add_argument("--audit-webhook-batch-buffer-size", type=int, default=sink.DEFAULT_BUFFER_SIZE,
                       help="the size of the buffer to store events before batching and writing")
    group.add_argument("--audit-webhook-batch-max-size", type=int, default=webhook.DEFAULT_MAX_SIZE,
                       help="the maximum size of a batch")
    group.add_argument("--audit-webhook-batch-max-wait", type=_duration, default=webhook.DEFAULT_MAX_WAIT,
                       help="the amount of time to wait before force writing the batch that hadn't reached the max "
                            "size")
    group.add_argument("--audit-webhook-batch-throttle-enable", type=_go_bool, default=True,
                       help="whether batching throttling is enabled")
    group.add_argument("--audit-webhook-batch-throttle-qps", type=float, default=webhook.DEFAULT_THROTTLE_QPS,
                       help="maximum average number of batches per second")
    group.add_argument("--audit-webhook-batch-throttle-burst", type=int, default=webhook.DEFAULT_THROTTLE_BURST,
                       help="maximum number of requests sent at the same moment if ThrottleQPS was not utilized "
                            "before")
    group.add_argument("--audit-webhook-version", default="audit.k8s.io/v1",
                       help="API group and version used for serializing audit events written to webhook")


def _go_bool(text: str) -> bool:
    """A Go bool flag value (strconv.ParseBool)."""
    if text in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if text in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    raise argparse.ArgumentTypeError(f'invalid argument "{text}": strconv.ParseBool: parsing "{text}": invalid syntax')


@dataclass
class AuditOptions:
    """The parsed ``--audit-*`` flags."""

    policy_file: str = ""
    log_path: str = ""
    log_maxage: int = 0
    log_maxbackup: int = 0
    log_maxsize: int = 0
    log_compress: bool = False
    log_format: str = "json"
    log_mode: str = "blocking"
    log_buffer_size: int = sink.DEFAULT_BUFFER_SIZE
    log_version: str = "audit.k8s.io/v1"
    webhook_config_file: str = ""
    webhook_initial_backoff: float = webhook.DEFAULT_INITIAL_BACKOFF
    webhook_mode: str = "batch"
    webhook_buffer_size: int = sink.DEFAULT_BUFFER_SIZE
    webhook_max_size: int = webhook.DEFAULT_MAX_SIZE
    webhook_max_wait: float = webhook.DEFAULT_MAX_WAIT
    webhook_throttle: bool = True
    webhook_qps: float = webhook.DEFAULT_THROTTLE_QPS
    webhook_burst: int = webhook.DEFAULT_THROTTLE_BURST
    webhook_version: str = "audit.k8s.io/v1"

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> AuditOptions:
        return cls(args.audit_policy_file, args.audit_log_path, args.audit_log_maxage, args.audit_log_maxbackup,
                   args.audit_log_maxsize, args.audit_log_compress, args.audit_log_format, args.audit_log_mode,
                   args.audit_log_batch_buffer_size, args.audit_log_version, args.audit_webhook_config_file,
                   args.audit_webhook_initial_backoff, args.audit_webhook_mode, args.audit_webhook_batch_buffer_size,
                   args.audit_webhook_batch_max_size, args.audit_webhook_batch_max_wait,
                   args.audit_webhook_batch_throttle_enable, args.audit_webhook_batch_throttle_qps,
                   args.audit_webhook_batch_throttle_burst, args.audit_webhook_version)

    def validate(self) -> list[str]:
        """kube's AuditOptions.Validate messages."""
        errs: list[str] = []
        if self.log_path:
            for flag, value in (("maxage", self.log_maxage), ("maxbackup", self.log_maxbackup),
                                ("maxsize", self.log_maxsize)):
                if value < 0:
                    errs.append(f"--audit-log-{flag} {value} can't be a negative number")
            if self.log_format not in logbackend.FORMATS:
                errs.append(f"invalid audit log format {self.log_format}, allowed formats are "
                            f"\"{','.join(logbackend.FORMATS)}\"")
            errs += _check_mode("log", self.log_mode, self.log_buffer_size, self.log_version)
        if self.webhook_config_file:
            errs += _check_mode("webhook", self.webhook_mode, self.webhook_buffer_size, self.webhook_version)
            if self.webhook_max_size <= 0:
                errs.append(f"invalid audit batch webhook max batch size {self.webhook_max_size}, must be a "
                            "positive number")
            if self.webhook_throttle and self.webhook_qps <= 0:
                errs.append(f"invalid audit batch webhook throttle QPS {self.webhook_qps}, must be a positive number")
            if self.webhook_throttle and self.webhook_burst <= 0:
                errs.append(f"invalid audit batch webhook throttle burst {self.webhook_burst}, must be a positive "
                            "number")
        return errs


def _check_mode(plugin: str, mode: str, buffer_size: int, version: str) -> list[str]:
    errs = []
    if mode not in MODES:
        errs.append(f"invalid audit {plugin} mode {mode}, allowed modes are \"{','.join(MODES)}\"")
    if buffer_size <= 0:
        errs.append(f"invalid audit batch {plugin} buffer size {buffer_size}, must be a positive number")
    if version not in VERSIONS:
        errs.append(f"invalid audit {plugin} version {version}, allowed versions are \"{','.join(VERSIONS)}\"")
    return errs


class AuditSetup:
    """The auditor for the handler chain and the backends' lifecycle."""

    def __init__(self, auditor: Auditor, hooks: list[webhook.WebhookBackend]) -> None:
        self.auditor = auditor
        self._webhooks = hooks

    async def start(self) -> None:
        for hook in self._webhooks:
            await hook.start()
        self.auditor.sink.start()

    async def stop(self) -> None:
        await asyncio.to_thread(self.auditor.sink.stop)  # the writer drains the queue first
        for hook in self._webhooks:
            await hook.stop()


def build_audit(options: AuditOptions, *, always_allow: bool) -> AuditSetup | None:
    """The audit machinery the flags ask for (None: auditing off); SystemExit with kube's words on a
    bad flag or policy file."""
    errs = options.validate()
    if errs:
        raise SystemExit("invalid audit options: " + "; ".join(errs))
    if not options.policy_file:
        return None
    try:
        loaded = policy.load_policy_file(options.policy_file)
    except policy.PolicyError as err:
        raise SystemExit(f"loading audit policy file: {err}") from err
    backends: list[sink.Backend] = []
    hooks: list[webhook.WebhookBackend] = []
    if options.log_path:
        backends.append(logbackend.LogBackend(options.log_path, options.log_format, options.log_maxsize,
                                              options.log_maxbackup, options.log_maxage, options.log_compress))
    if options.webhook_config_file:
        try:
            target = webhook.load_kubeconfig(options.webhook_config_file)
        except (webhook.WebhookConfigError, OSError, ValueError) as err:
            raise SystemExit(f"initializing audit webhook: {err}") from err
        hook = webhook.WebhookBackend(target, max_size=options.webhook_max_size, max_wait=options.webhook_max_wait,
                                      throttle=options.webhook_throttle, qps=options.webhook_qps,
                                      burst=options.webhook_burst, initial_backoff=options.webhook_initial_backoff)
        backends.append(hook)
        hooks.append(hook)
    if not backends:
        return None  # a policy with nowhere to write: kube audits nothing either
    buffer = max(options.log_buffer_size if options.log_path else 0,
                 options.webhook_buffer_size if options.webhook_config_file else 0, 1)
    return AuditSetup(Auditor(loaded, sink.AuditSink(backends, buffer), always_allow=always_allow), hooks)
