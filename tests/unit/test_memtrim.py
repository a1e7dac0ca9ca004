"""genericapi.server.memtrim: glibc's malloc_trim once after a burst of connections, over real sockets.

A lean-protocol server (uvicorn) takes bursts of real TCP connections; the process's trimmer calls
the real ``malloc_trim`` (counted on its way through) once a burst has ended, not for a few
connections, and not twice within its minimum interval.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
import uvicorn
from genericapi.server import memtrim
from genericapi.server.leanhttp import LeanHttpProtocol
from starlette.types import Receive, Scope, Send


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Any:
        yield


async def _ok(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


@pytest.fixture
async def port() -> AsyncIterator[int]:
    config = uvicorn.Config(_ok, host="127.0.0.1", port=0, lifespan="off", log_level="warning",
                            http=LeanHttpProtocol, loop="none")
    server = _Server(config)
    task = asyncio.ensure_future(server.serve())
    for _ in range(500):
        if server.started:
            break
        await asyncio.sleep(0.01)
    try:
        yield server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        server.force_exit = True
        await asyncio.wait_for(task, 10)


async def _burst(port: int, n: int) -> list[asyncio.StreamWriter]:
    writers = []
    for _ in range(n):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        await reader.readuntil(b"ok")
        writers.append(writer)
    return writers


async def test_one_trim_after_each_burst(port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    real = memtrim._load_trim()
    if real is None:
        pytest.skip("libc has no malloc_trim (not glibc)")
    calls: list[int] = []

    def counted(pad: int) -> int:
        calls.append(pad)
        return real(pad)

    trimmer = memtrim.BurstTrimmer(counted, burst=8, quiet=0.2, min_interval=1.5)
    monkeypatch.setattr(memtrim, "TRIMMER", trimmer)
    held = await _burst(port, 3)
    await asyncio.sleep(0.5)
    assert calls == [], "a few connections are no burst"
    held += await _burst(port, 10)
    assert calls == [], "trimmed while the burst was still arriving"
    await asyncio.sleep(0.6)
    assert calls == [0]
    loop = asyncio.get_running_loop()
    started = loop.time()
    held += await _burst(port, 10)  # a second burst soon after: trimmed once the interval has passed
    await asyncio.sleep(0.4)
    if loop.time() - started < 1.0:
        assert calls == [0]
    for _ in range(300):
        if len(calls) == 2:
            break
        await asyncio.sleep(0.01)
    assert calls == [0, 0]
    for w in held:
        w.close()
