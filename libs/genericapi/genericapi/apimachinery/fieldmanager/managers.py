"""Managers and their field sets: kube's ``managedfields`` bookkeeping around SMD's Updater.

One :class:`FieldManager` per (kind root type, API version, subresource) computes the
``metadata.managedFields`` of a write the way kube-apiserver's manager chain does: the entry
identity (manager, operation, apiVersion for updates, subresource), the temporary
``current-operation`` manager merged into the caller's entry only when it took fields, the
stripped metadata paths, the cap of ten update entries folded into ``ancient-changes``, the
reset with ``[]`` or ``[{}]``, and for apply the merge, pruning of fields the applier let go
of, and conflicts.
"""

from __future__ import annotations

import datetime
import functools
import time
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from genericapi.apimachinery import errors as apierrors

from . import pathelement
from .fieldset import FieldSet, FieldSetError, Path
from .schema import TypeNode
from .typed import (
    MISSING,
    Comparison,
    TypedError,
    changed,
    compare,
    ensure_named_fields_are_members,
    go_zero_baseline,
    merge,
    remove_items,
    to_field_set,
    validate_applied,
)

APPLY, UPDATE = "Apply", "Update"
MAX_UPDATE_MANAGERS = 10
_ANCIENT = "ancient-changes"
_SELF = "current-operation"

_STRIP = FieldSet.of(
    ("f:apiVersion",), ("f:kind",), ("f:metadata",),
    *(("f:metadata", "f:" + name) for name in ("name", "namespace", "creationTimestamp", "selfLink", "uid",
                                               "clusterName", "generation", "managedFields", "resourceVersion")),
)


class ManagedFieldsError(ValueError):
    """``metadata.managedFields`` that cannot be decoded."""


class MissingVersionError(LookupError):
    """No form of the object at an entry's version (kube's ``IsMissingVersionError``: the
    entry is dropped)."""


class VersionConverter(Protocol):
    """kube's fieldmanager ``versionConverter``: the object at another version of its resource,
    and that version's types. Ownership is recorded and compared in each entry's version."""

    def convert(self, obj: Any, from_version: str, to_version: str) -> Any:
        """``obj`` (at ``from_version``) at ``to_version``; raises :class:`MissingVersionError`."""

    def root(self, api_version: str) -> TypeNode:
        """The root type of the kind at ``api_version``; raises :class:`MissingVersionError`."""


@dataclass
class Entry:
    """One manager's fields: ``fieldpath.VersionedSet`` plus its time."""

    fields: FieldSet
    api_version: str
    applied: bool
    time: str | None = None


@functools.lru_cache(maxsize=4096)
def identifier(manager: str, operation: str, api_version: str, subresource: str) -> str:
    """``BuildManagerIdentifier``: the entry as Go's JSON without time and fields."""
    ident: dict[str, str] = {}
    if manager:
        ident["manager"] = manager
    ident["operation"] = operation
    if operation != APPLY and api_version:
        ident["apiVersion"] = api_version
    if subresource:
        ident["subresource"] = subresource
    return orjson.dumps(ident).decode()


@functools.lru_cache(maxsize=4096)
def _ident_fields(ident: str) -> dict[str, str]:
    """The identifier's fields (cached: callers only read them)."""
    parsed = orjson.loads(ident)
    return parsed if isinstance(parsed, dict) else {}


Managed = dict[str, Entry]


