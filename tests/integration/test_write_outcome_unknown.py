"""A write etcd got but did not answer: kube 1.33's answer, on a real etcd frozen under the call.

kube's etcd3 store returns clientv3's error as is; a write etcd does not answer runs until the
request's context ends and the finisher answers 504 ``Timeout`` ("request did not complete within
requested timeout - context deadline exceeded", empty details, no Retry-After: a client must not
send again a create that may have landed). Before, such a write was answered as an unreachable etcd
(500 ServerTimeout with Retry-After 2), which client-go sends again on its own. A write that never
went out (etcd down before it) keeps that ServerTimeout; a write whose connection died under it is
a plain error's 500 (no reason, grpc-go's wording of the call's status).
"""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from genericapi.apimachinery.errors import APIError
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.registry import translate
from genericapi.registry.options import DeleteOptions
from genericapi.registry.store import Store
from genericapi.registry.strategy import Strategy
from genericapi.storage import errors as serrors
from genericapi.storage.etcd import EtcdClient
from test_etcd_wire_write_once import TXN, CountingProxy

from tests.support.freeze import freeze, thaw
from tests.support.procs import EtcdServer

pytestmark = pytest.mark.integration

CM = ResourceInfo("", "v1", "ConfigMap", "configmaps", "configmap", True, ("cm",))
TIMEOUT_STATUS = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                  "message": "Timeout: request did not complete within requested timeout - context deadline exceeded",
                  "reason": "Timeout", "details": {}, "code": 504}


def cm(name: str, rv: str = "", **data: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if rv:
        meta["resourceVersion"] = rv
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": dict(data)}


@pytest.fixture
def own_etcd(tmp_path: Path) -> Iterator[EtcdServer]:
    server = EtcdServer.start(tmp_path)
    yield server
    try:
        os.kill(server.process.pid, signal.SIGCONT)
    except ProcessLookupError:
        pass
    server.stop()


@pytest.fixture
async def store(own_etcd: EtcdServer) -> AsyncIterator[Store]:
    client = EtcdClient([own_etcd.endpoint], timeout=1.0)
    s = Store(CM, Strategy(CM), client, f"/unknown-{uuid.uuid4().hex[:8]}/configmaps")
    await s.start()
    yield s
    await s.stop()
    await client.close()


async def cached_at(store: Store, name: str, rv: str) -> None:
    """Wait until the watch cache holds ``name`` at ``rv`` (the next write starts from it)."""
    key = store.key("default", name)
    for _ in range(1500):
        entry = store.cache.get(key)
        if entry is not None and str(entry.revision) == rv:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the watch cache never saw {name} at {rv}")


async def current(store: Store, name: str) -> dict[str, Any]:
    """The object once etcd answers again (the client reconnects after a thaw)."""
    for _ in range(100):
        try:
            return await store.get("default", name)
        except APIError as err:
            if err.code != 500:
                raise
            await asyncio.sleep(0.1)
    raise AssertionError("etcd never answered again")


async def test_writes_etcd_does_not_answer_are_kubes_request_timeout(own_etcd: EtcdServer, store: Store) -> None:
    pid = own_etcd.process.pid
    created = await store.create("default", cm("a", k="1"))

    freeze(pid)
    try:
        with pytest.raises(APIError) as err:
            await store.create("default", cm("b", k="1"))
    finally:
        thaw(pid)
    assert err.value.status() == TIMEOUT_STATUS
    assert "Retry-After" not in err.value.headers

    got = await current(store, "a")
    assert got["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    await cached_at(store, "a", got["metadata"]["resourceVersion"])
    freeze(pid)
    try:
        with pytest.raises(APIError) as err:
            await store.update("default", "a", cm("a", got["metadata"]["resourceVersion"], k="2"))
    finally:
        thaw(pid)
    assert err.value.status() == TIMEOUT_STATUS

    got = await current(store, "a")
    await cached_at(store, "a", got["metadata"]["resourceVersion"])
    freeze(pid)
    try:
        with pytest.raises(APIError) as err:
            await store.delete("default", "a", DeleteOptions())
    finally:
        thaw(pid)
    assert err.value.status() == TIMEOUT_STATUS


async def test_a_write_whose_connection_dies_under_it_is_a_plain_500(own_etcd: EtcdServer) -> None:
    async with CountingProxy(own_etcd.endpoint) as proxy:
        client = EtcdClient([proxy.endpoint], timeout=5.0)
        store = Store(CM, Strategy(CM), client, f"/unknown-{uuid.uuid4().hex[:8]}/configmaps")
        await store.start()
        try:
            await store.create("default", cm("a", k="1"))
            sent = proxy.count(TXN)
            freeze(own_etcd.process.pid)
            write = asyncio.ensure_future(store.create("default", cm("b", k="1")))
            for _ in range(400):  # until the Txn has gone through the relay to the member
                if proxy.count(TXN) > sent:
                    break
                await asyncio.sleep(0.01)
            assert proxy.count(TXN) == sent + 1, "the create never went out"
            own_etcd.process.kill()  # gone before it answers: the relay closes the client's connection
            own_etcd.process.wait(10)
            with pytest.raises(APIError) as err:
                await write
        finally:
            await store.stop()
            await client.close()
    status = err.value.status()
    assert status["code"] == 500 and "reason" not in status and "details" not in status, status
    assert status["message"].startswith("rpc error: code = Unavailable desc = "), status


async def test_a_write_that_never_went_out_stays_a_server_timeout(own_etcd: EtcdServer, store: Store) -> None:
    own_etcd.process.kill()
    own_etcd.process.wait(10)
    # The client reads the connection's end first (its event loop runs): the create finds no member.
    # (Sent on the dead connection before that, it would be a write of unknown outcome, as above.)
    await asyncio.sleep(0.5)
    with pytest.raises(APIError) as err:
        await store.create("default", cm("b", k="1"))
    assert err.value.status() == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "The create operation against configmaps could not be completed at this time, please try again.",
        "reason": "ServerTimeout", "details": {"name": "create", "kind": "configmaps", "retryAfterSeconds": 2},
        "code": 500}
    assert err.value.headers.get("Retry-After") == "2"


@pytest.mark.parametrize(("code", "details", "status", "message"), [
    (14, "etcdserver: request timed out", 500, "etcdserver: request timed out"),
    (14, "etcdserver: leader changed", 500, "etcdserver: leader changed"),
    (1, "stream reset", 500, "rpc error: code = Canceled desc = stream reset"),
    (4, "Deadline Exceeded", 504, TIMEOUT_STATUS["message"]),
])
def test_etcd_statuses_of_a_sent_write(code: int, details: str, status: int, message: str) -> None:
    """etcd's own error statuses reach kube's handler as clientv3's EtcdError (its text) or grpc-go's
    status error; a read failing so is still an unreachable etcd (Interpret*Error's ServerTimeout)."""
    err = serrors.SentCallError("etcd Txn: " + details, code, details)
    api = translate.to_api_error(err, CM, "x", "update")
    assert (api.code, api.message) == (status, message)
    assert api.reason == ("Timeout" if status == 504 else "")
    assert translate.to_api_error(err, CM, "x", "get").reason == "ServerTimeout"
    # etcd unreachable (no call of it got through): kube's ServerTimeout for writes too.
    unreachable = translate.to_api_error(serrors.UnavailableError("etcd unavailable"), CM, "x", "update")
    assert (unreachable.code, unreachable.reason) == (500, "ServerTimeout")
