"""managedFields bookkeeping for the generic store, one tracker per resource.

kube-apiserver's handlers run its field manager on every write: create, update, each patch
type and each subresource record an ``Update`` entry for the writer; an apply records
``Apply`` itself. Here the store calls :meth:`FieldTracker.track` on the prepared object of
every write that names a :class:`Writer` (HTTP requests do; the services' internal writes
pass none and leave managedFields as they are). The merge semantics come from the kind's
schema: the built-in 1.33 definitions, or a custom resource's structural schema through
:meth:`Strategy.ownership_schema`.
"""

from __future__ import annotations

import functools
import logging
import weakref
from dataclasses import dataclass
from typing import Any

from genericapi.apimachinery import deepjson, k8sproto_descriptors
from genericapi.apimachinery.fieldmanager import gozero
from genericapi.apimachinery.fieldmanager.fieldset import FieldSet
from genericapi.apimachinery.fieldmanager.managers import FieldManager, MissingVersionError
from genericapi.apimachinery.fieldmanager.schema import SchemaResolver, TypeNode
from genericapi.apimachinery.k8sproto_convert import gogo_value_field
from genericapi.apimachinery.schemas import SchemaCatalog

from .codec import JsonCodec
from .meta import same_but_server_metadata
from .strategy import Strategy

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Writer:
    """Who writes: the field manager, the subresource, and whether the handler already
    recorded the write (an apply computes its own managedFields)."""

    manager: str
    subresource: str = ""
    recorded: bool = False


@functools.cache
def resolver() -> SchemaResolver:
    """One resolver per process over the built-in definitions (ObjectMeta for every kind)."""
    return SchemaResolver(SchemaCatalog.load("1.33").definitions)


@functools.cache
def go_types() -> gozero.GoTypes | None:
    """Go struct facts of the built-in kinds from Kubernetes' protobuf descriptors (read once per
    process; None when this installation has no descriptor set: creates then use the
    approximation of :func:`~genericapi.apimachinery.fieldmanager.typed.go_zero_baseline`)."""
    path = k8sproto_descriptors.descriptor_set_path()
    if not path.is_file():
        return None
    try:
        descriptors = k8sproto_descriptors.load_descriptor_set(path)
    except Exception:  # a damaged set: protobuf bodies fail on it too; ownership does not
        log.exception("protobuf descriptors at %s not readable", path)
        return None
    out: dict[str, dict[str, gozero.GoField]] = {}

    def walk(prefix: str, messages: Any) -> None:
        for message in messages:
            full = f"{prefix}.{message.name}"
            fields = out[full] = {}
            for field in message.field:
                value = field.HasField("options") and gogo_value_field(field.options.SerializeToString())
                single_message = field.type == field.TYPE_MESSAGE and field.label != field.LABEL_REPEATED
                fields[field.name] = gozero.GoField(value, field.type_name.lstrip(".") if single_message else "")
            walk(full, message.nested_type)

    for proto in descriptors.file:
        walk(proto.package, proto.message_type)
    return out


class FieldTracker:
    """The field manager of one served version of a resource.

    ``key_prefix`` and ``codec``: the trackers of every version served over the same stored
    objects (autoscaling/v1 and v2 HPAs, a CRD's versions, core and events.k8s.io Events) find
    each other by the stores' key prefix, and convert between their versions through the
    storage version with their codecs, as kube's fieldmanager converts through the hub version.
    A store whose conversion needs I/O (a CRD's conversion webhook) passes no codec: its
    entries of other versions are then compared as if they were at its own."""

    def __init__(self, strategy: Strategy, key_prefix: str = "", codec: JsonCodec | None = None) -> None:
        self._strategy = strategy
        self._manager: FieldManager | None = None
        self._schema_key: int | None = None
        #: A built-in kind's schema never changes (a custom resource's follows its CRD): its
        #: manager is built once instead of being checked against the schema on every write.
        self._fixed_schema = (strategy.schemas is not None
                              and type(strategy).ownership_schema is Strategy.ownership_schema)
        self.codec = codec
        self._serving: weakref.WeakValueDictionary[str, FieldTracker] | None = None
        if key_prefix and codec is not None:
            self._serving = _SERVING.setdefault(key_prefix, weakref.WeakValueDictionary())
            self._serving[strategy.info.api_version] = self

    def manager(self) -> FieldManager:
        if self._manager is not None and self._fixed_schema:
            return self._manager
        schema = self._strategy.ownership_schema()
        key = id(schema) if schema is not None else None
        if self._manager is None or key != self._schema_key:
            res = resolver()
            if self._strategy.schemas is not None and schema is not None:
                res = _catalog_resolver(id(self._strategy.schemas), self._strategy.schemas)
            reset: dict[str, FieldSet] = {}
            if self._strategy.has_status:
                # kube's ResetFieldsStrategy: the main resource ignores status, /status the spec.
                reset = {"": FieldSet.of(("f:status",)), "status": FieldSet.of(("f:spec",))}
            zero = None
            if self._strategy.schemas is not None:
                info = self._strategy.info
                definition = self._strategy.schemas.definition_name(info.group, info.version, info.kind)
                go = go_types()
                if definition and go is not None:
                    zero = gozero.zero_object(self._strategy.schemas.definitions, definition, go)
            self._manager = FieldManager(res.root(schema), self._strategy.info.api_version, reset=reset,
                                         go_typed=self._strategy.schemas is not None, zero=zero,
                                         converter=_Versions(self._serving) if self._serving is not None else None)
            self._schema_key = key
        return self._manager

    def before_admission(self, obj: dict[str, Any], writer: Writer | None) -> AdmissionSnapshot | None:
        """What a create looked like before admission: kube runs its field manager before the
        mutating admission plugins, so what they add (a ServiceAccount volume, default
        tolerations) belongs to nobody."""
        if writer is None or writer.recorded:
            return None
        return AdmissionSnapshot(self, deepjson.dumps(obj))

    def track(self, live: dict[str, Any] | None, new: dict[str, Any], writer: Writer | None,
              produced: dict[str, Any] | None = None, admitted: Observed | FieldSet | None = None) -> None:
        """Update ``new``'s managedFields for a write by ``writer`` (in place). ``produced`` is
        the object before the strategy prepared it (a /status write keeps only its status, but
        an apply's recorded managedFields stand)."""
        if writer is None:
            meta = new.get("metadata")
            if live is not None and isinstance(meta, dict) and "managedFields" not in meta:
                kept = (live.get("metadata") or {}).get("managedFields")
                if kept:
                    meta["managedFields"] = kept
            return
        if writer.recorded:
            if produced is not None and produced is not new:
                meta = new.setdefault("metadata", {})
                recorded = (produced.get("metadata") or {}).get("managedFields")
                if recorded:
                    meta["managedFields"] = recorded
                else:
                    meta.pop("managedFields", None)
            return
        try:
            if isinstance(admitted, Observed):
                self.manager().update(live, new, writer.manager, subresource=writer.subresource,
                                      observed=admitted.obj)
            else:
                self.manager().update(live, new, writer.manager, subresource=writer.subresource, unowned=admitted)
        except Exception:  # kube's UpdateNoErrors: a failed bookkeeping never fails the write
            log.exception("managedFields of %s %s not updated; the live ones are kept",
                          self._strategy.info.plural, (new.get("metadata") or {}).get("name"))
            meta = new.get("metadata")
            if isinstance(meta, dict):
                kept = ((live or {}).get("metadata") or {}).get("managedFields")
                if kept:
                    meta["managedFields"] = kept
                else:
                    meta.pop("managedFields", None)


