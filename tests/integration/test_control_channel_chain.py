"""The gRPC control channel of the real chain: the backends started by ``Chain`` stream their
discovery and health to a gateway-side ControlChannel, and a CRD created through the gateway
reaches the stream without any polling."""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from aggregator.control import ControlChannel, MemberDiscovery, client_credentials, parse_member_targets
from support.procs import ChainHandle

from kubechain_cli.chain import Chain, free_port

pytestmark = pytest.mark.integration


@pytest.fixture
async def channel(chain: ChainHandle) -> AsyncIterator[tuple[ControlChannel, asyncio.Queue[MemberDiscovery]]]:
    assert chain.chain.backend_transport == "unix"
    grpc = chain.chain.backend_grpc
    updates: asyncio.Queue[MemberDiscovery] = asyncio.Queue()
    targets = parse_member_targets([f"core-api={grpc['core-api']}", f"extensions-api={grpc['extensions-api']}"])
    control = ControlChannel(targets, updates.put_nowait)
    await control.start()
    yield control, updates
    await control.stop()


async def _until(control: ControlChannel, updates: asyncio.Queue[MemberDiscovery], member: str,
                 gv: tuple[str, str], present: bool, within: float = 10.0) -> MemberDiscovery:
    """The first update (or latest known document) of ``member`` that has ``gv`` or lacks it."""
    index = [m.name for m in control.members].index(member)
    deadline = time.monotonic() + within
    latest = control.latest()[index]
    while latest is None or (gv in latest.group_versions()) != present:
        await asyncio.wait_for(updates.get(), max(0.01, deadline - time.monotonic()))
        latest = control.latest()[index]
    return latest


async def test_backends_stream_their_discovery_and_report_serving(
        channel: tuple[ControlChannel, asyncio.Queue[MemberDiscovery]]) -> None:
    control, updates = channel
    core = await _until(control, updates, "core-api", ("apps", "v1"), True)
    assert ("", "v1") in core.group_versions()
    ext = await _until(control, updates, "extensions-api", ("apiextensions.k8s.io", "v1"), True)
    assert ("apps", "v1") not in ext.group_versions()  # a member streams only what it serves itself
    routes = control.routes()
    assert routes[("", "v1")] == 0 and routes[("apps", "v1")] == 0
    assert routes[("apiextensions.k8s.io", "v1")] == 1
    deadline = time.monotonic() + 5
    while not (control.serving(0) and control.serving(1)):
        assert time.monotonic() < deadline, "backends never reported SERVING"
        await asyncio.sleep(0.02)


async def test_a_crd_reaches_the_stream_when_established_and_leaves_when_deleted(
        chain: ChainHandle, channel: tuple[ControlChannel, asyncio.Queue[MemberDiscovery]]) -> None:
    control, updates = channel
    await _until(control, updates, "extensions-api", ("apiextensions.k8s.io", "v1"), True)
    group = f"ctl{uuid.uuid4().hex[:8]}.example.com"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"gadgets.{group}"},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": {"type": "object"}}}]},
    }
    # The bound is 1 s on a quiet machine, or 5x what one ConfigMap create through the gateway takes
    # right now (a CRD is a create plus two status writes and a publish): the machine's load then
    # stretches both alike, and a poll interval would still show.
    began = time.perf_counter()
    status, _headers, body = await asyncio.to_thread(
        chain.request, "POST", "/api/v1/namespaces/default/configmaps",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "ctl-baseline-"}})
    assert status == 201, body
    bound = max(1.0, 5 * (time.perf_counter() - began))
    created = time.perf_counter()
    status, _headers, body = await asyncio.to_thread(
        chain.request, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    assert status == 201, body
    update = await _until(control, updates, "extensions-api", (group, "v1"), True)
    took = time.perf_counter() - created
    print(f"CRD create through the gateway -> in the extensions-api stream: {took * 1000:.0f} ms")
    assert took < bound, (took, bound)
    assert control.routes()[(group, "v1")] == 1
    gadgets = next(item for item in update.apis["items"] if item["metadata"]["name"] == group)
    assert gadgets["versions"][0]["resources"][0]["resource"] == "gadgets"

    status, _headers, body = await asyncio.to_thread(
        chain.request, "DELETE", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.{group}")
    assert status == 200, body
    deleted = time.perf_counter()
    try:
        await _until(control, updates, "extensions-api", (group, "v1"), False)
    except TimeoutError:
        status, _headers, body = await asyncio.to_thread(
            chain.request, "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.{group}")
        latest = control.latest()[1]
        raise AssertionError(f"still in the stream (generation {latest and latest.generation}); "
                             f"the CRD now: {status} {body.decode()}") from None
    print(f"CRD delete -> gone from the stream: {(time.perf_counter() - deleted) * 1000:.0f} ms")
    assert (group, "v1") not in control.routes()


@pytest.fixture
def tls_chain(tmp_path: Path) -> Iterator[Chain]:
    chain = Chain(tmp_path / "chain", port=free_port(), shutdown_delay=0.5, backend_transport="tls")
    try:
        chain.start(timeout=60)
        yield chain
    finally:
        chain.stop()


async def test_tls_links_stream_over_tcp_and_report_not_serving_on_sigterm(tls_chain: Chain) -> None:
    grpc = tls_chain.backend_grpc
    assert not grpc["core-api"].startswith("unix:")
    targets = parse_member_targets([f"core-api={grpc['core-api']}", f"extensions-api={grpc['extensions-api']}"])
    credentials = await client_credentials(tls_chain.pki.ca, *tls_chain.pki.pair("front-proxy-client"))
    updates: asyncio.Queue[MemberDiscovery] = asyncio.Queue()
    #: (member, serving, whether the session was still open when it changed)
    changes: list[tuple[str, bool, bool]] = []

    def on_serving(member: str, _address: str, serving: bool) -> None:
        changes.append((member, serving, control.replicas[0][0].last_error == ""))

    control = ControlChannel(targets, updates.put_nowait, credentials=credentials, on_serving=on_serving)
    await control.start()
    try:
        core = await _until(control, updates, "core-api", ("apps", "v1"), True)
        assert core.generation >= 1
        deadline = time.monotonic() + 5
        while not control.serving(0):
            assert time.monotonic() < deadline, "core-api never reported SERVING"
            await asyncio.sleep(0.02)
        proc = tls_chain.processes["core-api"]
        proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        while control.serving(0):
            assert time.monotonic() < deadline, "core-api still SERVING after SIGTERM"
            await asyncio.sleep(0.02)
        # Health said NOT_SERVING over the open stream (graceful stop), not just a dropped connection.
        assert ("core-api", False, True) in changes
        await asyncio.to_thread(proc.wait, 15)
        assert control.latest()[0] is not None  # the last document is kept for routing
        assert control.serving(1)  # the other member is untouched
    finally:
        await control.stop()
