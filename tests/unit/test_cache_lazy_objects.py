"""The watch cache keeps bytes and selector attributes, and decodes objects only when asked.

Issue 15: a decoded 800-byte ConfigMap is ~2.3 KB of Python objects, its JSON ~0.9; the cache
keeps the JSON plus kube's GetAttrs (labels, the kind's selectable fields) and evaluates label and
field selectors on those (``registry/selection.py``). These tests check, with a codec that counts
its decodes and tracemalloc (allocations, not time): that listing, selecting and watching decode
nothing a plain JSON answer does not need; that every field selector a built-in kind supports
answers the same on the attributes as on the object; that an object leaving a watcher's selection
is still sent as DELETED with its previous content; and that bad selectors are still kube's 400s.
"""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from coreapi import catalog
from coreapi.strategies import strategy_class
from genericapi.apimachinery import fields, labels
from genericapi.apimachinery.errors import APIError
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.handlers.params import list_options
from genericapi.registry.codec import JsonCodec
from genericapi.registry.options import ListResult
from genericapi.registry.selection import SelectionPredicate, attrs_function, selection_predicate
from genericapi.storage.cacher import NO_ATTRS, CacheEvent, CacheView, CacheWatcher, right_sized
from genericapi.storage.etcd import KeyValue, WatchBatch, WatchEvent


class CountingCodec(JsonCodec):
    """JsonCodec counting the objects parsed back from the cache's JSON."""

    def __init__(self) -> None:
        super().__init__()
        self.loads_calls = 0

    def loads(self, served: bytes) -> dict[str, Any]:
        self.loads_calls += 1
        return super().loads(served)


def _view(group: str = "", plural: str = "configmaps", codec: JsonCodec | None = None) -> CacheView:
    # No etcd behind it: the tests feed it lists and watch batches themselves.
    source = SimpleNamespace(client=None, prefix=f"/registry/{plural}/".encode())
    return CacheView(source=source, codec=codec or CountingCodec(), window=100,  # type: ignore[arg-type]
                     attrs=attrs_function(group, plural))


def _cm(i: int, ns: str = "bench", labels_: dict[str, str] | None = None, size: int = 400) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"cm-{i}", "namespace": ns, "uid": f"uid-{i}",
                            "creationTimestamp": "2026-11-28T01:30:00Z"}
    if labels_:
        meta["labels"] = labels_
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"v": "x" * size}}


def _key(obj: dict[str, Any], prefix: bytes = b"/registry/configmaps/") -> bytes:
    meta = obj["metadata"]
    if meta.get("namespace"):
        return prefix + f"{meta['namespace']}/{meta['name']}".encode()
    return prefix + meta["name"].encode()


def _load(view: CacheView, objs: list[dict[str, Any]], prefix: bytes = b"/registry/configmaps/") -> None:
    view.begin_load()
    view.load_page([KeyValue(_key(o, prefix), orjson.dumps(o), 5, 5 + i) for i, o in enumerate(objs)])
    view.end_load(5 + len(objs))


def test_cached_objects_hold_their_json_not_a_decoded_dict() -> None:
    n = 400
    values = [_cm(i, labels_={"app": "web"} if i % 2 else None, size=600) for i in range(n)]
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        view = _view()
        _load(view, values)
        gc.collect()
        held = (tracemalloc.get_traced_memory()[0] - base) / n
        base = tracemalloc.get_traced_memory()[0]
        decoded = [JsonCodec().decode(orjson.dumps(v), 7)[0] for v in values]
        gc.collect()
        dict_cost = (tracemalloc.get_traced_memory()[0] - base) / n
        del decoded
    finally:
        tracemalloc.stop()
    raw = len(view.get(b"/registry/configmaps/bench/cm-1").raw)  # type: ignore[union-attr]
    # The JSON (~800 bytes) plus the entry, its key, the store's slot and half the objects' labels;
    # with the decoded dict kept it was the JSON plus ~2 KB more.
    assert held < raw + 600, (held, raw, dict_cost)
    assert dict_cost > 1000, dict_cost  # what was saved is real
    assert view._codec.loads_calls == 0  # type: ignore[attr-defined]


