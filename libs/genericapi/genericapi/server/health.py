"""``/healthz``, ``/livez``, ``/readyz`` with per-check detail, as kube-apiserver prints them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import PlainTextResponse

Check = Callable[[], Awaitable[bool]]


async def _ping() -> bool:
    return True


class HealthChecks:
    """Named checks; readiness adds checks that only pass once start-up is complete."""

    def __init__(self) -> None:
        self.live: dict[str, Check] = {"ping": _ping}
        self.ready: dict[str, Check] = {"ping": _ping}
        self.shutting_down = False

    def add(self, name: str, check: Check, *, liveness: bool = True) -> None:
        self.ready[name] = check
        if liveness:
            self.live[name] = check

    async def _render(self, kind: str, checks: dict[str, Check], request: Request) -> PlainTextResponse:
        verbose = "verbose" in request.query_params
        exclude = set(request.query_params.getlist("exclude"))
        lines: list[str] = []
        failed = False
        items = list(checks.items())
        if kind == "readyz":
            async def not_shutting_down() -> bool:
                return not self.shutting_down
            items.append(("shutdown", not_shutting_down))
        for name, check in items:
            if name in exclude:
                lines.append(f"[+]{name} excluded: ok")
                continue
            try:
                ok = await check()
            except Exception:
                ok = False
            if ok:
                lines.append(f"[+]{name} ok")
            else:
                failed = True
                lines.append(f"[-]{name} failed: reason withheld")
        if failed:
            body = "\n".join(lines) + f"\n{kind} check failed\n"
            return PlainTextResponse(body, status_code=500)
        if verbose:
            return PlainTextResponse("\n".join(lines) + f"\n{kind} check passed\n")
        return PlainTextResponse("ok")

    async def healthz(self, request: Request) -> PlainTextResponse:
        return await self._render("healthz", self.live, request)

    async def livez(self, request: Request) -> PlainTextResponse:
        return await self._render("livez", self.live, request)

    async def readyz(self, request: Request) -> PlainTextResponse:
        return await self._render("readyz", self.ready, request)
