"""CorkedTransport (genericapi.server.corking): writes of one loop turn leave as one, nothing is
lost or reordered, close/write_eof flush first, abort drops what is pending; and uvicorn serving
through CorkedHttpToolsProtocol answers whole HTTP/1.1 responses, streamed ones included."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import uvicorn
from genericapi.server.corking import CorkedHttpToolsProtocol, CorkedTransport


class Counting(asyncio.Protocol):
    """The receiving end: every byte that arrived, and whether EOF came."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.eof = asyncio.Event()

    def data_received(self, data: bytes) -> None:
        self.data += data

    def eof_received(self) -> bool | None:
        self.eof.set()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof.set()


async def pair() -> tuple[CorkedTransport, list[bytes], Counting]:
    """A real socket pair: a corked sender whose real transport's writes are recorded."""
    loop = asyncio.get_running_loop()
    a, b = socket.socketpair()
    sender, _ = await loop.connect_accepted_socket(asyncio.Protocol, a)
    receiver = Counting()
    await loop.connect_accepted_socket(lambda: receiver, b)
    writes: list[bytes] = []
    real_write = sender.write

    def recording_write(data: Any) -> None:
        writes.append(bytes(data))
        real_write(data)

    sender.write = recording_write  # type: ignore[method-assign]
    return CorkedTransport(sender, loop), writes, receiver  # type: ignore[arg-type]


async def until(predicate: Any) -> None:
    for _ in range(200):
        if predicate():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("condition never held")


def test_writes_of_one_turn_leave_as_one() -> None:
    async def main() -> None:
        corked, writes, receiver = await pair()
        corked.write(b"HTTP/1.1 200 OK\r\n\r\n")
        corked.write(b"")
        corked.writelines([b"{", memoryview(b'"a":1'), b"}"])
        assert writes == [] and corked.get_write_buffer_size() == 26
        await asyncio.sleep(0)
        assert writes == [b'HTTP/1.1 200 OK\r\n\r\n{"a":1}']
        corked.write(b"second turn")
        await asyncio.sleep(0)
        assert writes[1:] == [b"second turn"]
        await until(lambda: bytes(receiver.data) == b'HTTP/1.1 200 OK\r\n\r\n{"a":1}second turn')
        corked.close()
    asyncio.run(main())


def test_close_and_write_eof_flush_first() -> None:
    async def main() -> None:
        corked, writes, receiver = await pair()
        corked.write(b"last words")
        corked.write_eof()
        assert writes == [b"last words"]
        await receiver.eof.wait()
        assert bytes(receiver.data) == b"last words"
        corked.close()

        corked, writes, receiver = await pair()
        corked.write(b"a")
        corked.write(b"b")
        corked.close()
        assert writes == [b"ab"]
        await receiver.eof.wait()
        assert bytes(receiver.data) == b"ab"
        await asyncio.sleep(0.01)  # the cancelled flush never writes again
        assert writes == [b"ab"]
    asyncio.run(main())


def test_abort_drops_what_is_pending() -> None:
    async def main() -> None:
        corked, writes, receiver = await pair()
        corked.write(b"never sent")
        corked.abort()
        await receiver.eof.wait()
        await asyncio.sleep(0.01)
        assert writes == [] and bytes(receiver.data) == b""
        assert corked.is_closing()  # everything else is the real transport's
    asyncio.run(main())


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    chunks = [b'{"kind":"Status",', b'"code":200}'] if scope["path"] == "/stream" else [b"ok"]
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json")]})
    for i, chunk in enumerate(chunks):
        await send({"type": "http.response.body", "body": chunk, "more_body": i < len(chunks) - 1})
        await asyncio.sleep(0)  # a streamed body leaves turn by turn


def test_uvicorn_through_the_corked_protocol() -> None:
    async def main() -> None:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        config = uvicorn.Config(_app, http=CorkedHttpToolsProtocol, lifespan="off", log_level="error")
        server = uvicorn.Server(config)
        task = asyncio.create_task(server.serve(sockets=[sock]))
        await until(lambda: server.started)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for path, body in (("/", b"ok"), ("/stream", b'{"kind":"Status","code":200}'), ("/", b"ok")):
            writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200 OK\r\n")
            if b"transfer-encoding: chunked" in head.lower():
                got = b""
                while True:
                    size = int((await reader.readline()).strip(), 16)
                    chunk = await reader.readexactly(size + 2)
                    if size == 0:
                        break
                    got += chunk[:-2]
            else:
                length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                                  if line.lower().startswith(b"content-length")))
                got = await reader.readexactly(length)
            assert got == body
        writer.close()
        server.should_exit = True
        await task
    asyncio.run(main())
