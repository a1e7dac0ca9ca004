"""The admission chain a store runs around each write, in kube-apiserver's two phases.

kube-apiserver builds one chain from its ordered plugin list (``AllOrderedPlugins``) and splits it:
every plugin that mutates runs in the first phase, before the strategy prepares and validates the
object; every plugin that validates runs in the second, after the strategy's validation and right
before the etcd write. ``AdmissionChain`` is those two plain lists, built in one place per service
(its ``server.py``); ``Store`` calls ``admit`` and ``validate`` with a ``genericapi.apimachinery.
admission.Attributes`` record it fills from the request.

What only the HTTP layer knows travels in a context variable (``request_admission``): the
request's options (CreateOptions / UpdateOptions / DeleteOptions as ``meta.k8s.io/v1`` objects)
and the list the response's ``Warning`` headers are taken from. Writes made in-process (the
controllers' local client) have none: their options are empty and their warnings dropped.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from genericapi.apimachinery import auditannotations
from genericapi.apimachinery.admission import Attributes, MutatingPlugin, ValidatingPlugin
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.apimachinery.user import UserInfo, current_user

#: Who a write without an authenticated user is made by: kube's loopback client identity.
LOOPBACK_USER = UserInfo("system:apiserver", ("system:authenticated", "system:masters"))


class RequestAdmission:
    """What the handler of one request gives admission and takes back from it.

    A plain class with slots, as ``Reinvocation``: one is made for every write, and a dataclass
    with default factories cost more to build than the rest of the handler's preamble."""

    __slots__ = ("annotations", "options", "schema_clean", "schema_clean_raw", "warnings")

    def __init__(self, options: dict[str, Any] | None = None, warnings: list[str] | None = None,
                 annotations: dict[str, str] | None = None, schema_clean: dict[str, Any] | None = None,
                 schema_clean_raw: bytes | None = None) -> None:
        #: The request's options as a ``meta.k8s.io/v1`` object (kind, apiVersion, dryRun, ...).
        self.options = options
        #: Warnings plugins added, for the response's ``Warning`` headers.
        self.warnings: list[str] = warnings if warnings is not None else []
        #: Audit annotations plugins added (kept for an audit log to read).
        self.annotations: dict[str, str] = annotations if annotations is not None else {}
        #: The request body (this very dict) when its schema walk found nothing at all
        #: (``fieldvalidation.check_fields_clean``): a create of it may skip walking it again.
        self.schema_clean = schema_clean
        #: An update's or patch's object, serialized when its schema walk found nothing at all: the
        #: update may skip walking it again when only server-set metadata changed since.
        self.schema_clean_raw = schema_clean_raw

    def __repr__(self) -> str:
        return (f"RequestAdmission(options={self.options!r}, warnings={self.warnings!r}, "
                f"annotations={self.annotations!r})")


request_admission: ContextVar[RequestAdmission | None] = ContextVar("request_admission", default=None)


class Reinvocation:
    """kube's ``ReinvocationContext`` for one mutating phase: a plugin that changed the object asks
    for the phase to run again (``should_reinvoke``); in that second round ``is_reinvoke`` is set.
    ``values`` keeps each plugin's own state between the rounds (by plugin name).

    A plain class with slots: one is made for every write's mutating phase (a dataclass with a
    default factory cost more to build than the phase's built-in plugins took to run)."""

    __slots__ = ("is_reinvoke", "should_reinvoke", "values")

    def __init__(self, should_reinvoke: bool = False, is_reinvoke: bool = False,
                 values: dict[str, Any] | None = None) -> None:
        self.should_reinvoke = should_reinvoke
        self.is_reinvoke = is_reinvoke
        self.values: dict[str, Any] = values if values is not None else {}

    def __repr__(self) -> str:
        return (f"Reinvocation(should_reinvoke={self.should_reinvoke}, is_reinvoke={self.is_reinvoke}, "
                f"values={self.values!r})")


reinvocation: ContextVar[Reinvocation | None] = ContextVar("admission_reinvocation", default=None)


def options_object(kind: str, dry_run: bool, **fields: Any) -> dict[str, Any]:
    """A ``meta.k8s.io/v1`` options object as kube puts it in an AdmissionReview (empty fields omitted)."""
    out: dict[str, Any] = {"kind": kind, "apiVersion": "meta.k8s.io/v1"}
    if dry_run:
        out["dryRun"] = ["All"]
    for k, v in fields.items():
        if v is not None and v != "" and v != [] and v != {}:
            out[k] = v
    return out


