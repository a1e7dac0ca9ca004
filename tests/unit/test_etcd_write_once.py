"""EtcdClient sends a write at most once (clientv3's isSafeRetryMutableRPC), against the hand-driven
HTTP/2 peer of tests/support/h2peer.py: a write whose request reached the server and then failed is an
UnavailableError, never a second send; one the server never got (connection gone before the bytes
left, REFUSED_STREAM, a stream above a GOAWAY's last id, a refused connect) is sent again; reads are
retried as before. (Before, _call sent any write again after UNAVAILABLE/DEADLINE/CANCELLED: a create
applied by etcd whose answer was lost came back as AlreadyExists.)"""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest
from aetcd import rpc
from genericapi.storage import errors as serrors
from genericapi.storage.etcd import EtcdClient
from genericapi.storage.grpcwire import Connection, RpcError, StatusCode

from tests.support.h2peer import GOAWAY, RST_STREAM, PeerServer

TXN = b"/etcdserverpb.KV/Txn"
RANGE = b"/etcdserverpb.KV/Range"
_TXN_OK = rpc.TxnResponse(succeeded=True, header=rpc.ResponseHeader(revision=7)).SerializeToString()


def _requests(srv: PeerServer, path: bytes) -> int:
    """How many requests for ``path`` reached the peer, over every connection."""
    return sum(1 for peer in srv.all for headers in peer.headers.values() if (b":path", path) in headers)


async def test_a_sent_write_that_times_out_is_not_sent_again() -> None:
    async with PeerServer() as srv:
        client = EtcdClient([f"http://127.0.0.1:{srv.port}"], timeout=0.5)
        try:
            with pytest.raises(serrors.UnavailableError) as err:
                await client.create(b"/a", b"1")  # the peer never answers
            await asyncio.sleep(0.2)
            assert _requests(srv, TXN) == 1
            assert "whether etcd applied it is unknown" in str(err.value)
        finally:
            await client.close()


async def test_a_sent_write_whose_connection_drops_is_not_sent_again() -> None:
    async with PeerServer() as srv:
        client = EtcdClient([f"http://127.0.0.1:{srv.port}"], timeout=5.0)
        try:
            create = asyncio.ensure_future(client.create(b"/a", b"1"))
            peer = await srv.next_peer()
            await peer.until(lambda: 1 in peer.client_ended)
            peer.close()  # the member went away after taking the request: it may have applied it
            with pytest.raises(serrors.UnavailableError) as err:
                await asyncio.wait_for(create, 5)
            await asyncio.sleep(0.2)
            assert _requests(srv, TXN) == 1
            assert "whether etcd applied it is unknown" in str(err.value)
        finally:
            await client.close()


async def test_a_read_whose_connection_drops_is_sent_again() -> None:
    async with PeerServer() as srv:
        client = EtcdClient([f"http://127.0.0.1:{srv.port}"], timeout=5.0)
        try:
            get = asyncio.ensure_future(client.get(b"/a"))
            peer = await srv.next_peer()
            await peer.until(lambda: 1 in peer.client_ended)
            peer.close()
            again = await srv.next_peer()
            await again.until(lambda: 1 in again.client_ended)
            await again.answer(1, b"")
            assert await asyncio.wait_for(get, 5) == (None, 0)
            assert _requests(srv, RANGE) == 2
        finally:
            await client.close()


async def test_a_write_refused_by_the_server_is_sent_again() -> None:
    """RST_STREAM(REFUSED_STREAM) says the server did no work for the stream (RFC 9113 8.7)."""
    async with PeerServer() as srv:
        client = EtcdClient([f"http://127.0.0.1:{srv.port}"], timeout=5.0)
        try:
            create = asyncio.ensure_future(client.create(b"/a", b"1"))
            peer = await srv.next_peer()
            await peer.until(lambda: 1 in peer.client_ended)
            peer.send(RST_STREAM, 0, 1, struct.pack(">I", 0x7))
            await peer.until(lambda: 3 in peer.client_ended)  # sent again, on the same connection
            await peer.answer(3, _TXN_OK)
            assert await asyncio.wait_for(create, 5) == 7
            assert _requests(srv, TXN) == 2 and len(srv.all) == 1
        finally:
            await client.close()


async def test_a_write_above_the_goaway_last_stream_is_sent_again_elsewhere() -> None:
    """GOAWAY with last stream id 0: stream 1 was never processed; the create goes out again on a new
    connection and is answered there once, while the old connection is not closed under it."""
    async with PeerServer() as srv:
        client = EtcdClient([f"http://127.0.0.1:{srv.port}"], timeout=5.0)
        try:
            create = asyncio.ensure_future(client.create(b"/a", b"1"))
            peer = await srv.next_peer()
            await peer.until(lambda: 1 in peer.client_ended)
            peer.send(GOAWAY, 0, 0, struct.pack(">II", 0, 0))
            again = await srv.next_peer()
            await again.until(lambda: 1 in again.client_ended)
            await again.answer(1, _TXN_OK)
            assert await asyncio.wait_for(create, 5) == 7
            assert _requests(srv, TXN) == 2
        finally:
            await client.close()