class AdmissionSnapshot:
    """A create's object before admission (serialised: cheap, and untouched by the plugins).

    kube-apiserver's create handler runs its field manager on the decoded object (decoding
    defaults it) before admission and before the strategy's PrepareForCreate, so what those add
    (a ServiceAccount and its token volume, default tolerations, a namespace's ``kubernetes``
    finalizer, a Job's selector) belongs to nobody. The creator's fields are therefore those of
    this snapshot, defaulted."""

    __slots__ = ("_raw", "_tracker")

    def __init__(self, tracker: FieldTracker, raw: bytes) -> None:
        self._tracker = tracker
        self._raw = raw

    def same_but_metadata(self, obj: dict[str, Any]) -> bool:
        """Whether ``obj`` equals the object before admission but for what the store sets on a
        create (``meta.same_but_server_metadata``)."""
        try:
            before = deepjson.loads(self._raw)
        except Exception:  # never fail a create over a shortcut
            return False
        return same_but_server_metadata(obj, before)

    def added(self, obj: dict[str, Any]) -> Observed | None:
        """What the field manager observes of the create of ``obj`` (None: ``obj`` itself)."""
        try:
            seen = deepjson.loads(self._raw)
            self._tracker._strategy.default(seen)
        except Exception:  # never fail a create over bookkeeping
            log.exception("the object before admission not defaulted")
            return None
        return Observed(seen)


@dataclass(frozen=True, slots=True)
class Observed:
    """The object a create's field manager compares (see :class:`AdmissionSnapshot`)."""

    obj: dict[str, Any]


_CATALOG_RESOLVERS: dict[int, tuple[SchemaCatalog, SchemaResolver]] = {}


def _catalog_resolver(key: int, catalog: SchemaCatalog) -> SchemaResolver:
    found = _CATALOG_RESOLVERS.get(key)
    if found is not None and found[0] is catalog:
        return found[1]
    res = resolver() if catalog is SchemaCatalog.load("1.33") else SchemaResolver(catalog.definitions)
    _CATALOG_RESOLVERS[key] = (catalog, res)
    return res


#: Trackers by stores' key prefix, then by API version (the versions served over one storage).
_SERVING: dict[str, weakref.WeakValueDictionary[str, FieldTracker]] = {}


class _Versions:
    """The fieldmanager's version converter over the trackers of one storage."""

    __slots__ = ("_serving",)

    def __init__(self, serving: weakref.WeakValueDictionary[str, FieldTracker]) -> None:
        self._serving = serving

    def _tracker(self, api_version: str) -> FieldTracker:
        found = self._serving.get(api_version)
        if found is None or found.codec is None:
            raise MissingVersionError(api_version)
        return found

    def convert(self, obj: Any, from_version: str, to_version: str) -> Any:
        source, target = self._tracker(from_version), self._tracker(to_version)
        if not isinstance(obj, dict):
            return obj
        assert source.codec is not None and target.codec is not None
        # A part of an object (what pruning left) still converts as the whole kind would.
        stored = source.codec.to_storage({**obj, "apiVersion": from_version})
        if stored is obj:
            stored = dict(stored)
        out = target.codec.from_storage(deepjson.loads(deepjson.dumps(stored)))
        out["apiVersion"] = to_version
        return out

    def root(self, api_version: str) -> TypeNode:
        return self._tracker(api_version).manager().root
