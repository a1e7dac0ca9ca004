"""gowire: the canonical forms a Go decode/encode round trip gives (cases from Go's time and
encoding/base64 packages, and ObjectMeta's omitempty fields)."""

from __future__ import annotations

import base64

import pytest
from genericapi.apimachinery.gowire import canonical_base64, canonical_time, drop_empty_meta_collections
from genericapi.apimachinery.schemas import SchemaCatalog
from genericapi.apimachinery.validation import validate_object

CATALOG = SchemaCatalog.load()


@pytest.mark.parametrize(("sent", "time", "micro"), [
    ("2024-01-01T10:00:00Z", "2024-01-01T10:00:00Z", None),
    ("2024-01-01T10:00:00.75+02:00", "2024-01-01T08:00:00Z", None),  # MicroTime wants six digits
    ("2024-01-01T00:30:00.123456-01:30", "2024-01-01T02:00:00Z", "2024-01-01T02:00:00.123456Z"),
    ("2023-12-31T23:59:59.999999-00:01", "2024-01-01T00:00:59Z", "2024-01-01T00:00:59.999999Z"),
    ("2024-02-29T12:00:00+00:00", "2024-02-29T12:00:00Z", None),
])
def test_times_are_written_in_utc(sent: str, time: str, micro: str | None) -> None:
    assert canonical_time(sent, micro=False) == time
    if micro is not None:
        assert canonical_time(sent, micro=True) == micro


@pytest.mark.parametrize(("sent", "micro", "message"), [
    ("2024-13-01T00:00:00Z", False, 'parsing time "2024-13-01T00:00:00Z": month out of range'),
    ("2023-02-29T00:00:00Z", False, 'parsing time "2023-02-29T00:00:00Z": day out of range'),
    ("2024-01-32T00:00:00Z", False, 'parsing time "2024-01-32T00:00:00Z": day out of range'),
    ("2024-01-01T24:00:00Z", False, 'parsing time "2024-01-01T24:00:00Z": hour out of range'),
    ("2024-01-01T00:60:00Z", False, 'parsing time "2024-01-01T00:60:00Z": minute out of range'),
    ("2024-01-01T00:00:60Z", False, 'parsing time "2024-01-01T00:00:60Z": second out of range'),
    ("2024-01-01 00:00:00Z", False,
     'parsing time "2024-01-01 00:00:00Z" as "2006-01-02T15:04:05Z07:00": cannot parse "2024-01-01 00:00:00Z" '
     'as "2006"'),
    ("2024-01-01T00:00:00Z", True,
     'parsing time "2024-01-01T00:00:00Z" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "Z" as ".000000"'),
    ("2024-01-01T00:00:00.1234567Z", True,
     'parsing time "2024-01-01T00:00:00.1234567Z" as "2006-01-02T15:04:05.000000Z07:00": '
     'cannot parse "7Z" as "Z07:00"'),
])
def test_bad_times_fail_with_go_wording(sent: str, micro: bool, message: str) -> None:
    with pytest.raises(ValueError) as err:
        canonical_time(sent, micro=micro)
    assert str(err.value) == message


def test_base64_newlines_are_skipped_and_dropped() -> None:
    flat = base64.b64encode(b"x" * 200).decode()
    wrapped = "\n".join(flat[i:i + 76] for i in range(0, len(flat), 76))
    assert canonical_base64(wrapped) == flat
    assert canonical_base64(wrapped.replace("\n", "\r\n") + "\r\n") == flat
    assert canonical_base64(flat) == flat
    assert canonical_base64("") == ""


@pytest.mark.parametrize(("sent", "position"), [
    ("!!!", 0), ("QUF", 0), ("QUFB!UFB", 4), ("QUFB\nQU#B", 7), ("QUFBQQ=", 7), ("QUFB\n=", 5),
    ("QQ==QQ==", 4), ("Q===", 1), ("QUFB QUFB", 4), ("QUFB-_FB", 4),
])
def test_base64_errors_name_the_byte_go_names(sent: str, position: int) -> None:
    with pytest.raises(ValueError) as err:
        canonical_base64(sent)
    assert str(err.value) == f"illegal base64 data at input byte {position}"


def test_empty_object_meta_collections_are_dropped() -> None:
    meta = {"name": "a", "labels": {}, "annotations": {}, "finalizers": [], "ownerReferences": None,
            "managedFields": [], "uid": ""}
    drop_empty_meta_collections(meta)
    assert meta == {"name": "a", "uid": ""}
    kept = {"labels": {"a": "b"}, "finalizers": ["f"]}
    drop_empty_meta_collections(kept)
    assert kept == {"labels": {"a": "b"}, "finalizers": ["f"]}
    drop_empty_meta_collections(None)  # not an object: nothing to do


def test_the_schema_walk_collects_canonical_values_for_every_place() -> None:
    catalog = CATALOG
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p", "annotations": {}, "creationTimestamp": "2024-01-01T01:00:00+01:00"},
           "spec": {"containers": [{"name": "a", "image": "b"}]},
           "status": {"conditions": [{"type": "Ready", "status": "True",
                                      "lastTransitionTime": "2024-01-01T00:00:00.5Z"}]}}
    result = validate_object(pod, catalog, "", "v1", "Pod")
    assert result.decode_error is None
    result.apply_canonical()
    assert pod["metadata"] == {"name": "p", "creationTimestamp": "2024-01-01T00:00:00Z"}
    assert pod["status"]["conditions"][0]["lastTransitionTime"] == "2024-01-01T00:00:00Z"
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"k": "aGk\n="}}
    result = validate_object(secret, catalog, "", "v1", "Secret")
    result.apply_canonical()
    assert secret["data"] == {"k": "aGk="}
