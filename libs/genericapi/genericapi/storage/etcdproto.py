"""The three etcd transactions of every write, encoded to protobuf bytes directly.

A create, an update and a delete are each one ``TxnRequest`` of fixed shape (kube's etcd3 store
shapes: compare the key's create or mod revision, then put or delete, else read the key). Built as
protobuf message objects and serialized they cost ~15-35 µs per write on this machine; written out
here they cost a few. The bytes are exactly what protobuf itself writes for the same messages
(tests/unit/test_etcdproto.py compares them), so etcd sees no difference.
"""

from __future__ import annotations


def _varint(n: int) -> bytes:
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _bytes_field(tag: bytes, data: bytes) -> bytes:
    """A length-delimited field (``tag`` already encoded); proto3 leaves out an empty one."""
    return tag + _varint(len(data)) + data if data else b""


def _message_field(tag: bytes, data: bytes) -> bytes:
    """A sub-message field: present even when empty."""
    return tag + _varint(len(data)) + data


# Field tags (field number << 3 | wire type).
_KEY, _VALUE = b"\x0a", b"\x12"  # PutRequest/RangeRequest/DeleteRangeRequest key = 1, PutRequest value = 2
_COMPARE, _SUCCESS, _FAILURE = b"\x0a", b"\x12", b"\x1a"  # TxnRequest compare = 1, success = 2, failure = 3
_REQUEST_RANGE, _REQUEST_PUT, _REQUEST_DELETE = b"\x0a", b"\x12", b"\x1a"  # RequestOp oneof request
_TARGET_CREATE, _TARGET_MOD = b"\x10\x01", b"\x10\x02"  # Compare.target = 2 (result = 1 is EQUAL = 0)
_COMPARE_KEY = b"\x1a"  # Compare.key = 3
_CREATE_REVISION, _MOD_REVISION = b"\x28", b"\x30"  # Compare oneof target_union: create_revision = 5, mod = 6


def _read_op(key: bytes) -> bytes:
    return _message_field(_FAILURE, _message_field(_REQUEST_RANGE, _bytes_field(_KEY, key)))


def create_txn(key: bytes, value: bytes) -> bytes:
    """``key`` does not exist (create revision 0): put ``value``."""
    compare = _TARGET_CREATE + _bytes_field(_COMPARE_KEY, key) + _CREATE_REVISION + b"\x00"
    put = _bytes_field(_KEY, key) + _bytes_field(_VALUE, value)
    return _message_field(_COMPARE, compare) + _message_field(_SUCCESS, _message_field(_REQUEST_PUT, put))


def update_txn(key: bytes, value: bytes, mod_revision: int) -> bytes:
    """``key``'s mod revision is ``mod_revision``: put ``value``; else read the key."""
    compare = _TARGET_MOD + _bytes_field(_COMPARE_KEY, key) + _MOD_REVISION + _varint(mod_revision)
    put = _bytes_field(_KEY, key) + _bytes_field(_VALUE, value)
    return (_message_field(_COMPARE, compare) + _message_field(_SUCCESS, _message_field(_REQUEST_PUT, put))
            + _read_op(key))


def delete_txn(key: bytes, mod_revision: int) -> bytes:
    """``key``'s mod revision is ``mod_revision``: delete it; else read the key."""
    compare = _TARGET_MOD + _bytes_field(_COMPARE_KEY, key) + _MOD_REVISION + _varint(mod_revision)
    delete = _bytes_field(_KEY, key)
    return (_message_field(_COMPARE, compare) + _message_field(_SUCCESS, _message_field(_REQUEST_DELETE, delete))
            + _read_op(key))
