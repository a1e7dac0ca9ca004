"""Bad input that used to get a 500 (or a 200 it should not) and what kube-apiserver answers.

- ``limit``/``timeoutSeconds`` are decoded with Go's ``strconv.ParseInt``: a 400 with its error.
- An escaped lone UTF-16 surrogate (``"\\ud800"``) decodes to U+FFFD in Go: the write succeeds.
- JSON nested past what the decoder takes: a 400 with Go's scanner wording. kube's decoder takes
  10,000 levels and so does kubechain's, under every field validation; one level more is the 400
  (every verb at 10,000 levels: tests/integration/test_deep_custom_resources.py).
- A patch may not move an object to another namespace or drop its name (kube's ``checkName``).
- ``timeoutSeconds`` below zero: kube's watch timer fires at once, so the watch ends at once.
- ``$patch: bogus`` in a strategic merge patch: kube itself answers 500 with an empty reason
  (``mergepatch.ErrBadPatchType`` is not among the errors its patch handler turns into 400s).
- A ``resourceVersion`` Go's ParseUint refuses: a LIST's is a 400, a GET's or WATCH's is kube's own
  500 with an empty reason (its cacher returns the versioner's error unclassified).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from support.procs import ChainHandle

pytestmark = pytest.mark.integration

NS = "default"
CMS = f"/api/v1/namespaces/{NS}/configmaps"


def nested(depth: int) -> bytes:
    return (b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"deep"},"x":'
            + b"[" * depth + b"]" * depth + b"}")


@pytest.mark.parametrize(("query", "message"), [
    ("limit=99999999999999999999999", 'strconv.ParseInt: parsing "99999999999999999999999": value out of range'),
    ("limit=abc", 'strconv.ParseInt: parsing "abc": invalid syntax'),
    ("limit=1_0", 'strconv.ParseInt: parsing "1_0": invalid syntax'),
    ("watch=1&timeoutSeconds=9223372036854775808",
     'strconv.ParseInt: parsing "9223372036854775808": value out of range'),
])
def test_integer_query_parameters_are_parsed_as_go_does(chain: ChainHandle, query: str, message: str) -> None:
    status, body = chain.json("GET", f"{CMS}?{query}")
    assert status == 400, body
    assert body["reason"] == "BadRequest" and body["message"] == message


def test_resource_versions_past_etcds_int64_are_never_a_500(chain: ChainHandle) -> None:
    """Go's ParseUint refuses a resourceVersion past uint64 as it refuses letters (400); one that
    fits uint64 but not etcd's int64 revisions is a future revision: a LIST from the watch cache
    waits for it and answers kube's 504 Too large resource version, one read from etcd (Exact, or a
    limit) answers as etcd's refusal of any future revision does: kube 1.33's 500 with etcd's text
    (its etcd3 store passes ErrFutureRev on unclassified; tests/integration/test_list_revision_answers.py).
    Both were a 500 from protobuf's 'Value out of range'."""
    status, body = chain.json("GET", f"{CMS}?resourceVersion=99999999999999999999")
    assert status == 400 and body["message"] == (
        'invalid resource version: resourceVersion: Invalid value: "99999999999999999999": '
        'strconv.ParseUint: parsing "99999999999999999999": value out of range'), body
    status, body = chain.json("GET", f"{CMS}?resourceVersion=9223372036854775808")
    assert status == 504 and body["reason"] == "Timeout", body
    assert body["message"].startswith("Too large resource version: 9223372036854775808, current: ")
    for query in ("resourceVersion=100000000000&limit=5",
                  "resourceVersion=9223372036854775808&limit=5",
                  "resourceVersion=9223372036854775808&resourceVersionMatch=Exact"):
        status, body = chain.json("GET", f"{CMS}?{query}")
        assert (status, body.get("reason"), body["message"]) == (
            500, None, "etcdserver: mvcc: required revision is a future revision"), (query, body)


@pytest.mark.parametrize(("rv", "why"), [("abc", "invalid syntax"), ("-1", "invalid syntax"),
                                         ("99999999999999999999", "value out of range")])
def test_an_unparseable_resource_version_is_answered_per_verb_as_kube_does(
        chain: ChainHandle, rv: str, why: str) -> None:
    """kube 1.33 checks a LIST's resourceVersion first (storage.ValidateListOptions: 400), while its
    cacher hands the versioner's storage.InvalidError back unclassified on GET and WATCH
    (CacheDelegator.Get, Cacher.Watch), which ErrorToAPIStatus makes a 500 with no reason
    (kubernetes/kubernetes#139485 shows the body from a real server). A GET used to ignore it (200)."""
    problem = f'resourceVersion: Invalid value: "{rv}": strconv.ParseUint: parsing "{rv}": {why}'
    status, created = chain.json("POST", CMS, {"apiVersion": "v1", "kind": "ConfigMap",
                                               "metadata": {"generateName": "rv-"}})
    assert status == 201, created
    name = created["metadata"]["name"]
    status, body = chain.json("GET", f"{CMS}?resourceVersion={rv}")
    assert (status, body.get("reason"), body["message"]) == (400, "BadRequest", f"invalid resource version: {problem}")
    for path in (f"{CMS}/{name}?resourceVersion={rv}", f"{CMS}/missing?resourceVersion={rv}",
                 f"{CMS}?watch=1&resourceVersion={rv}"):
        status, body = chain.json("GET", path)
        assert (status, body.get("reason"), body["message"]) == (500, None, problem), (path, body)
    # The object is untouched and a parseable resourceVersion still reads it.
    status, got = chain.json("GET", f"{CMS}/{name}?resourceVersion=0")
    assert status == 200 and got["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_a_lone_surrogate_becomes_the_replacement_character(chain: ChainHandle) -> None:
    raw = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"surrogate"},"data":{"a":"x\\ud800y"}}'
    status, _h, body = chain.request("POST", CMS, raw=raw)
    assert status == 201, body
    status, got = chain.json("GET", f"{CMS}/surrogate")
    assert got["data"]["a"] == "x\ufffdy"


