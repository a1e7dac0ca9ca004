"""``/healthz``, ``/livez``, ``/readyz`` with kube-apiserver's named checks and wording.

kube-apiserver (k8s.io/apiserver/pkg/server/healthz) keeps three ordered lists of checks: ``ping``
and ``log`` everywhere; ``etcd`` and every post-start hook (``poststarthook/<name>``, failing with
"not finished" until the hook returned) on all three; readiness-only checks such as
``informer-sync``; and ``shutdown`` last on ``/readyz`` once a stop began. Each list answers:

- 200 ``ok`` (``?verbose``: one ``[+]<name> ok`` line per check and ``<kind> check passed``);
- 500 with every line, failures as ``[-]<name> failed: reason withheld``, and ``<kind> check failed``;
- ``?exclude=<name>`` (repeatable) skips a check (``[+]<name> excluded: ok``), with a ``warn:`` line
  naming exclusions that matched nothing;
- ``/<kind>/<name>``: that one check, ``ok`` or 500 ``internal server error: <why>``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable

from starlette.requests import Request
from starlette.responses import PlainTextResponse

#: A check: True when healthy; False, or raising (``HealthCheckError`` with kube's reason), when not.
Check = Callable[[], Awaitable[bool]]

_HEADERS = {"X-Content-Type-Options": "nosniff"}

#: The order kube-apiserver 1.33 lists its checks in (a kubeadm v1.33.1 ``/readyz?verbose``); checks
#: of these names are listed in this order whatever order they were added in, others keep their place.
KUBE_ORDER = {name: i for i, name in enumerate((
    "ping", "log", "etcd", "etcd-readiness", "informer-sync",
    *(f"poststarthook/{hook}" for hook in (
        "start-apiserver-admission-initializer", "generic-apiserver-start-informers",
        "priority-and-fairness-config-consumer", "priority-and-fairness-filter", "storage-object-count-tracker-hook",
        "start-apiextensions-informers", "start-apiextensions-controllers", "crd-informer-synced",
        "start-system-namespaces-controller", "start-cluster-authentication-info-controller",
        "start-kube-apiserver-identity-lease-controller", "start-kube-apiserver-identity-lease-garbage-collector",
        "start-legacy-token-tracking-controller", "start-service-ip-repair-controllers", "rbac/bootstrap-roles",
        "scheduling/bootstrap-system-priority-classes", "priority-and-fairness-config-producer",
        "bootstrap-controller", "start-kubernetes-service-cidr-controller", "aggregator-reload-proxy-client-cert",
        "start-kube-aggregator-informers", "apiservice-status-local-available-controller",
        "apiservice-status-remote-available-controller", "apiservice-registration-controller",
        "apiservice-discovery-controller", "kube-apiserver-autoregistration")),
    "autoregister-completion",
    "poststarthook/apiservice-openapi-controller", "poststarthook/apiservice-openapiv3-controller",
))}


def _kube_ordered(checks: dict[str, Check]) -> dict[str, Check]:
    """``checks`` with kube's names in kube's order, in the places those names took."""
    names = list(checks)
    known = sorted((n for n in names if n in KUBE_ORDER), key=KUBE_ORDER.__getitem__)
    it = iter(known)
    return {name: checks[name] for name in (next(it) if n in KUBE_ORDER else n for n in names)}
_MEDIA = "text/plain; charset=utf-8"


class HealthCheckError(Exception):
    """A failing check's reason, shown on its own endpoint (``/readyz/<name>``) as kube does."""


async def _ping() -> bool:
    return True


async def _log() -> bool:
    """kube's ``log`` check asks whether logging still flushes; here: every handler flushes."""
    for handler in logging.getLogger().handlers:
        handler.flush()
    return True


