"""storage/grpcwire.py against a hand-driven HTTP/2 peer on a real socket (tests/support/h2peer.py):
the frames etcd's grpc-go never sends but a proxy or another server may, each checked against
RFC 9113, RFC 7541 and gRPC's PROTOCOL-HTTP2.md (the review of issue 15's new transport)."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncGenerator, AsyncIterator
from functools import partial
from operator import contains
from typing import cast

import pytest
from genericapi.storage.etcd import EtcdClient
from genericapi.storage.grpcwire import Connection, RpcError, StatusCode

from tests.support.h2peer import (
    CONTINUATION,
    DATA,
    END_HEADERS,
    END_STREAM,
    GOAWAY,
    HEADERS,
    PADDED,
    PING,
    PRIORITY_FLAG,
    RST_STREAM,
    S_INITIAL_WINDOW_SIZE,
    SETTINGS,
    Peer,
    PeerServer,
    grpc_message,
)

PATH = b"/etcdserverpb.KV/Range"


@pytest.fixture
async def server() -> AsyncIterator[PeerServer]:
    async with PeerServer() as s:
        yield s


async def _open(server: PeerServer, **kw: float) -> tuple[Connection, Peer]:
    conn = await Connection.open("127.0.0.1", server.port, None, connect_timeout=5.0, **kw)  # type: ignore[arg-type]
    return conn, await server.next_peer()


async def _collect(conn: Connection, request: bytes = b"") -> list[bytes]:
    return [m async for m in conn.stream(PATH, request)]


async def test_request_headers_are_a_valid_grpc_request(server: PeerServer) -> None:
    conn, peer = await _open(server)
    call = asyncio.ensure_future(conn.unary(PATH, b"req", 3.0))
    await peer.until(lambda: 1 in peer.client_ended)
    headers = peer.headers[1]
    names = [n for n, _ in headers]
    assert names[:4] == [b":method", b":scheme", b":path", b":authority"]  # pseudo-headers first
    assert dict(headers)[b":method"] == b"POST" and dict(headers)[b":path"] == PATH
    assert dict(headers)[b"content-type"] == b"application/grpc" and dict(headers)[b"te"] == b"trailers"
    assert dict(headers)[b"grpc-timeout"] in (b"3000m", b"2999m")
    assert bytes(peer.data[1]) == grpc_message(b"req")
    await peer.answer(1, b"resp")
    assert await call == b"resp"
    conn.close()


async def test_trailers_only_error_with_percent_encoded_message(server: PeerServer) -> None:
    """An error with no DATA: one HEADERS with END_STREAM holding :status and grpc-status;
    grpc-message is percent-encoded UTF-8 (PROTOCOL-HTTP2.md)."""
    conn, peer = await _open(server)
    call = asyncio.ensure_future(conn.unary(PATH, b"", 5.0))
    await peer.until(lambda: 1 in peer.client_ended)
    peer.head(1, [(b"grpc-status", b"9"), (b"grpc-message", b"caf%C3%A9 50%25 done")], end=True)
    with pytest.raises(RpcError) as err:
        await call
    assert (err.value.code, err.value.details) == (9, "café 50% done")
    assert not conn._streams and 1 not in peer.rst  # closed both ways: nothing to reset
    conn.close()


async def test_header_blocks_in_continuation_padded_and_priority_headers(server: PeerServer) -> None:
    """A HEADERS frame carrying PADDED and PRIORITY, its block continued in two CONTINUATION
    frames; the trailers split the same way; messages several to a frame, one split across
    padded frames, one of zero length."""
    conn, peer = await _open(server)
    got = asyncio.ensure_future(_collect(conn))
    await peer.until(lambda: 1 in peer.headers)
    block = peer.encoder.encode([(b":status", b"200"), (b"content-type", b"application/grpc"),
                                 (b"x-long", b"v" * 300)])
    a, b, c = block[:5], block[5:40], block[40:]
    pad = 7
    payload = bytes([pad]) + struct.pack(">IB", 0, 15) + a + b"\0" * pad
    peer.send(HEADERS, PADDED | PRIORITY_FLAG, 1, payload)
    peer.send(CONTINUATION, 0, 1, b)
    peer.send(CONTINUATION, END_HEADERS, 1, c)
    big = bytes(range(256)) * 200  # 51,200 bytes: four frames
    stream = grpc_message(b"one") + grpc_message(b"") + grpc_message(b"two") + grpc_message(big) + grpc_message(b"z")
    await peer.send_data(1, stream, pad=11, frame_size=16000)
    trailer = peer.encoder.encode([(b"grpc-status", b"0"), (b"grpc-message", b"")])
    peer.send(HEADERS, END_STREAM, 1, trailer[:1])
    peer.send(CONTINUATION, END_HEADERS, 1, trailer[1:])
    assert await asyncio.wait_for(got, 10) == [b"one", b"", b"two", big, b"z"]
    conn.close()


async def test_a_split_header_block_may_not_be_interleaved(server: PeerServer) -> None:
    """RFC 9113 6.10: any frame but CONTINUATION of the same stream after a HEADERS without
    END_HEADERS is a connection error; every call fails, nothing hangs."""
    conn, peer = await _open(server)
    first = asyncio.ensure_future(conn.unary(PATH, b"", 30.0))
    second = asyncio.ensure_future(conn.unary(PATH, b"", 30.0))
    await peer.until(lambda: {1, 3} <= peer.client_ended)
    block = peer.encoder.encode([(b":status", b"200"), (b"content-type", b"application/grpc")])
    peer.send(HEADERS, 0, 1, block[:1])
    peer.send(DATA, 0, 3, grpc_message(b"x"))
    for call in (first, second):
        with pytest.raises(RpcError) as err:
            await asyncio.wait_for(call, 5)
        assert err.value.code == StatusCode.UNAVAILABLE and "protocol error" in err.value.details
    await peer.until(lambda: peer.goaway is not None)
    assert peer.goaway == (0, 1)  # PROTOCOL_ERROR
    assert not conn.usable


async def test_padded_data_is_given_back_in_full(server: PeerServer) -> None:
    """Padding counts against flow control (RFC 9113 6.1): the client's WINDOW_UPDATEs give back
    every byte of the padded frames, or a server would stall; more than the 16 MiB windows pass."""
    conn, peer = await _open(server)
    got = asyncio.ensure_future(_collect(conn))
    await peer.until(lambda: 1 in peer.headers)
    peer.head(1)
    body = b"q" * (20 * 1024 * 1024)
    await peer.send_data(1, grpc_message(body), pad=200, within=60)
    peer.trailers(1)
    assert await asyncio.wait_for(got, 60) == [body]
    frames = -(-(len(body) + 5) // (16384 - 201))
    flow = len(body) + 5 + frames * 201
    given_back = peer.window_updates_conn - (16 * 1024 * 1024 - 65535)  # less the opening update
    assert flow - 8 * 1024 * 1024 <= given_back <= flow  # all but what is still under the threshold
    assert peer.send_conn == 16 * 1024 * 1024 - flow + given_back
    conn.close()


async def test_initial_window_size_lowered_mid_request_goes_negative(server: PeerServer) -> None:
    """SETTINGS_INITIAL_WINDOW_SIZE lowered while a request is being sent makes the open stream's
    window negative (RFC 9113 6.9.2): the client sends nothing more until WINDOW_UPDATEs bring it
    positive, and never more than the windows allow."""
    async with PeerServer({S_INITIAL_WINDOW_SIZE: 40000}) as srv:
        conn, peer = await _open(srv)
        request = bytes(range(256)) * 1000  # 256,000 bytes
        call = asyncio.ensure_future(conn.unary(PATH, request, 30.0))
        await peer.until(lambda: len(peer.data[1]) >= 40000)
        peer.recv_initial = 10000
        peer.recv_stream[1] -= 30000  # the window the client must now assume: 40000 - 30000 - 40000 < 0
        peer.send(SETTINGS, 0, 0, struct.pack(">HI", S_INITIAL_WINDOW_SIZE, 10000))
        await peer.until(lambda: peer.settings_acks >= 2)
        await asyncio.sleep(0.2)
        assert len(peer.data[1]) == 40000 and peer.recv_stream[1] == -30000
        peer.give_window(1, 30000)  # back to zero: still nothing may be sent
        await asyncio.sleep(0.2)
        assert len(peer.data[1]) == 40000
        peer.give_window(0, 1 << 20)
        peer.give_window(1, 1 << 20)
        await peer.until(lambda: 1 in peer.client_ended)
        assert bytes(peer.data[1]) == grpc_message(request) and not peer.window_violations
        await peer.answer(1, b"ok")
        assert await call == b"ok"
        conn.close()


async def test_server_dynamic_table_resized_and_evicted(server: PeerServer) -> None:
    """The remembered all-indexed header blocks stay right when the server's encoder shrinks its
    table to nothing (a size update, RFC 7541 6.3) and grows it again, re-indexing other fields at
    the same indices."""
    conn, peer = await _open(server)
    sid = 1
    for round_ in range(6):
        for status, message in ((0, b""), (5, b"not%20found"), (0, b"")):
            call = asyncio.ensure_future(conn.unary(PATH, b"", 5.0))
            await peer.until(partial(contains, peer.client_ended, sid))
            if status:
                peer.head(sid, [(b"grpc-status", str(status).encode()), (b"grpc-message", message)], end=True)
                with pytest.raises(RpcError) as err:
                    await call
                assert (err.value.code, err.value.details) == (5, "not found")
            else:
                await peer.answer(sid, b"r%d" % round_)
                assert await call == b"r%d" % round_
            sid += 2
        # Shrink the server's table to nothing, or grow it back and fill it with other fields in
        # another order: the same all-indexed bytes now mean other headers.
        if round_ % 2 == 0:
            peer.encoder.header_table_size = 0
        else:
            peer.encoder.header_table_size = 4096
            filler = peer.encoder.encode([(b"grpc-message", b"x%d" % round_), (b"grpc-status", b"6")])
            peer.send(HEADERS, END_HEADERS, 999, filler)  # a block for a stream that is not open
    conn.close()


async def test_compressed_message_without_encoding_fails_and_resets(server: PeerServer) -> None:
    conn, peer = await _open(server)
    call = asyncio.ensure_future(conn.unary(PATH, b"", 5.0))
    await peer.until(lambda: 1 in peer.client_ended)
    peer.head(1)
    peer.send(DATA, 0, 1, grpc_message(b"zz", compressed=True))
    with pytest.raises(RpcError) as err:
        await call
    assert err.value.code == StatusCode.INTERNAL
    await peer.until(lambda: 1 in peer.rst)
    assert peer.rst[1] == 0x8  # CANCEL
    conn.close()


@pytest.mark.parametrize(("status", "code"), [(b"503", StatusCode.UNAVAILABLE), (b"404", StatusCode.UNKNOWN)])
async def test_http_status_other_than_200(server: PeerServer, status: bytes, code: int) -> None:
    conn, peer = await _open(server)
    call = asyncio.ensure_future(conn.unary(PATH, b"", 5.0))
    await peer.until(lambda: 1 in peer.client_ended)
    peer.send(HEADERS, END_HEADERS | END_STREAM, 1, peer.encoder.encode([(b":status", status)]))
    with pytest.raises(RpcError) as err:
        await call
    assert err.value.code == code
    assert conn.usable
    conn.close()


async def test_rst_stream_from_the_server(server: PeerServer) -> None:
    conn, peer = await _open(server)
    calls = [asyncio.ensure_future(conn.unary(PATH, b"", 5.0)) for _ in range(3)]
    await peer.until(lambda: {1, 3, 5} <= peer.client_ended)
    for sid, code in ((1, 7), (3, 8), (5, 2)):  # REFUSED_STREAM, CANCEL, INTERNAL_ERROR
        peer.send(RST_STREAM, 0, sid, code.to_bytes(4, "big"))
    codes = []
    for call in calls:
        with pytest.raises(RpcError) as err:
            await call
        codes.append(err.value.code)
    assert codes == [StatusCode.UNAVAILABLE, StatusCode.CANCELLED, StatusCode.INTERNAL]
    assert not conn._streams and conn.usable
    ok = asyncio.ensure_future(conn.unary(PATH, b"", 5.0))
    await peer.until(lambda: 7 in peer.client_ended)
    await peer.answer(7, b"fine")
    assert await ok == b"fine"
    conn.close()


async def test_graceful_goaway_on_the_connection(server: PeerServer) -> None:
    """GOAWAY with last-stream-id 3: stream 5 (a watch) was never taken and fails UNAVAILABLE at
    once (safe to retry elsewhere), streams 1 and 3 still get their answers, no new call starts."""
    conn, peer = await _open(server)
    taken = asyncio.ensure_future(conn.unary(PATH, b"", 5.0))
    also_taken = asyncio.ensure_future(conn.unary(PATH, b"", 5.0))
    watch = asyncio.ensure_future(_collect(conn))
    await peer.until(lambda: {1, 3} <= peer.client_ended and 5 in peer.headers)
    peer.send(GOAWAY, 0, 0, struct.pack(">II", 3, 0))
    with pytest.raises(RpcError) as err:
        await asyncio.wait_for(watch, 5)
    assert err.value.code == StatusCode.UNAVAILABLE
    assert not conn.usable
    with pytest.raises(RpcError):
        await conn.unary(PATH, b"", 5.0)
    await peer.answer(1, b"a")
    await peer.answer(3, b"b")
    assert (await taken, await also_taken) == (b"a", b"b")
    conn.close()


async def test_connection_loss_fails_every_waiting_call(server: PeerServer) -> None:
    conn, peer = await _open(server)
    unary = [asyncio.ensure_future(conn.unary(PATH, b"", 30.0)) for _ in range(5)]
    streams = [asyncio.ensure_future(_collect(conn)) for _ in range(5)]
    await peer.until(lambda: len(peer.headers) == 10)
    peer.writer.transport.abort()
    for call in unary + streams:
        with pytest.raises(RpcError) as err:
            await asyncio.wait_for(call, 5)
        assert err.value.code == StatusCode.UNAVAILABLE
    assert not conn._streams and not conn.usable
    with pytest.raises(RpcError):
        await conn.unary(PATH, b"", 5.0)


async def test_keepalive_ends_a_silent_peer() -> None:
    """A peer that stops answering (no PING ack) ends the connection after keepalive + timeout:
    a watch waiting with no deadline fails instead of hanging."""
    async with PeerServer(ack_pings=False) as srv:
        conn, peer = await _open(srv, keepalive=0.3, keepalive_timeout=0.3)
        watch = asyncio.ensure_future(_collect(conn))
        with pytest.raises(RpcError) as err:
            await asyncio.wait_for(watch, 5)
        assert err.value.code == StatusCode.UNAVAILABLE and "keepalive" in err.value.details
        assert peer.pings_seen == 1


async def test_server_pings_are_acked_with_their_payload(server: PeerServer) -> None:
    conn, peer = await _open(server)
    peer.send(PING, 0, 0, b"12345678")
    await peer.until(lambda: bool(peer.ping_acks))
    assert peer.ping_acks == [b"12345678"]
    conn.close()


async def test_a_deadline_resets_the_stream(server: PeerServer) -> None:
    conn, peer = await _open(server)
    with pytest.raises(RpcError) as err:
        await conn.unary(PATH, b"", 0.2)
    assert err.value.code == StatusCode.DEADLINE_EXCEEDED
    await peer.until(lambda: 1 in peer.rst)
    assert peer.rst[1] == 0x8 and not conn._streams
    conn.close()


async def test_a_cancelled_watch_is_reset_and_forgotten(server: PeerServer) -> None:
    conn, peer = await _open(server)
    for i in range(200):
        sid = 2 * i + 1
        agen = cast(AsyncGenerator[bytes, None], conn.stream(PATH, b"w"))
        nxt = asyncio.ensure_future(agen.__anext__())
        await peer.until(partial(contains, peer.headers, sid))
        peer.head(sid)
        peer.send(DATA, 0, sid, grpc_message(b"created"))
        assert await nxt == b"created"
        await agen.aclose()
        await peer.until(partial(contains, peer.rst, sid))
    assert not conn._streams and not conn._stream_slots
    assert all(peer.rst[2 * i + 1] == 0x8 for i in range(200))
    conn.close()


async def test_a_frame_larger_than_the_max_frame_size_is_a_connection_error(server: PeerServer) -> None:
    conn, peer = await _open(server)
    call = asyncio.ensure_future(conn.unary(PATH, b"", 5.0))
    await peer.until(lambda: 1 in peer.client_ended)
    peer.head(1)
    peer.send(DATA, 0, 1, b"x" * 16385)
    with pytest.raises(RpcError) as err:
        await call
    assert err.value.code == StatusCode.UNAVAILABLE
    await peer.until(lambda: peer.goaway is not None)
    assert peer.goaway is not None and peer.goaway[1] == 1


async def test_writes_keep_each_streams_frames_in_order(server: PeerServer) -> None:
    """Many concurrent calls with requests larger than the windows: each stream's HEADERS comes
    before its DATA, new stream ids only grow (RFC 9113 5.1.1), each request arrives intact."""
    async with PeerServer({S_INITIAL_WINDOW_SIZE: 20000}) as srv:
        conn, peer = await _open(srv)
        requests = {2 * i + 1: bytes([i]) * (30000 + 977 * i) for i in range(40)}
        calls = {sid: asyncio.ensure_future(conn.unary(PATH, body, 30.0)) for sid, body in requests.items()}
        await peer.until(lambda: len(peer.headers) == 40)
        for sid in requests:
            peer.give_window(sid, 1 << 20)
        peer.give_window(0, 1 << 24)
        await peer.until(lambda: set(requests) <= peer.client_ended)
        opened: list[int] = []
        for kind, _flags, sid, _length in peer.frames:
            if kind == HEADERS:
                opened.append(sid)
            elif kind == DATA:
                assert sid in opened
        assert opened == sorted(opened) and not peer.window_violations
        for sid, body in requests.items():
            assert bytes(peer.data[sid]) == grpc_message(body)
            await peer.answer(sid, b"%d" % sid)
        assert [await c for c in calls.values()] == [b"%d" % s for s in requests]
        conn.close()


async def test_the_last_stream_id_is_used_then_the_connection_drains(server: PeerServer) -> None:
    """Stream ids end at 2**31-1 (RFC 9113 5.1.1): the call that takes it runs to its end, the
    connection says it is no longer usable and refuses new calls as UNAVAILABLE (to be retried on a
    new connection) instead of sending an id the server must treat as a connection error."""
    conn, peer = await _open(server)
    conn._next_id = 2**31 - 3
    first = asyncio.ensure_future(conn.unary(PATH, b"", 5.0))
    last = asyncio.ensure_future(conn.unary(PATH, b"", 5.0))
    await peer.until(lambda: {2**31 - 3, 2**31 - 1} <= peer.client_ended)
    assert not conn.usable
    with pytest.raises(RpcError) as err:
        await conn.unary(PATH, b"", 5.0)
    assert err.value.code == StatusCode.UNAVAILABLE
    await peer.answer(2**31 - 1, b"last")
    await peer.answer(2**31 - 3, b"first")
    assert (await first, await last) == (b"first", b"last")
    conn.close()


async def test_graceful_goaway_lets_taken_calls_finish_through_etcd_client() -> None:
    """etcd (grpc-go GracefulStop) sends GOAWAY and finishes the streams it took: EtcdClient's
    next call goes to a new connection and the taken call gets its answer from the draining one,
    sent once (before 69a0315 the next call closed the draining connection and _call sent the
    taken call again: a create twice, answered AlreadyExists)."""
    async with PeerServer() as srv:
        client = EtcdClient([f"http://127.0.0.1:{srv.port}"], timeout=5.0)
        try:
            first = asyncio.ensure_future(client.get(b"/a"))
            peer1 = await srv.next_peer()
            await peer1.until(lambda: 1 in peer1.client_ended)
            peer1.send(GOAWAY, 0, 0, struct.pack(">II", 1, 0))  # NO_ERROR: stream 1 will be answered
            await asyncio.sleep(0.1)
            second = asyncio.ensure_future(client.get(b"/b"))
            peer2 = await srv.next_peer()
            await peer2.until(lambda: 1 in peer2.client_ended)
            await peer2.answer(1, b"")  # an empty RangeResponse
            await asyncio.sleep(0.3)
            assert not peer1.eof, f"EtcdClient closed the draining connection (GOAWAY {peer1.goaway})"
            await peer1.answer(1, b"")
            await asyncio.wait_for(second, 5)
            await asyncio.wait_for(first, 5)
            requests = len(peer1.client_ended) + len(peer2.client_ended)
            assert requests == 2, f"{requests} Range requests for 2 gets (peer1 reset: {peer1.rst})"
        finally:
            await client.close()


async def test_a_call_timing_out_on_a_draining_connection_closes_that_one_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A draining connection (GOAWAY) whose taken call times out while its member answers nothing is
    done for: it is closed (the watch still on it fails, to resume elsewhere) and the current
    connection is left alone. (Before, _reset saw that the failed channel was no longer the current
    one and returned: a draining connection to a member that froze kept its watches until keepalive
    gave up on it.)"""
    monkeypatch.setattr("genericapi.storage.etcd.KEEPALIVE_TIMEOUT", 0.5)
    async with PeerServer() as srv:
        client = EtcdClient([f"http://127.0.0.1:{srv.port}"], timeout=0.5)
        try:
            async def follow() -> None:
                async for _ in client.watch(b"/w/", 1):
                    pass

            watch = asyncio.ensure_future(follow())
            peer1 = await srv.next_peer()
            await peer1.until(lambda: 1 in peer1.headers)
            first = asyncio.ensure_future(client.get(b"/a"))
            await peer1.until(lambda: 3 in peer1.client_ended)
            peer1.send(GOAWAY, 0, 0, struct.pack(">II", 3, 0))  # streams 1 and 3 taken; never answered
            peer1.ack_pings = False  # and the member goes silent
            await asyncio.sleep(0.1)
            second = asyncio.ensure_future(client.get(b"/b"))
            peer2 = await srv.next_peer()
            await peer2.until(lambda: 1 in peer2.client_ended)
            await peer2.answer(1, b"")
            await asyncio.wait_for(second, 5)
            current = client._client
            assert current is not None
            await peer1.until(lambda: peer1.eof, within=5)  # closed once the get on it timed out
            with pytest.raises(Exception, match="etcd watch"):
                await asyncio.wait_for(watch, 5)
            assert not peer2.eof and client._client is current
            first.cancel()
            await asyncio.gather(first, return_exceptions=True)
        finally:
            await client.close()
