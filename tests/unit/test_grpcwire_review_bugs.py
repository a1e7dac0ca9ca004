"""Defects found reviewing storage/grpcwire.py (issue 15): each test states the behaviour RFC 9113 /
gRPC's PROTOCOL-HTTP2.md / grpc-go ask for and FAILS on the code as reviewed. Not committed: a
failing test would turn HEAD red; see the review report for the fixes."""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import cast

import pytest
from genericapi.storage import errors as serrors
from genericapi.storage.etcd import EtcdClient
from genericapi.storage.grpcwire import Connection, RpcError, StatusCode

from tests.support.h2peer import (
    RST_STREAM,
    S_MAX_CONCURRENT_STREAMS,
    SETTINGS,
    Peer,
    PeerServer,
    grpc_message,
)

PATH = b"/etcdserverpb.KV/Range"


async def _open(server: PeerServer) -> tuple[Connection, Peer]:
    conn = await Connection.open("127.0.0.1", server.port, None, connect_timeout=5.0)
    peer = await server.next_peer()
    await peer.until(lambda: peer.settings_acks >= 1)  # the client has our SETTINGS
    return conn, peer


async def _collect(conn: Connection) -> list[bytes]:
    return [m async for m in conn.stream(PATH, b"")]


@pytest.fixture
async def limited() -> AsyncIterator[PeerServer]:
    async with PeerServer({S_MAX_CONCURRENT_STREAMS: 1}) as s:
        yield s


async def test_a_call_waiting_for_a_stream_slot_keeps_its_deadline(limited: PeerServer) -> None:
    """HANG. A server (or proxy) allowing 1 concurrent stream, held by a watch: a unary call with a
    0.5 s deadline must end DEADLINE_EXCEEDED (grpc-go waits for stream quota under the call's
    context); here it waits for a slot with no deadline at all."""
    conn, peer = await _open(limited)
    watch = asyncio.ensure_future(_collect(conn))
    await peer.until(lambda: 1 in peer.headers)
    started = time.monotonic()
    with pytest.raises(RpcError) as err:
        await asyncio.wait_for(conn.unary(PATH, b"", 0.5), 5)
    assert err.value.code == StatusCode.DEADLINE_EXCEEDED and time.monotonic() - started < 2
    watch.cancel()
    conn.close()


async def test_a_raised_stream_limit_lets_waiting_calls_start(limited: PeerServer) -> None:
    """HANG. SETTINGS_MAX_CONCURRENT_STREAMS raised from 1 to 10 mid-connection: calls waiting for
    a slot may start now (RFC 9113 6.5.2); here they wait until some stream ends, forever when the
    open streams are watches."""
    conn, peer = await _open(limited)
    watch = asyncio.ensure_future(_collect(conn))
    await peer.until(lambda: 1 in peer.headers)
    call = asyncio.ensure_future(conn.unary(PATH, b"", 30.0))
    await asyncio.sleep(0.2)
    peer.send(SETTINGS, 0, 0, struct.pack(">HI", S_MAX_CONCURRENT_STREAMS, 10))
    await peer.until(lambda: 3 in peer.headers, within=3)
    await peer.answer(3, b"ok")
    assert await call == b"ok"
    watch.cancel()
    conn.close()


async def test_a_cancelled_waiter_does_not_swallow_a_free_slot(limited: PeerServer) -> None:
    """HANG. Two calls wait for the one slot; when it frees, the first waiter is handed it and is
    cancelled (its HTTP client went away) before it runs: the second must get the slot. Here the
    wakeup dies with the cancelled waiter and the second waits until another stream ends."""
    conn, peer = await _open(limited)
    first = asyncio.ensure_future(conn.unary(PATH, b"", 30.0))
    await peer.until(lambda: 1 in peer.client_ended)
    gives_up = asyncio.ensure_future(conn.unary(PATH, b"", 30.0))
    waits = asyncio.ensure_future(conn.unary(PATH, b"", 30.0))
    await asyncio.sleep(0.1)
    release = conn._release_slot

    def release_then_cancel() -> None:  # the waiter is cancelled in the turn its slot is handed over
        release()
        gives_up.cancel()

    conn._release_slot = release_then_cancel  # type: ignore[method-assign]
    await peer.answer(1, b"1")
    assert await first == b"1"
    await peer.until(lambda: 3 in peer.headers, within=3)
    await peer.answer(3, b"3")
    assert await waits == b"3"
    conn.close()


