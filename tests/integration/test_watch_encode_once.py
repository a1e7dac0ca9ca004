"""One encode per watch event, whatever the number of watchers (issue 15, kube's KEP-1152 serialize-once).

core-api is built in process on real etcd and its HTTP app serves JSON watches on ConfigMaps to 1 and
then to 24 concurrent clients. Every JSON encode of the watched object on the server's side is
counted (the codec that turns stored bytes into served bytes, and the watch handler's own encoder):
a change costs the same encodes for 24 watchers as for one, and every client still receives it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import orjson
import pytest
from coreapi.server import build_server
from genericapi.apimachinery import deepjson
from genericapi.handlers import watch as watch_handler
from genericapi.registry import codec as codec_module
from genericapi.server.apiserver import GenericAPIServer, ServerConfig

pytestmark = pytest.mark.integration


class Counting:
    """A stand-in module for ``orjson``/``deepjson`` that counts encodes of one object by name."""

    def __init__(self, real: Any, name: str) -> None:
        self._real = real
        self._name = name
        self.count = 0
        self.loads = real.loads
        for attr in ("JSONDecodeError", "JSONEncodeError"):
            if hasattr(real, attr):
                setattr(self, attr, getattr(real, attr))

    def dumps(self, obj: Any, *args: Any, **kwargs: Any) -> bytes:
        if isinstance(obj, dict) and (obj.get("metadata") or {}).get("name") == self._name:
            self.count += 1
        result: bytes = self._real.dumps(obj, *args, **kwargs)
        return result


@pytest.fixture
async def core(etcd_server: Any) -> AsyncIterator[GenericAPIServer]:
    config = ServerConfig("core-api", [etcd_server.endpoint], etcd_prefix=f"/encode-{uuid.uuid4().hex[:8]}",
                          watch_cache_size=200)
    server = build_server(config, controllers=None)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


async def encodes_for_watchers(server: GenericAPIServer, watchers: int,
                               patch: Callable[[str], tuple[Counting, Counting]]) -> tuple[int, list[bytes]]:
    """Encodes of one ConfigMap's create and update while ``watchers`` clients watch; their bodies."""
    name = f"enc-{uuid.uuid4().hex[:8]}"
    codec_count, handler_count = patch(name)
    transport = httpx.ASGITransport(app=server.app())
    async with httpx.AsyncClient(transport=transport, base_url="http://core-api", timeout=60) as client:
        revision = (await client.get("/api/v1/namespaces/default/configmaps")).json()["metadata"]["resourceVersion"]
        url = f"/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={revision}&timeoutSeconds=4"
        bodies = [asyncio.ensure_future(client.get(url)) for _ in range(watchers)]
        await asyncio.sleep(0.5)  # every watch registered
        store = server.by_resource[("", "configmaps")]
        created = await store.create("default", {"apiVersion": "v1", "kind": "ConfigMap",
                                                 "metadata": {"name": name}, "data": {"k": "v"}})
        created["data"] = {"k": "w"}
        await store.update("default", name, created)
        responses = await asyncio.gather(*bodies)
    return codec_count.count + handler_count.count, [r.content for r in responses]


async def test_one_encode_per_event_whatever_the_watchers(core: GenericAPIServer,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    def patch(name: str) -> tuple[Counting, Counting]:
        codec_count, handler_count = Counting(orjson, name), Counting(deepjson, name)
        monkeypatch.setattr(codec_module, "orjson", codec_count)
        monkeypatch.setattr(watch_handler, "deepjson", handler_count)
        return codec_count, handler_count

    one, bodies_one = await encodes_for_watchers(core, 1, patch)
    many, bodies_many = await encodes_for_watchers(core, 24, patch)
    for body in [*bodies_one, *bodies_many]:
        lines = [orjson.loads(line) for line in body.splitlines()]
        assert [(e["type"], e["object"]["data"]["k"]) for e in lines] == [("ADDED", "v"), ("MODIFIED", "w")]
    assert one >= 2  # the count sees the encodes (one per change at least)
    assert many == one, f"{many} encodes for 24 watchers, {one} for one"