def decode(raw: Any) -> Managed:
    """``DecodeManagedFields``; raises :class:`ManagedFieldsError` as kube's decoder would."""
    managed: Managed = {}
    if raw is None:
        return managed
    if not isinstance(raw, list):
        raise ManagedFieldsError("managedFields must be a list")
    for i, entry in enumerate(raw):
        if not isinstance(entry, dict):
            raise ManagedFieldsError(f"managed fields entry {i} must be an object")
        op = entry.get("operation")
        if op not in (APPLY, UPDATE):
            raise ManagedFieldsError("operation must be `Apply` or `Update`")
        api_version = entry.get("apiVersion")
        if not isinstance(api_version, str) or not api_version:
            raise ManagedFieldsError("apiVersion must not be empty")
        fields_type = entry.get("fieldsType")
        if fields_type != "FieldsV1":
            raise ManagedFieldsError(f"missing fieldsType in managed fields entry {i}" if not fields_type
                                     else f"invalid fieldsType {orjson.dumps(fields_type).decode()} in managed "
                                          f"fields entry {i}")
        try:
            fs = FieldSet.from_json(entry.get("fieldsV1") or {})
        except FieldSetError as err:
            raise ManagedFieldsError(f"error decoding set: {err}") from None
        raw_manager, raw_sub = entry.get("manager"), entry.get("subresource")
        manager = raw_manager if isinstance(raw_manager, str) else ""
        sub = raw_sub if isinstance(raw_sub, str) else ""
        ident = identifier(manager, op, api_version, sub)
        when = entry.get("time")
        managed[ident] = Entry(fs, api_version, op == APPLY, when if isinstance(when, str) else None)
    return managed


@functools.lru_cache(maxsize=1024)
def _seconds(when: str | None) -> float:
    if not when:
        return 0
    try:
        return datetime.datetime.fromisoformat(when.replace("Z", "+00:00")).timestamp() // 1
    except ValueError:
        return 0


def encode(managed: Managed) -> list[dict[str, Any]] | None:
    """``encodeManagedFields``: entries in kube's order (Apply first, then by time, name...)."""
    if not managed:
        return None
    out: list[dict[str, Any]] = []
    for ident, entry in managed.items():
        info = _ident_fields(ident)
        item: dict[str, Any] = {}
        if info.get("manager"):
            item["manager"] = info["manager"]
        item["operation"] = APPLY if entry.applied else UPDATE
        item["apiVersion"] = entry.api_version
        if entry.time:
            item["time"] = entry.time
        item["fieldsType"] = "FieldsV1"
        item["fieldsV1"] = entry.fields.to_json()
        if info.get("subresource"):
            item["subresource"] = info["subresource"]
        out.append(item)
    if len(out) > 1:
        out.sort(key=lambda e: (e["operation"], _seconds(e.get("time")), e.get("manager", ""), e["apiVersion"],
                                e.get("subresource", "")))
    return out


def is_reset(raw: Any) -> bool:
    """``[]`` or ``[{}]`` sent by a client: drop all ownership."""
    return isinstance(raw, list) and (not raw or (len(raw) == 1 and raw[0] == {}))


_NOW: list[Any] = [0, ""]


def now() -> str:
    """The current second, RFC 3339 (formatted once per second)."""
    second = int(time.time())
    if _NOW[0] != second:
        _NOW[0] = second
        _NOW[1] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))
    return str(_NOW[1])


_STRIP_ROOT = frozenset(("f:apiVersion", "f:kind", "f:metadata"))
_STRIP_META = _STRIP.children["f:metadata"].members


def _strip(managed: Managed) -> None:
    """``stripMetaManager``: nobody owns identity and system metadata (the entries change, their
    sets are replaced, never changed: sets share parts with the sets they were made from)."""
    for ident in list(managed):
        entry = managed[ident]
        fields = entry.fields
        meta = fields.children.get("f:metadata")
        if not fields.members.isdisjoint(_STRIP_ROOT) or (meta is not None
                                                           and not meta.members.isdisjoint(_STRIP_META)):
            stripped = FieldSet()
            stripped.members = fields.members - _STRIP_ROOT
            stripped.children = dict(fields.children)
            if meta is not None:
                kept = FieldSet()
                kept.members = meta.members - _STRIP_META
                kept.children = meta.children
                if kept.empty():
                    del stripped.children["f:metadata"]
                else:
                    stripped.children["f:metadata"] = kept
            fields = entry.fields = stripped
        if fields.empty():
            del managed[ident]


def _without_managed_fields(obj: Any) -> Any:
    if not isinstance(obj, dict):
        return obj
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or "managedFields" not in meta:
        return obj
    return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