async def test_a_write_is_sent_to_the_next_endpoint_when_connecting_fails() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    async with PeerServer() as srv:
        client = EtcdClient([f"http://127.0.0.1:{dead}", f"http://127.0.0.1:{srv.port}"], timeout=5.0)
        try:
            create = asyncio.ensure_future(client.create(b"/a", b"1"))
            peer = await srv.next_peer()
            await peer.until(lambda: 1 in peer.client_ended)
            await peer.answer(1, _TXN_OK)
            assert await asyncio.wait_for(create, 5) == 7
        finally:
            await client.close()


async def test_bytes_never_handed_to_the_transport_are_unprocessed() -> None:
    """The connection ends in the same loop turn as the call was started: its frames never left."""
    async with PeerServer() as srv:
        conn = await Connection.open("127.0.0.1", srv.port, None, connect_timeout=5.0)
        await srv.next_peer()
        call = asyncio.ensure_future(conn.unary(TXN, b"x", 5.0))
        await asyncio.sleep(0)  # the call has queued its frames; the flush is the next turn
        conn.connection_lost(None)
        with pytest.raises(RpcError) as err:
            await call
        assert err.value.code == StatusCode.UNAVAILABLE and err.value.unprocessed
        conn.close()


async def test_bytes_handed_to_the_transport_may_have_been_processed() -> None:
    async with PeerServer() as srv:
        conn = await Connection.open("127.0.0.1", srv.port, None, connect_timeout=5.0)
        peer = await srv.next_peer()
        call = asyncio.ensure_future(conn.unary(TXN, b"x", 5.0))
        await peer.until(lambda: 1 in peer.client_ended)
        conn.close()
        with pytest.raises(RpcError) as err:
            await call
        assert err.value.code == StatusCode.UNAVAILABLE and not err.value.unprocessed


async def test_a_slow_call_on_a_live_connection_leaves_the_watches_on_it() -> None:
    """One call timing out ends its own stream (RST_STREAM CANCEL); the member still answers PING, so
    the connection and the watch on it stay, and the read is sent again on it. (Before, any timeout
    closed the connection under every watch on it.)"""
    async with PeerServer() as srv:
        client = EtcdClient([f"http://127.0.0.1:{srv.port}"], timeout=0.5)
        try:
            async def follow() -> None:
                async for _ in client.watch(b"/w/", 1):
                    pass

            watch = asyncio.ensure_future(follow())
            peer = await srv.next_peer()
            await peer.until(lambda: 1 in peer.headers)
            get = asyncio.ensure_future(client.get(b"/a"))
            await peer.until(lambda: 5 in peer.client_ended, within=5)  # stream 3 timed out, sent again
            assert peer.rst.get(3) == 0x8 and peer.pings_seen >= 1
            await peer.answer(5, b"")
            assert await asyncio.wait_for(get, 5) == (None, 0)
            assert not peer.eof and not watch.done() and len(srv.all) == 1
            watch.cancel()
            await asyncio.gather(watch, return_exceptions=True)
        finally:
            await client.close()


async def test_a_call_timing_out_on_a_silent_member_ends_the_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    """The member answers nothing, PING included: the connection ends as keepalive would end it, the
    watch on it fails (to resume elsewhere), the read goes to the next endpoint."""
    monkeypatch.setattr("genericapi.storage.etcd.KEEPALIVE_TIMEOUT", 0.5)
    async with PeerServer(ack_pings=False) as silent, PeerServer() as other:
        client = EtcdClient([f"http://127.0.0.1:{silent.port}", f"http://127.0.0.1:{other.port}"], timeout=0.5)
        try:
            async def follow() -> None:
                async for _ in client.watch(b"/w/", 1):
                    pass

            watch = asyncio.ensure_future(follow())
            peer = await silent.next_peer()
            await peer.until(lambda: 1 in peer.headers)
            get = asyncio.ensure_future(client.get(b"/a"))
            with pytest.raises(serrors.UnavailableError, match="keepalive ping"):
                await asyncio.wait_for(watch, 5)
            again = await other.next_peer()
            await again.until(lambda: 1 in again.client_ended)
            await again.answer(1, b"")
            assert await asyncio.wait_for(get, 5) == (None, 0)
            assert peer.pings_seen >= 1
        finally:
            await client.close()
