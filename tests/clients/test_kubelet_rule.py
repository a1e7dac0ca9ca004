"""The kubelet rule (kubelet_rule.py) on small test bodies: what counts and what does not."""

from __future__ import annotations

import pytest

from clients.kubelet_rule import kubelet_needs, kubelet_needs_in_source


@pytest.mark.parametrize("body", [
    "async def t(pod):\n    while not await pod.ready():\n        pass\n",
    "def t(pod):\n    pod.exec(['date'])\n",
    "async def t(pod):\n    [line async for line in pod.logs(container='x')]\n",
    "async def t(svc):\n    async with svc.portforward(80) as port:\n        pass\n",
    "async def t(pod):\n    await pod.wait('condition=Ready')\n",
    "async def t(ss):\n    await ss.wait(\"jsonpath='{.status.availableReplicas}'=3\", timeout=30)\n",
    "async def t(tg, pod):\n    tg.start_soon(pod.wait, 'condition=Ready')\n",
    "async def t(pod):\n    async for e, o in pod.watch():\n        break\n",
    "def t():\n    def main():\n        pod.exec(['date'])\n    run(main)\n",
])
def test_kubelet_calls_count(body: str) -> None:
    assert kubelet_needs_in_source(body)


@pytest.mark.parametrize("body", [
    # The client refuses before sending anything.
    "async def t(cm):\n    with pytest.raises(NotImplementedError):\n        await cm.exec(['date'])\n",
    "async def t(pv):\n    with pytest.raises(AttributeError):\n        await pv.portforward(80)\n",
    # API-only calls.
    "async def t(pod):\n    await pod.create()\n    await pod.wait('delete')\n    await pod.label(a='b')\n",
    "async def t(api):\n    async for e, o in api.watch('pods', namespace='x'):\n        break\n",
    "async def t(node):\n    await node.cordon()\n    await node.taint(key='k', value='v', effect='NoSchedule')\n",
])
def test_api_only_calls_do_not(body: str) -> None:
    assert kubelet_needs_in_source(body) == []


def test_a_raises_block_does_not_hide_calls_after_it() -> None:
    body = ("async def t(pod):\n    with pytest.raises(ValueError):\n        await pod.exec([])\n"
            "    await pod.exec(['date'])\n")
    assert kubelet_needs_in_source(body) == [
        ".exec(): runs a command in a container (pods/exec is proxied to the kubelet)"]


def test_live_functions_are_read_from_their_source() -> None:
    async def waits_ready(pod: object) -> None:
        await pod.wait("condition=Ready")  # type: ignore[attr-defined]

    assert kubelet_needs(waits_ready) and kubelet_needs(len) == []
