"""CorkedTransport gathers small writes only (genericapi.server.corking.DIRECT_BYTES): a big write
leaves at once after what is pending, never joined with it, and small writes that add up to a big
one leave as soon as they do, so nothing piles up in one loop turn (a streamed LIST's pieces reach
the real transport, whose flow control then pauses the sender)."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from genericapi.server.corking import DIRECT_BYTES, CorkedTransport


async def recorded() -> tuple[CorkedTransport, list[Any], socket.socket]:
    """A corked transport over a real socket whose real writes are recorded as the objects given."""
    loop = asyncio.get_running_loop()
    a, b = socket.socketpair()
    sender, _ = await loop.connect_accepted_socket(asyncio.Protocol, a)
    writes: list[Any] = []
    real_write = sender.write

    def recording_write(data: Any) -> None:
        writes.append(data)
        real_write(data)

    sender.write = recording_write  # type: ignore[method-assign]
    return CorkedTransport(sender, loop), writes, b  # type: ignore[arg-type]


def drain(peer: socket.socket, size: int) -> bytes:
    peer.setblocking(True)
    got = bytearray()
    while len(got) < size:
        got += peer.recv(1 << 20)
    return bytes(got)


def test_a_big_write_leaves_at_once_after_what_is_pending_and_is_not_copied() -> None:
    async def main() -> None:
        corked, writes, peer = await recorded()
        big = b"b" * DIRECT_BYTES
        corked.write(b"head")
        corked.write(big)
        assert writes == [b"head", big] and writes[1] is big  # before the loop turns, and not joined
        corked.write(b"tail")
        assert corked.get_write_buffer_size() >= 4
        await asyncio.sleep(0)
        assert writes[2:] == [b"tail"]
        received = await asyncio.to_thread(drain, peer, DIRECT_BYTES + 8)
        assert received == b"head" + big + b"tail"
        corked.close()
        peer.close()
    asyncio.run(main())


def test_small_writes_adding_up_to_a_big_one_leave_when_they_do() -> None:
    async def main() -> None:
        corked, writes, peer = await recorded()
        piece = b"p" * (DIRECT_BYTES // 4)
        for _ in range(10):
            corked.write(piece)
        # Two full gatherings left within the turn; the last two pieces wait for its end.
        assert [len(w) for w in writes] == [DIRECT_BYTES, DIRECT_BYTES]
        assert corked.get_write_buffer_size() >= 2 * len(piece)
        await asyncio.sleep(0)
        assert [len(w) for w in writes] == [DIRECT_BYTES, DIRECT_BYTES, 2 * len(piece)]
        received = await asyncio.to_thread(drain, peer, 10 * len(piece))
        assert received == piece * 10
        corked.close()
        peer.close()
    asyncio.run(main())


def test_abort_after_a_gathering_left_drops_only_what_is_pending() -> None:
    async def main() -> None:
        corked, writes, peer = await recorded()
        corked.write(b"x" * DIRECT_BYTES)
        corked.write(b"pending")
        corked.abort()
        await asyncio.sleep(0.01)
        assert writes == [b"x" * DIRECT_BYTES]
        peer.close()
    asyncio.run(main())
