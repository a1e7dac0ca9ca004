"""``kubechain up``: the whole chain on this machine, and how to point kubectl at it."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

from . import userconfig
from .chain import Chain
from .supervisor import Supervisor


def replica_count(value: str) -> int:
    """``--replicas``: a whole number of processes per service, at least 1."""
    try:
        count = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid replica count {value!r}: expected a whole number") from None
    if count < 1:
        raise argparse.ArgumentTypeError(f"invalid replica count {count}: must be at least 1")
    return count


class StartInterrupted(Exception):
    """SIGTERM or Ctrl-C arrived before the chain was ready."""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="kubechain")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start etcd, core-api, extensions-api and the gateway")
    up.add_argument("--data-dir", default=".kubechain")
    up.add_argument("--port", type=int, default=6443)
    up.add_argument("--etcd-endpoints", default="", help="use this etcd instead of starting one")
    up.add_argument("--etcd-prefix", default="/registry")
    up.add_argument("--replicas", type=replica_count, default=1,
                    help="processes of each service (core-api, extensions-api, gateway) on the one etcd; "
                         "the first gateway listens on --port, the others on free ports (printed)")
    up.add_argument("--encryption-provider-config", default="",
                    help="kube's EncryptionConfiguration for data at rest (default: Secrets encrypted with "
                         "an aescbc key made once in the data dir; 'none': nothing encrypted)")
    up.add_argument("--runtime-config", action="append", default=[],
                    help="kube-apiserver's --runtime-config for core-api (e.g. authentication.k8s.io/v1beta1=true, "
                         "api/beta=true); repeatable")
    up.add_argument("--authorization-mode", default="RBAC", choices=("RBAC", "AlwaysAllow"),
                    help="RBAC (the default, as a kubeadm cluster: system:masters may do anything, everyone "
                         "else what their bindings grant) or AlwaysAllow (every user may do everything)")
    up.add_argument("--anonymous-auth", default="true", choices=("true", "false"),
                    help="requests without credentials are system:anonymous (default true, as kube: RBAC's "
                         "bootstrap policy lets it read /healthz, /livez, /readyz and /version only); false: 401")
    up.add_argument("--tracing-config-file", default="",
                    help="kube's TracingConfiguration (apiserver.config.k8s.io: endpoint, samplingRatePerMillion) "
                         "for every service: spans over OTLP gRPC, one trace per request across the chain")
    up.add_argument("--max-requests-inflight", type=int, default=400,
                    help="with --max-mutating-requests-inflight: the seats each gateway's API Priority and "
                         "Fairness divides among priority levels (kube's flags and defaults)")
    up.add_argument("--max-mutating-requests-inflight", type=int, default=200)
    up.add_argument("--enable-priority-and-fairness", default="true", choices=("true", "false"),
                    help="API Priority and Fairness at every gateway (default true, as kube)")
    userconfig.add_parser(sub)
    args = parser.parse_args(argv)
    if args.command == "kubeconfig":
        userconfig.run(args)
        return
    chain = Chain(Path(args.data_dir).resolve(), port=args.port, etcd_endpoints=args.etcd_endpoints,
                  etcd_prefix=args.etcd_prefix, replicas=args.replicas,
                  encryption_config=args.encryption_provider_config, runtime_config=args.runtime_config,
                  authorization_mode=args.authorization_mode, tracing_config=args.tracing_config_file)
    chain.anonymous_auth = args.anonymous_auth == "true"
    chain.flowcontrol_flags = ["--max-requests-inflight", str(args.max_requests_inflight),
                               "--max-mutating-requests-inflight", str(args.max_mutating_requests_inflight),
                               f"--enable-priority-and-fairness={args.enable_priority_and_fairness}"]
    stopping = False

    def on_signal(_sig: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    aborted: list[str] = []

    def abort_start(sig: int, _frame: object) -> None:
        aborted.append(signal.Signals(sig).name)
        raise StartInterrupted(aborted[-1])

    # While starting, a signal ends the start at once (what has started is stopped again).
    signal.signal(signal.SIGTERM, abort_start)
    signal.signal(signal.SIGINT, abort_start)
    started = time.monotonic()
    try:
        chain.start()
        if aborted:
            # The handler's exception was raised where Python only reports it (logging's at-fork
            # hook while a child was being spawned): the signal still ends the start.
            raise StartInterrupted(aborted[0])
    except StartInterrupted as interrupted:
        chain.stop()
        print(f"kubechain: {interrupted} while starting; stopped", file=sys.stderr)
        raise SystemExit(1) from None
    except Exception as err:
        chain.stop()
        print(f"kubechain: {err}", file=sys.stderr)
        raise SystemExit(1) from None
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print(f"kubechain is ready at {chain.server_url} ({time.monotonic() - started:.1f}s)")
    if args.replicas > 1:
        print(f"  {args.replicas} replicas of each service; gateways at {', '.join(chain.server_urls)}")
    print("Point kubectl at it:")
    print(f"  export KUBECONFIG={chain.kubeconfig}")
    print("Stop with Ctrl-C.", flush=True)
    # A child that dies is started again (with backoff); only Ctrl-C or SIGTERM stops the chain.
    supervisor = Supervisor(chain)
    try:
        while not stopping:
            supervisor.poll()
            time.sleep(0.2)
    finally:
        chain.stop()
        print("kubechain stopped")