def test_obj_decodes_on_demand_and_decode_gives_a_private_copy() -> None:
    view = _view()
    _load(view, [_cm(1, labels_={"a": "b"})])
    entry = view.get(b"/registry/configmaps/bench/cm-1")
    assert entry is not None
    obj = entry.obj
    assert obj["metadata"]["resourceVersion"] == "5" and obj["metadata"]["labels"] == {"a": "b"}
    assert entry.obj is obj  # looked up again: remembered, not parsed again
    mine = entry.decode()
    assert mine == obj and mine is not obj
    mine["metadata"]["name"] = "changed"
    assert entry.obj["metadata"]["name"] == "cm-1"
    assert entry.attrs == ({"a": "b"}, None)
    plain = _view()
    _load(plain, [_cm(2)])
    assert plain.get(b"/registry/configmaps/bench/cm-2").attrs is NO_ATTRS  # type: ignore[union-attr]


def test_list_results_decode_only_when_objects_are_asked_for() -> None:
    codec = CountingCodec()
    view = _view(codec=codec)
    _load(view, [_cm(i) for i in range(10)])
    items, rev = view.list(b"/registry/configmaps/bench/")
    result = ListResult(None, rev, entries=items)
    raws = result.raws
    assert len(raws) == 10 and codec.loads_calls == 0
    assert [orjson.loads(r)["metadata"]["name"] for r in raws] == sorted(f"cm-{i}" for i in range(10))
    objs = [o for o, _ in result.items]
    assert codec.loads_calls == 10 and objs[0]["metadata"]["name"] == "cm-0"
    assert result.raws == raws  # the same bytes once decoded
    result.items = []
    assert result.raws == []


def _label(text: str) -> labels.LabelSelector:
    return labels.parse_label_selector(text)


def _field(group: str, plural: str, text: str) -> fields.FieldSelector:
    return fields.convert_field_selector(group, "v1", plural, fields.parse_field_selector(text))


def test_label_selected_list_decodes_nothing() -> None:
    codec = CountingCodec()
    view = _view(codec=codec)
    objs = [_cm(i, ns="a" if i % 3 else "b", labels_={"tier": "front" if i % 2 else "back", "i": str(i)})
            for i in range(300)]
    _load(view, objs)
    for text in ("tier=front", "tier!=front", "tier in (back)", "!tier", "i", "tier=front,i notin (1,3)"):
        pred = selection_predicate("", "configmaps", True, _label(text), None)
        assert pred is not None
        got, _ = view.list(b"/registry/configmaps/", pred)
        want = sorted(_key(o) for o in objs if pred(orjson.loads(orjson.dumps(o))))
        assert [c.key for c in got] == want, text
        field_pred = selection_predicate("", "configmaps", True, None,
                                         _field("", "configmaps", "metadata.namespace=a,metadata.name!=cm-1"))
        got, _ = view.list(b"/registry/configmaps/", field_pred)
        assert [c.key for c in got] == sorted(_key(o) for o in objs
                                               if o["metadata"]["namespace"] == "a" and o["metadata"]["name"] != "cm-1")
    assert codec.loads_calls == 0