def manager_from_user_agent(user_agent: str) -> str:
    """``prefixFromUserAgent``: the part before the first ``/``, printable, at most 128 bytes."""
    head = user_agent.split("/", 1)[0]
    if len(head) <= 128 and head.isascii() and head.isprintable():
        return head  # the usual agent ("kubectl", "OpenAPI-Generator"): every character kept
    out: list[str] = []
    size = 0
    for ch in head:
        if not ch.isprintable():
            continue
        n = len(ch.encode())
        if size + n > 128:
            break
        out.append(ch)
        size += n
    return "".join(out)


# -- conflicts ----------------------------------------------------------------------------
def _print_manager(ident: str) -> str:
    info = _ident_fields(ident)
    text = orjson.dumps(info.get("manager", "")).decode()
    if info.get("subresource"):
        text += f" with subresource {orjson.dumps(info['subresource']).decode()}"
    if info.get("operation") == UPDATE:
        text += f" using {info.get('apiVersion', '')}"
    return text


def conflict_error(conflicts: list[tuple[str, Path]]) -> apierrors.APIError:
    """kube's ``NewConflictError``: 409 Conflict, one FieldManagerConflict cause per field."""
    causes = [{"reason": "FieldManagerConflict", "message": f"conflict with {_print_manager(ident)}",
               "field": pathelement.display_path(path)} for ident, path in conflicts]
    if len(conflicts) == 1:
        ident, path = conflicts[0]
        message = (f"Apply failed with 1 conflict: conflict with {_print_manager(ident)}: "
                   f"{pathelement.display_path(path)}")
    else:
        lines: list[str] = []
        for ident in sorted({i for i, _ in conflicts}):
            lines.append(f"conflicts with {_print_manager(ident)}:")
            lines.extend(f"- {pathelement.display_path(p)}" for i, p in conflicts if i == ident)
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return apierrors.APIError(409, "Conflict", message, {"causes": causes})