class PostStartHookStatus:
    """The ``poststarthook/<name>`` check: failing ("not finished") until ``finish``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._done = asyncio.Event()

    def finish(self) -> None:
        self._done.set()

    @property
    def finished(self) -> bool:
        return self._done.is_set()

    async def check(self) -> bool:
        if not self._done.is_set():
            raise HealthCheckError("not finished")
        return True


class HealthChecks:
    """The three ordered lists of named checks of one server."""

    def __init__(self) -> None:
        self.healthz_checks: dict[str, Check] = {"ping": _ping, "log": _log}
        self.live: dict[str, Check] = {"ping": _ping, "log": _log}
        self.ready: dict[str, Check] = {"ping": _ping, "log": _log}
        self.shutting_down = False
        self.hooks: dict[str, PostStartHookStatus] = {}

    def add(self, name: str, check: Check, *, liveness: bool = True) -> None:
        """A check on ``/readyz``; with ``liveness`` (kube's AddHealthChecks) on ``/healthz`` and
        ``/livez`` too, else readiness only (kube's AddReadyzChecks)."""
        self.ready[name] = check
        if liveness:
            self.live[name] = check
            self.healthz_checks[name] = check

    def post_start_hook(self, name: str) -> PostStartHookStatus:
        """Register kube's ``poststarthook/<name>`` check on all three lists; ``finish`` it when the
        hook has run."""
        status = self.hooks.get(name)
        if status is None:
            status = self.hooks[name] = PostStartHookStatus(name)
            self.add(f"poststarthook/{name}", status.check)
        return status

    async def _not_shutting_down(self) -> bool:
        if self.shutting_down:
            raise HealthCheckError("process is shutting down")
        return True

    def checks(self, kind: str) -> dict[str, Check]:
        if kind == "readyz":
            return {**_kube_ordered(self.ready), "shutdown": self._not_shutting_down}
        return _kube_ordered(self.live if kind == "livez" else self.healthz_checks)

    @staticmethod
    async def _run(check: Check) -> str | None:
        """None when the check passes, else why not."""
        try:
            return None if await check() else "check failed"
        except HealthCheckError as err:
            return str(err)
        except Exception as err:  # a broken check is a failing check, never a 500 of its own making
            return f"{type(err).__name__}: {err}"

    async def render(self, kind: str, exclude: Iterable[str], verbose: bool) -> tuple[int, str]:
        excluded = set(exclude)
        lines: list[str] = []
        failed = False
        for name, check in self.checks(kind).items():
            if name in excluded:
                excluded.discard(name)
                lines.append(f"[+]{name} excluded: ok")
                continue
            if await self._run(check) is None:
                lines.append(f"[+]{name} ok")
            else:
                failed = True
                lines.append(f"[-]{name} failed: reason withheld")
        if excluded:
            quoted = ", ".join(f'"{name}"' for name in sorted(excluded))
            lines.append(f"warn: some health checks cannot be excluded: no matches for {quoted}")
        if failed:
            return 500, "\n".join(lines) + f"\n{kind} check failed\n"
        if verbose:
            return 200, "\n".join(lines) + f"\n{kind} check passed\n"
        return 200, "ok"

    async def single(self, kind: str, name: str) -> tuple[int, str] | None:
        """One check's answer (``/readyz/<name>``); None when there is no such check."""
        check = self.checks(kind).get(name)
        if check is None:
            return None
        why = await self._run(check)
        return (200, "ok") if why is None else (500, f"internal server error: {why}\n")

    async def _respond(self, kind: str, request: Request) -> PlainTextResponse:
        status, body = await self.render(kind, request.query_params.getlist("exclude"),
                                         "verbose" in request.query_params)
        return PlainTextResponse(body, status_code=status, media_type=_MEDIA, headers=_HEADERS)

    async def healthz(self, request: Request) -> PlainTextResponse:
        return await self._respond("healthz", request)

    async def livez(self, request: Request) -> PlainTextResponse:
        return await self._respond("livez", request)

    async def readyz(self, request: Request) -> PlainTextResponse:
        return await self._respond("readyz", request)


def respond(status: int, body: str) -> PlainTextResponse:
    """A health answer as kube writes it (plain text, nosniff)."""
    return PlainTextResponse(body, status_code=status, media_type=_MEDIA, headers=_HEADERS)