class AdmissionChain:
    """The mutating plugins, then the validating plugins, each list in kube's order.

    Which plugins run for a write is worked out once per (operation, group, resource, subresource)
    and kept (kube's plugins are a fixed list too): a plugin runs when it ``handles`` the operation
    and, if it has ``applies_to(group, resource, subresource)``, when that is true (the Pod-only
    plugins say so, and a ConfigMap's create no longer awaits each of them to return at once). The
    table is rebuilt when a list changes length or is replaced (services append plugins at start)."""

    def __init__(self, mutating: list[MutatingPlugin] | None = None,
                 validating: list[ValidatingPlugin] | None = None) -> None:
        self.mutating: list[MutatingPlugin] = mutating if mutating is not None else []
        self.validating: list[ValidatingPlugin] = validating if validating is not None else []
        self._table: dict[tuple[str, str, str, str], tuple[tuple[MutatingPlugin, ...],
                                                           tuple[ValidatingPlugin, ...]]] = {}
        self._table_of: tuple[int, int, int, int] = (0, 0, 0, 0)

    def __bool__(self) -> bool:
        return bool(self.mutating or self.validating)

    def plugins(self, attrs: Attributes) -> tuple[tuple[MutatingPlugin, ...], tuple[ValidatingPlugin, ...]]:
        """The mutating and the validating plugins that run for ``attrs``' write, in order."""
        lists = (id(self.mutating), len(self.mutating), id(self.validating), len(self.validating))
        if lists != self._table_of:
            self._table.clear()
            self._table_of = lists
        key = (attrs.operation, attrs.group, attrs.resource, attrs.subresource)
        found = self._table.get(key)
        if found is None:
            found = self._table[key] = (
                tuple(p for p in self.mutating if _runs(p, *key)),
                tuple(p for p in self.validating if _runs(p, *key)))
        return found

    async def admit(self, attrs: Attributes) -> None:
        """The mutating phase: each plugin that handles the operation may change ``attrs.obj``.

        As kube's reinvoker: when a plugin asked for it (a webhook with ``reinvocationPolicy:
        IfNeeded`` saw a later one change the object), the phase runs a second time. kube runs
        every plugin again; here only plugins marked ``reinvocable`` (the webhook plugin) run
        again, the built-in ones being idempotent and first in the order."""
        mutating = self.plugins(attrs)[0]
        if not mutating:
            _hand_back(attrs)
            return
        state = Reinvocation()
        token = reinvocation.set(state)
        try:
            for plugin in mutating:
                await plugin.admit(attrs)
            if state.should_reinvoke:
                state.is_reinvoke = True
                for plugin in mutating:
                    if getattr(plugin, "reinvocable", False):
                        await plugin.admit(attrs)
        finally:
            reinvocation.reset(token)
            _hand_back(attrs)

    async def validate(self, attrs: Attributes) -> None:
        """The validating phase: plugins may only refuse."""
        validating = self.plugins(attrs)[1]
        if not validating:
            _hand_back(attrs)
            return
        try:
            for plugin in validating:
                await plugin.validate(attrs)
        finally:
            _hand_back(attrs)


def _runs(plugin: MutatingPlugin | ValidatingPlugin, operation: str, group: str, resource: str,
          subresource: str) -> bool:
    if not plugin.handles(operation):
        return False
    applies_to = getattr(plugin, "applies_to", None)
    return applies_to is None or bool(applies_to(group, resource, subresource))


def _hand_back(attrs: Attributes) -> None:
    """Move what plugins added to the record into the request's (once: the record is reused)."""
    if not (attrs.annotations or attrs.leveled_annotations or attrs.warnings):
        return  # most writes: no plugin added anything
    auditannotations.add_all(attrs.annotations)  # for the gateway's audit event
    auditannotations.add_all_leveled(attrs.leveled_annotations)
    scope = request_admission.get()
    if scope is not None:
        scope.warnings.extend(w for w in attrs.warnings if w not in scope.warnings)
        for key, value in attrs.annotations.items():
            scope.annotations.setdefault(key, value)
    attrs.warnings.clear()


def attributes(info: ResourceInfo, operation: str, namespace: str, name: str, obj: dict[str, Any] | None,
               old_obj: dict[str, Any] | None, *, subresource: str = "", dry_run: bool = False) -> Attributes:
    """The record of one write to the resource ``info`` describes (its group, version, kind)."""
    scope = request_admission.get()
    user = current_user.get() or LOOPBACK_USER
    if not info.namespaced:
        namespace = ""
    return Attributes(operation, info.group, info.version, info.kind, info.plural, subresource, namespace, name,
                      obj, old_obj, user, dry_run, scope.options if scope is not None else None)