# -- the manager ------------------------------------------------------------------------------
class FieldManager:
    """Field ownership of one kind at one API version (the objects' root type)."""

    def __init__(self, root: TypeNode, api_version: str, *, reset: dict[str, FieldSet] | None = None,
                 go_typed: bool = False, converter: VersionConverter | None = None,
                 zero: dict[str, Any] | None = None) -> None:
        self.root = root
        self.api_version = api_version
        #: Other versions of the resource (None: entries of other versions are compared as if
        #: they were at this one).
        self.converter = converter
        #: Fields a subresource's strategy resets (kube's ResetFieldsStrategy), by subresource.
        self.reset = reset or {}
        #: Built-in kinds: creates compare against Go's empty object, not nothing.
        self.go_typed = go_typed
        #: The kind's empty Go object as kube's converter writes it (:mod:`.gozero`): what a
        #: create is compared against. None: the approximation of ``go_zero_baseline``.
        self.zero = zero

    def _convert(self, obj: Any, from_version: str, to_version: str) -> Any:
        if obj is MISSING or from_version == to_version or self.converter is None:
            return obj
        return self.converter.convert(obj, from_version, to_version)

    def _root(self, api_version: str) -> TypeNode:
        if api_version == self.api_version or self.converter is None:
            return self.root
        return self.converter.root(api_version)

    def _filtered(self, cmp: Comparison, subresource: str) -> Comparison:
        ignored = self.reset.get(subresource)
        if ignored is None:
            return cmp
        return Comparison(_without(cmp.added, ignored), _without(cmp.modified, ignored),
                          _without(cmp.removed, ignored))

    def _update_sets(self, live: Any, new: Any, managed: Managed, self_ident: str,
                     force: bool, subresource: str) -> Comparison:
        """SMD ``Updater.update``: other managers lose what changed (compared in each one's
        version, both objects converted to it); conflicts unless forced."""
        cmp = self._filtered(compare(live, new, self.root), subresource)
        others = [ident for ident in managed if ident != self_ident]
        if not others:
            return cmp
        versions: dict[str, tuple[Comparison, FieldSet]] = {}
        conflicts: list[tuple[str, Path]] = []
        for ident in sorted(others):
            entry = managed[ident]
            version = entry.api_version
            found = versions.get(version)
            if found is None:
                if version == self.api_version or self.converter is None:
                    at = cmp
                else:
                    try:
                        at = self._filtered(compare(self._convert(live, self.api_version, version),
                                                    self._convert(new, self.api_version, version),
                                                    self._root(version)), subresource)
                    except MissingVersionError:
                        del managed[ident]
                        continue
                changed = at.modified.union(at.added) if not at.modified.empty() else at.added
                found = versions[version] = (at, changed)
            at, changed = found
            taken = entry.fields.intersection(changed)
            if not taken.empty():
                if not force:
                    conflicts.extend((ident, p) for p in taken.paths())
                    continue
                entry.fields = entry.fields.difference(taken)
            if not at.removed.empty():
                entry.fields = entry.fields.difference(at.removed)
        if conflicts:
            raise _Conflicts(conflicts)
        for ident in list(managed):
            if managed[ident].fields.empty():
                del managed[ident]
        return cmp

    def update(self, live: dict[str, Any] | None, new: dict[str, Any], manager: str, *,
               subresource: str = "", when: str | None = None, unowned: FieldSet | None = None,
               observed: dict[str, Any] | None = None) -> None:
        """Record a create/update/patch by ``manager`` in ``new``'s managedFields (in place).
        ``unowned``: paths (and what lies below them) that the write does not own (fields the
        server added after kube's field manager would have run). ``observed``: the object as
        kube's field manager sees it when that is not ``new`` (a create: decoded and defaulted,
        before admission and the strategy's PrepareForCreate)."""
        new_meta = new.get("metadata")
        if not isinstance(new_meta, dict):
            return
        live_meta = (live or {}).get("metadata") if isinstance(live, dict) else None
        live_raw = live_meta.get("managedFields") if isinstance(live_meta, dict) else None
        sent = new_meta.get("managedFields", MISSING)
        if subresource or sent is MISSING or sent is None:
            managed = _decode_or_empty(live_raw)
        elif is_reset(sent):
            managed = {}
        else:
            try:
                managed = decode(sent)
            except ManagedFieldsError:
                managed = {}
            if not managed:
                managed = _decode_or_empty(live_raw)
        new_meta.pop("managedFields", None)
        if live is not None:
            live_cmp = _without_managed_fields(live)
        else:
            live_cmp = (self.zero if self.zero is not None
                        else go_zero_baseline(new, self.root) if self.go_typed else MISSING)
        ident = identifier(manager or "unknown", UPDATE, self.api_version, subresource)
        seen = _without_managed_fields(observed) if observed is not None else new
        if managed:
            cmp = self._update_sets(live_cmp, seen, managed, _SELF, True, subresource)
            taken = cmp.modified.union(cmp.added) if not cmp.modified.empty() else cmp.added
        else:
            # Nobody else to lose fields (a create): only what the writer takes is needed.
            taken = changed(live_cmp, seen, self.root)
            ignored = self.reset.get(subresource)
            if ignored is not None:
                taken = _without(taken, ignored)
        if unowned is not None:
            taken = taken.recursive_difference(unowned)
        if not taken.empty():
            managed[_SELF] = Entry(taken, self.api_version, False)
        _strip(managed)
        current = managed.pop(_SELF, None)
        if current is not None:
            previous = managed.get(ident)
            if previous is not None:
                current.fields = current.fields.union(previous.fields)
            current.time = when or now()
            managed[ident] = current
        _cap(managed)
        encoded = encode(managed)
        if encoded is not None:
            new_meta["managedFields"] = encoded

    def apply(self, live: dict[str, Any] | None, config: dict[str, Any], manager: str, *, force: bool,
              subresource: str = "", when: str | None = None) -> dict[str, Any]:
        """Merge an applied configuration into ``live`` (None: create): the new object with its
        managedFields. Raises kube's 409 on conflicts.

        As kube's lastAppliedManager and lastAppliedUpdater, for the manager ``kubectl`` only:
        conflicts on fields the object's client-side ``last-applied-configuration`` holds with
        the live values are allowed (kubectl moving an object from client-side to server-side
        apply), and that annotation, when present, is rewritten to the applied configuration."""
        try:
            out = self._apply(live, config, manager, force, subresource, when)
        except _Conflicts as err:
            allowed = self._allowed_from_last_applied(live) if manager == _KUBECTL else None
            remaining = [(i, p) for i, p in err.conflicts if allowed is None or not allowed.has(p)]
            if remaining:
                raise conflict_error(remaining) from None
            out = self._apply(live, config, manager, True, subresource, when)
        if manager == _KUBECTL and _last_applied(live) is not None:
            annotations = dict(out["metadata"].get("annotations") or {})
            annotations[LAST_APPLIED] = _build_last_applied(config)
            out["metadata"]["annotations"] = annotations
        return out

    def _allowed_from_last_applied(self, live: dict[str, Any] | None) -> FieldSet | None:
        text = _last_applied(live)
        if text is None:
            return None
        try:
            last = orjson.loads(text)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(last, dict):
            return None
        try:
            last_set = to_field_set(last, self.root)
            cmp = compare(last, _without_managed_fields(live), self.root)
        except (TypedError, ValueError):
            return None
        if not cmp.modified.intersection(last_set).empty():
            return None  # the live object moved away from what kubectl last applied
        return last_set

    def _apply(self, live: dict[str, Any] | None, config: dict[str, Any], manager: str, force: bool,
               subresource: str, when: str | None) -> dict[str, Any]:
        config_meta = config.get("metadata")
        if isinstance(config_meta, dict) and config_meta.get("managedFields") is not None:
            raise apierrors.bad_request("metadata.managedFields must be nil")
        live_meta = live.get("metadata") if isinstance(live, dict) else None
        live_raw = live_meta.get("managedFields") if isinstance(live_meta, dict) else None
        try:
            managed = decode(live_raw)
        except ManagedFieldsError as err:
            raise apierrors.unknown_error(f"failed to decode managed fields: {err}") from None
        live_cmp = _without_managed_fields(live) if live is not None else MISSING
        validate_applied(config, self.root)  # SMD types the configuration first (TypedError)
        merged = merge(live_cmp, config, self.root)
        ident = identifier(manager, APPLY, self.api_version, subresource)
        last = managed.get(ident)
        previous_time = last.time if last is not None else None
        applied = to_field_set(config, self.root)
        ignored = self.reset.get(subresource)
        if ignored is not None:
            applied = _without(applied, ignored)
        managed[ident] = Entry(applied, self.api_version, True, previous_time)
        if last is not None and (last.api_version != self.api_version
                                 or not last.fields.difference(applied).empty()):
            # Only what the applier owned and no longer applies can go.
            merged = self._prune(merged, managed, last)
        self._update_sets(live_cmp, merged, managed, ident, force, subresource)
        _strip(managed)
        if merged != live_cmp and ident in managed:
            managed[ident].time = when or now()
        out = merged if isinstance(merged, dict) else {}
        out_meta = out.get("metadata")
        if not isinstance(out_meta, dict):
            out_meta = out["metadata"] = {}
        else:
            out_meta = out["metadata"] = dict(out_meta)
        encoded = encode(managed)
        if encoded is not None:
            out_meta["managedFields"] = encoded
        else:
            out_meta.pop("managedFields", None)
        return out

    def _prune(self, merged: Any, managed: Managed, last: Entry) -> Any:
        """SMD ``prune``: drop what the applier owned last time, no longer applies, and nobody
        else owns (after adding back owned and dangling items), in the version of the
        applier's last entry; owned items are added back in each manager's version."""
        version = last.api_version
        try:
            root = self._root(version)
            at_last = self._convert(merged, self.api_version, version)
        except MissingVersionError:
            return merged
        last_e = ensure_named_fields_are_members(last.fields, root)
        pruned = _or_empty(remove_items(at_last, last_e, root))
        owned_by_version: dict[str, FieldSet] = {}
        for entry in managed.values():
            have = owned_by_version.get(entry.api_version)
            owned_by_version[entry.api_version] = entry.fields if have is None else have.union(entry.fields)
        # Owned items at the pruned version first (what conversion may need), then the others.
        order = sorted(owned_by_version, key=lambda v: (v != version, v))
        pruned_version = version
        for owned_version in order:
            try:
                v_root = self._root(owned_version)
                v_merged = self._convert(merged, self.api_version, owned_version)
                v_pruned = self._convert(pruned, pruned_version, owned_version)
            except MissingVersionError:
                continue
            merged_set = ensure_named_fields_are_members(to_field_set(v_merged, v_root), v_root)
            pruned_set = ensure_named_fields_are_members(to_field_set(v_pruned, v_root), v_root)
            owned_e = ensure_named_fields_are_members(owned_by_version[owned_version], v_root)
            pruned = _or_empty(remove_items(v_merged, merged_set.difference(pruned_set.union(owned_e)), v_root))
            pruned_version = owned_version
        pruned = self._convert(pruned, pruned_version, version)
        merged_set = ensure_named_fields_are_members(to_field_set(at_last, root), root)
        pruned_set = ensure_named_fields_are_members(to_field_set(pruned, root), root)
        out = _or_empty(remove_items(at_last, merged_set.difference(pruned_set).intersection(last_e), root))
        return self._convert(out, version, self.api_version)


