"""The webhook client's bound on calls in flight (genericapi.admission.client): a slow webhook gets
at most MAX_IN_FLIGHT requests at once, the rest wait within their own timeout and fail with
kube's ``context deadline exceeded``, and another webhook's client is not held up. Against a real
HTTP server on loopback (the bound is lowered for the test; the production value is checked too).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from genericapi.admission import client as webhook_client
from genericapi.admission.client import CallError, WebhookClient


class Slow:
    """A webhook answering after ``delay`` seconds, counting requests in flight."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.in_flight = 0
        self.peak = 0
        self.peak_at_cut = -1
        self.served = 0

    async def handle(self, request: web.Request) -> web.Response:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            if request.path.startswith("/slow"):
                await asyncio.sleep(self.delay)
            self.served += 1
            return web.json_response({"ok": True})
        finally:
            self.in_flight -= 1


@pytest.fixture
async def server() -> AsyncIterator[tuple[Slow, str]]:
    slow = Slow(3.0)
    app = web.Application()
    app.router.add_route("POST", "/{tail:.*}", slow.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield slow, f"http://127.0.0.1:{port}"
    await runner.cleanup()


def test_the_production_bound() -> None:
    assert webhook_client.MAX_IN_FLIGHT == 64


async def test_calls_beyond_the_bound_wait_and_are_cut_at_their_timeout(
        server: tuple[Slow, str], monkeypatch: pytest.MonkeyPatch) -> None:
    slow, base = server
    monkeypatch.setattr(webhook_client, "MAX_IN_FLIGHT", 3)
    hook = WebhookClient({"url": base + "/slow"}, None)
    other = WebhookClient({"url": base + "/fast"}, None)
    try:
        calls = [asyncio.ensure_future(hook.post(b"{}", 5)) for _ in range(9)]
        # The server's count is read before the calls are cut at 5 s: aiohttp does not cancel a
        # handler whose client went away, so after the cut the abandoned second round still sleeps
        # there while the third round's callers, woken by the freed slots as their own deadline
        # passes, may already have sent theirs (seen once under load: 5).
        peak_before_the_cut = asyncio.ensure_future(asyncio.sleep(4.5, None))
        peak_before_the_cut.add_done_callback(lambda _: setattr(slow, "peak_at_cut", slow.peak))
        await asyncio.sleep(0.3)
        began = time.monotonic()
        assert await other.post(b"{}", 5) == b'{"ok": true}'  # another webhook is not held up
        assert time.monotonic() - began < 2.5  # the slow webhook's slots free up only after 3 s
        results = await asyncio.gather(*calls, return_exceptions=True)
    finally:
        await hook.close()
        await other.close()
    assert peak_before_the_cut.done()
    assert slow.peak_at_cut <= 3 + 1  # the slow webhook's three, plus the other client's one
    answered = [r for r in results if r == b'{"ok": true}']
    cut = [r for r in results if isinstance(r, CallError)]
    assert len(answered) == 3 and len(cut) == 6, results  # a second round of 3 s would end past 5 s
    assert {str(e) for e in cut} == {f'Post "{base}/slow?timeout=5s": context deadline exceeded'}
