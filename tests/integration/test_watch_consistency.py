"""A watch never skips or repeats an event while 20 writers update the same objects."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest
from support.procs import ChainHandle

pytestmark = pytest.mark.integration

WRITERS = 20
UPDATES_PER_WRITER = 15
OBJECTS = 4


async def test_watch_sees_every_write_exactly_once(chain: ChainHandle) -> None:
    base = chain.url + "/api/v1/namespaces/default/configmaps"
    ssl = chain.ssl_context()
    connector = aiohttp.TCPConnector(ssl=ssl, limit=64)
    async with aiohttp.ClientSession(connector=connector) as session:
        start_rv = ""
        for i in range(OBJECTS):
            body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"race-{i}"}, "data": {"n": "0"}}
            async with session.post(base, json=body) as r:
                assert r.status == 201, await r.text()
                start_rv = (await r.json())["metadata"]["resourceVersion"]

        written: list[int] = []

        async def writer(w: int) -> None:
            for u in range(UPDATES_PER_WRITER):
                name = f"race-{(w + u) % OBJECTS}"
                patch = {"data": {"n": f"{w}-{u}"}}
                async with session.patch(f"{base}/{name}", data=json.dumps(patch),
                                         headers={"Content-Type": "application/merge-patch+json"}) as r:
                    assert r.status == 200, await r.text()
                    written.append(int((await r.json())["metadata"]["resourceVersion"]))

        seen: list[int] = []
        expected = WRITERS * UPDATES_PER_WRITER

        async def watcher() -> None:
            url = f"{base}?watch=1&resourceVersion={start_rv}&fieldSelector=metadata.name!%3Dnone"
            async with session.get(url, timeout=aiohttp.ClientTimeout(total=60)) as r:
                assert r.status == 200
                async for line in r.content:
                    event = json.loads(line)
                    if not event["object"]["metadata"]["name"].startswith("race-"):
                        continue  # others' writes in default (a fresh chain's root-CA publisher)
                    assert event["type"] == "MODIFIED", event
                    seen.append(int(event["object"]["metadata"]["resourceVersion"]))
                    if len(seen) >= expected:
                        return

        watch_task = asyncio.create_task(watcher())
        await asyncio.sleep(0.3)
        await asyncio.gather(*(writer(w) for w in range(WRITERS)))
        await asyncio.wait_for(watch_task, 30)

    assert len(seen) == expected
    assert seen == sorted(seen) and len(set(seen)) == len(seen)  # in order, no repeats
    assert sorted(written) == seen  # nothing skipped