async def test_a_slow_reader_bounds_what_the_connection_buffers() -> None:
    """MEMORY. A watch whose consumer stops reading: HTTP/2 flow control must stop the server once
    the stream's window (16 MiB here) is full, as grpc-go's client does (it returns window as the
    application reads). Here WINDOW_UPDATE goes out as bytes arrive, so the server may send without
    end and every message piles up in the stream's deque: 64 MiB buffered for a reader that took one."""
    async with PeerServer() as srv:
        conn, peer = await _open(srv)
        agen = cast(AsyncGenerator[bytes, None], conn.stream(PATH, b""))
        nxt = asyncio.ensure_future(agen.__anext__())
        await peer.until(lambda: 1 in peer.headers)
        peer.head(1)
        await peer.send_data(1, grpc_message(b"created"))
        assert await nxt == b"created"
        chunk = grpc_message(b"e" * (1 << 20))
        sent = 0
        try:
            for _ in range(64):
                await peer.send_data(1, chunk, within=2)
                sent += len(chunk)
        except TimeoutError:
            pass
        await asyncio.sleep(0.5)
        buffered = sum(len(m) for m in conn._streams[1].messages) if 1 in conn._streams else 0
        await agen.aclose()
        conn.close()
        assert sent <= 17 * (1 << 20), f"the server sent {sent >> 20} MiB to a reader that took none"
        assert buffered <= 17 * (1 << 20)


async def test_server_ending_a_stream_the_client_left_open_closes_it(limited: PeerServer) -> None:
    """COSMETIC with grpc-go (which resets such a stream itself), a stream-slot LEAK with other
    servers. The server ends a watch (trailers with END_STREAM) while the client's side is still
    open: the client must close its side (END_STREAM or RST_STREAM NO_ERROR, as grpc-go's client
    does) or the stream stays half-closed and counts against SETTINGS_MAX_CONCURRENT_STREAMS."""
    conn, peer = await _open(limited)
    watch = asyncio.ensure_future(_collect(conn))
    await peer.until(lambda: 1 in peer.headers)
    peer.head(1)
    peer.trailers(1, 0)
    assert await watch == []
    await peer.until(lambda: 1 in peer.rst or 1 in peer.client_ended, within=2)
    conn.close()


# -- through EtcdClient: a draining connection is closed under its own calls --------------------------
async def test_a_failed_watch_does_not_break_the_calls_beside_it() -> None:
    """DATA HAZARD. One watch ending with an error (a non-OK status, a RST_STREAM) makes
    EtcdClient.watch _reset the shared connection: every unary call in flight on it fails and is
    sent again on a new connection (a create twice)."""
    async with PeerServer() as srv:
        client = EtcdClient([f"http://127.0.0.1:{srv.port}"], timeout=5.0)
        try:
            async def follow() -> None:
                async for _ in client.watch(b"/w/", 5):
                    pass

            watch = asyncio.ensure_future(follow())
            peer1 = await srv.next_peer()
            await peer1.until(lambda: 1 in peer1.headers)
            get = asyncio.ensure_future(client.get(b"/a"))
            await peer1.until(lambda: 3 in peer1.client_ended)
            peer1.send(RST_STREAM, 0, 1, (2).to_bytes(4, "big"))  # INTERNAL_ERROR, this stream only
            with pytest.raises(serrors.UnavailableError):
                await asyncio.wait_for(watch, 5)
            await asyncio.sleep(0.2)
            assert not peer1.eof, f"the watch's failure closed the connection under the get (GOAWAY {peer1.goaway})"
            await peer1.answer(3, b"")
            await asyncio.wait_for(get, 5)
            assert not srv.all[1:], "the get was sent again on a new connection"
        finally:
            await client.close()