class _Conflicts(Exception):
    def __init__(self, conflicts: list[tuple[str, Path]]) -> None:
        super().__init__(f"{len(conflicts)} conflicts")
        self.conflicts = conflicts


_KUBECTL = "kubectl"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _last_applied(live: dict[str, Any] | None) -> str | None:
    if not isinstance(live, dict):
        return None
    annotations = (live.get("metadata") or {}).get("annotations")
    value = annotations.get(LAST_APPLIED) if isinstance(annotations, dict) else None
    return value if isinstance(value, str) and value else None


def _build_last_applied(config: dict[str, Any]) -> str:
    """``buildLastApplied``: the configuration without the annotation, as Go's JSON encoder
    writes it (keys sorted, trailing newline)."""
    meta = config.get("metadata")
    if isinstance(meta, dict) and isinstance(meta.get("annotations"), dict) and LAST_APPLIED in meta["annotations"]:
        annotations = {k: v for k, v in meta["annotations"].items() if k != LAST_APPLIED}
        config = {**config, "metadata": {**meta, "annotations": annotations}}
    return pathelement.go_json(config) + "\n"


def _without(fs: FieldSet, ignored: FieldSet) -> FieldSet:
    """``fs.recursive_difference(ignored)``; ``fs`` itself (no copy) when no path element of
    ``ignored``'s top level is in it, as for most writes (a main-resource write without status)."""
    top = fs.members.union(fs.children)
    if top.isdisjoint(ignored.members) and top.isdisjoint(ignored.children):
        return fs
    return fs.recursive_difference(ignored)