#: Every built-in kind with selectable fields beyond metadata, objects that differ in each field,
#: and selectors over each (as the handler converts them).
_KINDS: list[tuple[str, str, bool, str, list[dict[str, Any]], list[str]]] = [
    ("", "pods", True, "v1", [
        {"metadata": {"name": "p1", "namespace": "d"},
         "spec": {"nodeName": "n1", "restartPolicy": "Always", "schedulerName": "s", "serviceAccountName": "sa",
                  "hostNetwork": True},
         "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.1"}], "nominatedNodeName": "x"}},
        {"metadata": {"name": "p2", "namespace": "e"}, "spec": {"restartPolicy": "Never"},
         "status": {"phase": "Pending"}},
        {"metadata": {"name": "p3", "namespace": "d"}, "spec": {"nodeName": "n2"}},
    ], ["spec.nodeName=n1", "spec.host=n2", "spec.nodeName=", "status.phase=Running,metadata.namespace=d",
        "spec.hostNetwork=false", "status.podIP=10.0.0.1", "spec.restartPolicy!=Always",
        "spec.schedulerName=s,spec.serviceAccountName=sa", "status.nominatedNodeName=x", "metadata.name=p2"]),
    ("", "events", True, "v1", [
        {"metadata": {"name": "e1", "namespace": "d"}, "involvedObject": {"kind": "Pod", "name": "p", "uid": "u"},
         "reason": "Started", "source": {"component": "kubelet"}, "type": "Normal"},
        {"metadata": {"name": "e2", "namespace": "d"}, "involvedObject": {"kind": "Node", "name": "n"},
         "reportingComponent": "ctl", "type": "Warning"},
    ], ["involvedObject.kind=Pod", "source=ctl", "type!=Normal,reason=", "involvedObject.uid=u",
        "reportingComponent=ctl", "involvedObject.name=n,metadata.namespace=d"]),
    ("events.k8s.io", "events", True, "v1", [
        {"metadata": {"name": "e1", "namespace": "d"}, "regarding": {"kind": "Pod", "name": "p"},
         "reportingController": "k", "deprecatedSource": {"component": "old"}, "type": "Normal"},
        {"metadata": {"name": "e2", "namespace": "d"}, "regarding": {"kind": "Node"}, "reason": "R"},
    ], ["regarding.kind=Pod", "reportingController=k", "source=old", "reason=R", "regarding.name!=p"]),
    ("", "secrets", True, "v1", [
        {"metadata": {"name": "s1", "namespace": "d"}, "type": "Opaque"},
        {"metadata": {"name": "s2", "namespace": "d"}, "type": "kubernetes.io/tls"},
    ], ["type=Opaque", "type!=Opaque,metadata.name=s2"]),
    ("", "services", True, "v1", [
        {"metadata": {"name": "a", "namespace": "d"}, "spec": {"clusterIP": "None", "type": "ClusterIP"}},
        {"metadata": {"name": "b", "namespace": "d"}, "spec": {"clusterIP": "10.0.0.9", "type": "NodePort"}},
    ], ["spec.clusterIP=None", "spec.type=NodePort"]),
    ("", "namespaces", False, "v1", [
        {"metadata": {"name": "a"}, "status": {"phase": "Active"}},
        {"metadata": {"name": "b"}, "status": {"phase": "Terminating"}},
    ], ["status.phase=Active", "metadata.name=b", "status.phase!=Active"]),
    ("", "nodes", False, "v1", [
        {"metadata": {"name": "n1"}, "spec": {"unschedulable": True}},
        {"metadata": {"name": "n2"}, "spec": {}},
    ], ["spec.unschedulable=true", "spec.unschedulable=false"]),
    ("", "replicationcontrollers", True, "v1", [
        {"metadata": {"name": "r1", "namespace": "d"}, "status": {"replicas": 2}},
        {"metadata": {"name": "r2", "namespace": "d"}},
    ], ["status.replicas=2", "status.replicas=0"]),
    ("batch", "jobs", True, "v1", [
        {"metadata": {"name": "j1", "namespace": "d"}, "status": {"succeeded": 1}},
        {"metadata": {"name": "j2", "namespace": "d"}},
    ], ["status.successful=1", "status.successful=0"]),
    ("certificates.k8s.io", "certificatesigningrequests", False, "v1", [
        {"metadata": {"name": "c1"}, "spec": {"signerName": "x"}},
        {"metadata": {"name": "c2"}, "spec": {"signerName": "y"}},
    ], ["spec.signerName=x", "metadata.name=c2"]),
    ("apps", "replicasets", True, "v1", [
        {"metadata": {"name": "r1", "namespace": "d"}, "status": {"replicas": 2}},
        {"metadata": {"name": "r2", "namespace": "e"}},
    ], ["metadata.namespace=e", "metadata.name=r1"]),
]


@pytest.fixture(scope="module")
def builtin_field_selectors() -> None:
    """core-api registers its kinds' field selectors as it builds their strategies: do the same."""
    for info in catalog.BUILTIN_RESOURCES:
        strategy_class(info)(info)


@pytest.mark.usefixtures("builtin_field_selectors")
@pytest.mark.parametrize(("group", "plural", "namespaced", "version", "objs", "selectors"), _KINDS,
                         ids=[f"{g or 'core'}/{p}" for g, p, *_ in _KINDS])
def test_every_builtin_field_selector_answers_alike_on_attributes(
        group: str, plural: str, namespaced: bool, version: str, objs: list[dict[str, Any]],
        selectors: list[str]) -> None:
    codec = CountingCodec()
    view = _view(group, plural, codec)
    prefix = f"/registry/{plural}/".encode()
    _load(view, objs, prefix)
    for text in selectors:
        pred = selection_predicate(group, plural, namespaced, None, _field(group, plural, text))
        assert pred is not None
        got, _ = view.list(prefix, pred)
        assert codec.loads_calls == 0, text  # the attributes answered on their own
        served = [JsonCodec().decode(orjson.dumps(o), 1)[0] for o in objs]
        want = sorted(_key(o, prefix) for o in served if pred(o))
        assert [c.key for c in got] == want, text


