"""A drained connection (its stream ids used up, as after ~1 billion calls) on real etcd: the review
of issue 15's transport found EtcdClient closing it under its open calls and watches, a create on the
last stream id sent twice and answered AlreadyExists; both pass since 69a0315."""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aetcd import rpc
from genericapi.storage.etcd import EtcdClient, prefix_end
from genericapi.storage.grpcwire import RpcError

from tests.support.freeze import freeze, thaw
from tests.support.procs import EtcdServer

pytestmark = pytest.mark.integration
WATCH = b"/etcdserverpb.Watch/Watch"


@pytest.fixture
def own_etcd(tmp_path: Path) -> AsyncIterator[EtcdServer]:  # type: ignore[misc]
    server = EtcdServer.start(tmp_path)
    yield server  # type: ignore[misc]
    try:
        os.kill(server.process.pid, signal.SIGCONT)
    except ProcessLookupError:
        pass
    server.stop()


async def test_stream_ids_used_up_do_not_break_the_streams_still_open(own_etcd: EtcdServer) -> None:
    """After ~1 billion calls the connection's stream ids run out (2**31-1): it must drain, the
    streams open on it (a watch, a call in flight) run to their end, new calls go to a new
    connection. (Before 69a0315 EtcdClient._connect closed the drained connection at the next call:
    the watch died, and a Txn in flight failed UNAVAILABLE and was sent again.)"""
    c = EtcdClient([own_etcd.endpoint], timeout=5.0)
    try:
        prefix = f"/wire-ids-{uuid.uuid4().hex[:8]}/".encode()
        rev = await c.put(prefix + b"seed", b"v")
        conn = (await c._connect()).conn
        create = rpc.WatchRequest(create_request=rpc.WatchCreateRequest(
            key=prefix, range_end=prefix_end(prefix), start_revision=rev + 1))
        watch = conn.stream(WATCH, create.SerializeToString())
        created = rpc.WatchResponse.FromString(await watch.__anext__())
        assert created.created
        conn._next_id = 2**31 - 1  # as after 1,073,741,823 calls
        freeze(own_etcd.process.pid)
        in_flight = asyncio.ensure_future(conn.unary(b"/etcdserverpb.KV/Put", rpc.PutRequest(
            key=prefix + b"a", value=b"1").SerializeToString(), 5.0))  # takes the last id
        await asyncio.sleep(0.2)
        assert not conn.usable
        later = asyncio.ensure_future(c.put(prefix + b"b", b"2"))  # a new connection for this one
        await asyncio.sleep(0.3)
        thaw(own_etcd.process.pid)
        await asyncio.wait_for(later, 10)
        assert c._client is not None and c._client.conn is not conn
        try:
            rpc.PutResponse.FromString(await asyncio.wait_for(in_flight, 10))
        except RpcError as err:
            pytest.fail(f"the call on the last stream id was failed by the client itself: {err}")
        keys: set[bytes] = set()
        while len(keys) < 2:  # both writes reach the watch still open on the drained connection
            event = rpc.WatchResponse.FromString(await asyncio.wait_for(watch.__anext__(), 10))
            keys.update(ev.kv.key for ev in event.events)
        assert keys == {prefix + b"a", prefix + b"b"}
        await watch.aclose()  # type: ignore[attr-defined]
    finally:
        await c.close()


async def test_a_create_on_the_last_stream_id_is_not_answered_already_exists(own_etcd: EtcdServer) -> None:
    """The same scenario through EtcdClient.create: the create on the last stream id gets its own
    answer. (Before 69a0315 the next call closed that connection under it and _call sent the create
    again, answered KeyExistsError - 409 AlreadyExists - in 3 of 6 runs for a create that succeeded.)"""
    from genericapi.storage import errors as serrors

    outcomes: list[str] = []
    for _ in range(6):
        c = EtcdClient([own_etcd.endpoint], timeout=5.0)
        try:
            key = f"/wire-ids/{uuid.uuid4().hex}".encode()
            await c.put(b"/wire-ids/seed", b"v")
            (await c._connect()).conn._next_id = 2**31 - 1
            freeze(own_etcd.process.pid)
            create = asyncio.ensure_future(c.create(key, b"1"))
            await asyncio.sleep(0.2)
            other = asyncio.ensure_future(c.get(b"/wire-ids/seed"))
            await asyncio.sleep(0.3)
            thaw(own_etcd.process.pid)
            await asyncio.wait_for(other, 10)
            try:
                await asyncio.wait_for(create, 10)
                outcomes.append("created")
            except serrors.KeyExistsError:
                outcomes.append("KeyExistsError")
        finally:
            await c.close()
    assert outcomes == ["created"] * 6, outcomes
