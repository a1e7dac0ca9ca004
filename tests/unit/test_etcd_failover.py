"""EtcdClient rotates to the next endpoint once per failed channel: when a member goes away every
call and watch on its channel fails together, and the later reports must not close the channel
the first one already opened to the next member (that stranded the re-established watches)."""

from __future__ import annotations

import pytest
from genericapi.storage.etcd import EtcdClient


class FakeClient:
    def __init__(self, name: str) -> None:
        self.name = name
        self.closed = 0

    async def close(self) -> None:
        self.closed += 1


async def test_only_the_first_report_of_a_failed_channel_rotates() -> None:
    etcd = EtcdClient(["http://a:2379", "http://b:2379", "http://c:2379"])
    old = FakeClient("a")
    etcd._client = old  # type: ignore[assignment]
    await etcd._reset(old)  # type: ignore[arg-type]
    assert etcd._client is None and etcd._index == 1 and old.closed == 1
    new = FakeClient("b")
    etcd._client = new  # type: ignore[assignment]
    for _ in range(5):  # the other calls and watches of the old channel report late
        await etcd._reset(old)  # type: ignore[arg-type]
    assert etcd._client is new and new.closed == 0 and etcd._index == 1
    await etcd._reset(new)  # type: ignore[arg-type]
    assert etcd._client is None and new.closed == 1 and etcd._index == 2


async def test_a_failed_connect_moves_on() -> None:
    etcd = EtcdClient(["http://a:2379", "http://b:2379"])
    await etcd._reset(None)
    assert etcd._index == 1


def test_no_endpoints_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one etcd endpoint"):
        EtcdClient([])