def test_custom_resource_selectable_fields_registered_later_read_the_object() -> None:
    fields.register_selectable_fields("example.com", "widgets", ["spec.color"], namespaced=True)
    try:
        codec = CountingCodec()
        view = CacheView(source=None, codec=codec, window=10,  # type: ignore[arg-type]
                         attrs=attrs_function("example.com", "widgets"))
        prefix = b"/registry/example.com/widgets/"
        objs = [{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": f"w{i}", "namespace": "d"},
                 "spec": {"color": c, "size": i}} for i, c in enumerate(("red", "blue", "red"))]
        _load(view, objs, prefix)
        pred = selection_predicate("example.com", "widgets", True, None,
                                   _field("example.com", "widgets", "spec.color=red"))
        got, _ = view.list(prefix, pred)
        assert [c.key for c in got] == [prefix + b"d/w0", prefix + b"d/w2"] and codec.loads_calls == 0
        # A field declared after the objects were cached is not in their attributes: read from the object.
        fields.register_selectable_fields("example.com", "widgets", ["spec.color", "spec.size"], namespaced=True)
        pred = selection_predicate("example.com", "widgets", True, None,
                                   _field("example.com", "widgets", "spec.size=1"))
        got, _ = view.list(prefix, pred)
        assert [c.key for c in got] == [prefix + b"d/w1"] and codec.loads_calls == 3
    finally:
        fields.unregister_selectable_fields("example.com", "widgets")


def test_plain_callables_still_get_objects() -> None:
    view = _view()
    _load(view, [_cm(i) for i in range(4)])
    got, _ = view.list(b"/registry/configmaps/", lambda o: o["metadata"]["name"] in ("cm-1", "cm-3"))
    assert [c.key for c in got] == [b"/registry/configmaps/bench/cm-1", b"/registry/configmaps/bench/cm-3"]


def _put(view: CacheView, obj: dict[str, Any], rev: int, prev: dict[str, Any] | None = None) -> None:
    prev_value = orjson.dumps(prev) if prev is not None else None
    view.apply(WatchBatch((WatchEvent("PUT", _key(obj), orjson.dumps(obj), prev_value, rev, rev),), rev))


def _delete(view: CacheView, obj: dict[str, Any], rev: int) -> None:
    view.apply(WatchBatch((WatchEvent("DELETE", _key(obj), b"", orjson.dumps(obj), rev, 0),), rev))


def _events(w: CacheWatcher) -> list[tuple[str, str, str]]:
    out = []
    while (item := w.ready_item()) is not None:
        assert isinstance(item, CacheEvent)
        out.append((item.type, item.obj["metadata"]["name"], item.obj["metadata"]["resourceVersion"]))
    return out


def test_selecting_watchers_filter_on_attributes() -> None:
    async def run() -> None:
        codec = CountingCodec()
        view = _view(codec=codec)
        _load(view, [])
        web = await view.watch(None, selection_predicate("", "configmaps", True, _label("app=web"), None), None, 3.0)
        in_a = await view.watch(None, None, None, 3.0, key_prefix=b"/registry/configmaps/a/")
        named = await view.watch(None, selection_predicate("", "configmaps", True, None,
                                                           _field("", "configmaps", "metadata.name=cm-2")), None, 3.0)
        one = _cm(1, ns="a", labels_={"app": "web"})
        _put(view, one, 10)
        moved = _cm(1, ns="a", labels_={"app": "db"})
        _put(view, moved, 11, prev=one)
        two = _cm(2, ns="b", labels_={"app": "db"})
        _put(view, two, 12)
        back = _cm(2, ns="b", labels_={"app": "web"})
        _put(view, back, 13, prev=two)
        _delete(view, back, 14)
        assert codec.loads_calls == 0  # no selector needed an object
        assert _events(web) == [("ADDED", "cm-1", "10"), ("DELETED", "cm-1", "11"), ("ADDED", "cm-2", "13"),
                                ("DELETED", "cm-2", "14")]
        assert _events(in_a) == [("ADDED", "cm-1", "10"), ("MODIFIED", "cm-1", "11")]
        assert _events(named) == [("ADDED", "cm-2", "12"), ("MODIFIED", "cm-2", "13"), ("DELETED", "cm-2", "14")]
        # the object that left web's selection was sent with its previous content at the change's revision
        later = await view.watch(10, selection_predicate("", "configmaps", True, _label("app=web"), None), False, 3.0)
        replay = []
        while (item := later.ready_item()) is not None:
            assert isinstance(item, CacheEvent)
            replay.append((item.type, item.obj["metadata"]["labels"]["app"], item.revision))
        assert replay == [("DELETED", "web", 11), ("ADDED", "web", 13), ("DELETED", "web", 14)]
        # initial events: only the namespace asked for, decoded by no one until read
        _put(view, _cm(3, ns="a"), 15)
        before = codec.loads_calls
        scoped = await view.watch(None, None, None, 3.0, key_prefix=b"/registry/configmaps/a/")
        assert [i.key for i in scoped.items if isinstance(i, CacheEvent)] == [b"/registry/configmaps/a/cm-1",
                                                                              b"/registry/configmaps/a/cm-3"]
        assert codec.loads_calls == before

    asyncio.run(run())


