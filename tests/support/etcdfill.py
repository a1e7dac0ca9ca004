"""Many stored objects fast: copies of one stored object written straight into etcd.

The memory tests need tens of thousands of ConfigMaps; creating them through the API takes minutes
on this machine, while etcd puts of a stored object's copies (new name and uid) take seconds and
reach the services through their watch caches as any write does.
"""

from __future__ import annotations

import asyncio
import uuid

import orjson
from genericapi.storage.etcd import EtcdClient

from kubechain_cli.chain import Chain, etcd_tls_for


async def put_copies(chain: Chain, template_key: bytes, indices: range) -> None:
    """Copies of the object stored at ``template_key``, named ``cm-<i:05d>`` for each index, with
    fresh uids, beside it in etcd (64 puts in flight)."""
    client = EtcdClient([chain.etcd_endpoints], tls=etcd_tls_for(chain.etcd_endpoints))
    try:
        kv, _rev = await client.get(template_key)
        assert kv is not None
        template = orjson.loads(kv.value)
        prefix = template_key.rsplit(b"/", 1)[0]
        gate = asyncio.Semaphore(64)

        async def put(i: int) -> None:
            name = f"cm-{i:05d}"
            obj = {**template, "metadata": {**template["metadata"], "name": name, "uid": str(uuid.uuid4())}}
            async with gate:
                await client.put(prefix + b"/" + name.encode(), orjson.dumps(obj))

        await asyncio.gather(*(put(i) for i in indices))
    finally:
        await client.close()