def _or_empty(v: Any) -> Any:
    return {} if v is MISSING else v


def _decode_or_empty(raw: Any) -> Managed:
    try:
        return decode(raw)
    except ManagedFieldsError:
        return {}


def _cap(managed: Managed) -> None:
    """``capUpdateManagers``: fold the oldest update entries into ``ancient-changes``."""
    updaters = [i for i, e in managed.items() if not e.applied]
    if len(updaters) <= MAX_UPDATE_MANAGERS:
        return
    updaters.sort(key=lambda i: (_seconds(managed[i].time), i))
    first_by_version: dict[str, str] = {}
    length = len(updaters)
    for ident in updaters:
        if length <= MAX_UPDATE_MANAGERS:
            break
        entry = managed[ident]
        version = entry.api_version
        bucket = identifier(_ANCIENT, UPDATE, version, "")
        first = first_by_version.get(version)
        if first is None:
            first_by_version[version] = ident
            continue
        if bucket not in managed:
            managed[bucket] = managed.pop(first)
        managed[bucket] = Entry(entry.fields.union(managed[bucket].fields), version, False, entry.time)
        del managed[ident]
        length -= 1


def fields_touched(obj: Any, root: TypeNode) -> FieldSet:
    """The fields an object sets (for tests and tools)."""
    return to_field_set(obj, root)