def test_window_events_keep_no_decoded_objects() -> None:
    async def run() -> None:
        view = _view()
        _load(view, [])
        watcher = await view.watch(None, None, None, 3.0)
        _put(view, _cm(1), 20)
        dispatched = watcher.ready_item()
        assert isinstance(dispatched, CacheEvent) and dispatched.encoded == {}
        assert dispatched._obj is not None  # the change's own decode, for this event's watchers
        kept = view._events[-1]
        assert kept._obj is None and kept._prev is None and kept.encoded is None
        assert kept.obj == dispatched.obj and kept._obj is None

    asyncio.run(run())


def test_selection_predicate_on_objects_and_match_attrs_edge_cases() -> None:
    pred = SelectionPredicate("", "pods", True, None, _field("", "pods", "spec.nodeName=n1"))
    assert pred({"metadata": {"name": "p", "namespace": "d"}, "spec": {"nodeName": "n1"}})
    assert pred.match_attrs(b"/registry/pods/d/p", (None, None)) is None  # no fields kept: read the object
    assert pred.match_attrs(b"/registry/pods/d/p", (None, {"spec.nodeName": "n1"})) is True
    cluster = SelectionPredicate("", "nodes", False, _label("a=b"), _field("", "nodes", "metadata.name=n"))
    assert cluster.match_attrs(b"/registry/minions/n", ({"a": "b"}, None)) is True
    assert cluster.match_attrs(b"/registry/minions/m", ({"a": "b"}, None)) is False
    assert cluster.match_attrs(b"/registry/minions/n", (None, None)) is False
    assert selection_predicate("", "pods", True, _label(""), fields.FieldSelector()) is None


PODS = ResourceInfo("", "v1", "Pod", "pods", "pod", True)


@pytest.mark.parametrize(("params", "message"), [
    ({"labelSelector": "a=b=c"}, None),
    ({"labelSelector": "a in (b"}, None),
    ({"fieldSelector": "spec.nodeName"}, None),
    ({"fieldSelector": "status.foo=1"}, "field label not supported: status.foo"),
])
def test_bad_selectors_are_still_400(params: dict[str, str], message: str | None) -> None:
    with pytest.raises(APIError) as info:
        list_options(PODS, params)
    assert info.value.code == 400
    if message is not None:
        assert info.value.message == message


def test_list_options_build_a_selection_predicate() -> None:
    opts = list_options(PODS, {"labelSelector": "app=web", "fieldSelector": "spec.nodeName=n1"})
    assert isinstance(opts.predicate, SelectionPredicate) and opts.filtered
    assert list_options(PODS, {"labelSelector": "", "fieldSelector": ""}).predicate is None
    assert right_sized(b"x") == b"x"


@pytest.mark.parametrize(("plural", "namespaced", "key", "obj"), [
    ("configmaps", True, b"/registry/configmaps/ns/cm-1", {"metadata": {"name": "cm-1", "namespace": "ns"}}),
    ("configmaps", True, b"/registry/configmaps/ns-1/x-cm-1", {"metadata": {"name": "x-cm-1", "namespace": "ns-1"}}),
    ("clusterroles", False, b"/registry/clusterroles/cm-1", {"metadata": {"name": "cm-1"}}),
])
def test_name_and_namespace_terms_read_from_the_key_answer_as_the_object(
        plural: str, namespaced: bool, key: bytes, obj: dict[str, Any]) -> None:
    group = "rbac.authorization.k8s.io" if plural == "clusterroles" else ""
    for text in ("metadata.name=cm-1", "metadata.name!=cm-1", "metadata.name=", "metadata.name!=",
                 "metadata.name=1", "metadata.namespace=ns", "metadata.namespace!=ns", "metadata.namespace=",
                 "metadata.name=cm-1,metadata.namespace=ns", "metadata.name==x-cm-1"):
        pred = SelectionPredicate(group, plural, namespaced, None, _field(group, plural, text))
        assert pred.match_attrs(key, NO_ATTRS) == pred(obj), (text, key)
