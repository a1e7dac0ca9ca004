"""The hand-encoded write transactions are byte for byte what protobuf writes for the same messages."""

from __future__ import annotations

import pytest
from aetcd import rpc
from genericapi.storage.etcdproto import create_txn, delete_txn, update_txn

KEYS = [b"/registry/configmaps/default/a", b"k", b"/registry/" + b"x" * 300, b"/\xff\x00binary"]
VALUES = [b"{}", b"v" * 127, b"v" * 128, b"w" * 70_000, b""]
REVISIONS = [0, 1, 127, 128, 300, 2**31, 2**63 - 1]


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("value", VALUES)
def test_create(key: bytes, value: bytes) -> None:
    expected = rpc.TxnRequest(
        compare=[rpc.Compare(key=key, target=rpc.Compare.CREATE, result=rpc.Compare.EQUAL, create_revision=0)],
        success=[rpc.RequestOp(request_put=rpc.PutRequest(key=key, value=value))])
    assert create_txn(key, value) == expected.SerializeToString()
    assert rpc.TxnRequest.FromString(create_txn(key, value)) == expected


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("revision", REVISIONS)
def test_update(key: bytes, value: bytes, revision: int) -> None:
    expected = rpc.TxnRequest(
        compare=[rpc.Compare(key=key, target=rpc.Compare.MOD, result=rpc.Compare.EQUAL, mod_revision=revision)],
        success=[rpc.RequestOp(request_put=rpc.PutRequest(key=key, value=value))],
        failure=[rpc.RequestOp(request_range=rpc.RangeRequest(key=key))])
    assert update_txn(key, value, revision) == expected.SerializeToString()


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("revision", REVISIONS)
def test_delete(key: bytes, revision: int) -> None:
    expected = rpc.TxnRequest(
        compare=[rpc.Compare(key=key, target=rpc.Compare.MOD, result=rpc.Compare.EQUAL, mod_revision=revision)],
        success=[rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=key))],
        failure=[rpc.RequestOp(request_range=rpc.RangeRequest(key=key))])
    assert delete_txn(key, revision) == expected.SerializeToString()