@pytest.mark.parametrize("validation", ["Strict", "Ignore"])
@pytest.mark.parametrize("levels", [10_001, 20_000])
def test_json_nested_too_deep_is_a_400(chain: ChainHandle, validation: str, levels: int) -> None:
    status, _h, body = chain.request("POST", f"{CMS}?fieldValidation={validation}", raw=nested(levels - 1))
    assert status == 400, body[:300]
    assert b"json parse error: invalid character '[' exceeded max depth" in body


@pytest.mark.parametrize(("validation", "status", "message"), [
    ("Ignore", 201, ""),
    ("Strict", 400, 'ConfigMap in version "v1" cannot be handled as a ConfigMap: '
                    'strict decoding error: unknown field "x"'),
])
def test_json_nested_as_deep_as_kube_takes_decodes(chain: ChainHandle, validation: str, status: int,
                                                   message: str) -> None:
    # 10,000 levels (the object and 9,999 arrays): the unknown field is pruned (refused under Strict), as kube does.
    got_status, _h, raw = chain.request("POST", f"{CMS}?fieldValidation={validation}", raw=nested(9_999))
    assert got_status == status, raw[:300]
    body = json.loads(raw)
    if status == 201:
        assert "x" not in body
        chain.json("DELETE", f"{CMS}/deep")
    else:
        assert body["message"] == message, body


def test_a_patch_cannot_move_or_unname_an_object(chain: ChainHandle) -> None:
    chain.kubectl("create", "configmap", "stays-put", "--from-literal=a=b")
    json_patch = {"Content-Type": "application/json-patch+json"}
    status, body = chain.json("PATCH", f"{CMS}/stays-put",
                              [{"op": "replace", "path": "/metadata/namespace", "value": "kube-system"}],
                              headers=json_patch)
    assert status == 400, body
    assert body["message"] == ("the namespace of the object (kube-system) does not match the namespace on the URL "
                               f"({NS})")
    status, body = chain.json("PATCH", f"{CMS}/stays-put", [{"op": "remove", "path": "/metadata"}],
                              headers=json_patch)
    assert status == 400, body
    assert body["message"] == "the name of the object () does not match the name on the URL (stays-put)"
    status, body = chain.json("PATCH", f"{CMS}/stays-put", {"metadata": {"name": "renamed"}},
                              headers={"Content-Type": "application/merge-patch+json"})
    assert status == 400 and body["message"] == (
        "the name of the object (renamed) does not match the name on the URL (stays-put)")
    status, got = chain.json("GET", f"{CMS}/stays-put")
    assert got["metadata"]["namespace"] == NS and got["data"] == {"a": "b"}


def test_a_negative_watch_timeout_ends_the_watch_at_once(chain: ChainHandle) -> None:
    started = time.monotonic()
    status, _h, _body = chain.request("GET", f"{CMS}?watch=1&timeoutSeconds=-1&resourceVersion=1")
    assert status == 200
    assert time.monotonic() - started < 5


def test_an_unknown_patch_directive_gets_kubes_own_500(chain: ChainHandle) -> None:
    chain.kubectl("create", "configmap", "bogus-directive", "--from-literal=a=b")
    status, body = chain.json("PATCH", f"{CMS}/bogus-directive", {"data": {"$patch": "bogus"}},
                              headers={"Content-Type": "application/strategic-merge-patch+json"})
    assert status == 500 and "reason" not in body  # Go omits the empty StatusReasonUnknown
    assert body["message"] == "unknown patch type: bogus in map: map[$patch:bogus]"


def rss_kib(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def upload(chain: ChainHandle, size: int, chunked: bool) -> tuple[int, bytes]:
    """POST ``size`` bytes of JSON-looking junk, sized or chunked, with http.client."""
    import http.client

    host, port = chain.url.removeprefix("https://").rsplit(":", 1)
    conn = http.client.HTTPSConnection(host, int(port), context=chain.ssl_context(), timeout=60)
    block = b" " * (1 << 20)

    def blocks() -> Iterator[bytes]:
        for _ in range(size // len(block)):
            yield block

    try:
        headers = {"Content-Type": "application/json"}
        if not chunked:
            headers["Content-Length"] = str(size)
        conn.request("POST", CMS, body=blocks(), headers=headers, encode_chunked=chunked)
        resp = conn.getresponse()
        return resp.status, resp.read()
    except (BrokenPipeError, ConnectionResetError):
        return 413, b"connection closed by the server while sending (after it refused)"
    finally:
        conn.close()


def test_oversized_uploads_are_refused_by_the_gateway_without_buffering(chain: ChainHandle) -> None:
    gateway = chain.chain.processes["aggregator"].pid
    before = rss_kib(gateway)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda i: upload(chain, 40 << 20, chunked=bool(i % 2)), range(8)))
    for status, body in results:
        assert status == 413, body[:200]
        if body.startswith(b"{"):
            assert b"Request entity too large: limit is 3145728" in body
    grown = rss_kib(gateway) - before
    assert grown < 64 * 1024, f"the gateway grew by {grown} KiB taking 8 x 40 MiB uploads"
