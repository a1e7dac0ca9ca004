"""Turn decoded Kubernetes protobuf messages into the dicts Go's encoding/json would write.

Split from :mod:`genericapi.apimachinery.k8sproto` (framing, kind lookup, errors); the rules are
listed in that module's docstring. Per message type a plan (field name, converter, whether a
zero value is omitted, what to write when a Go value struct is absent) is built once, so the
per-request work is a walk over the fields actually present.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import orjson
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from genericapi.apimachinery import errors

_META = "k8s.io.apimachinery.pkg.apis.meta.v1"
TIME = f"{_META}.Time"
MICRO_TIME = f"{_META}.MicroTime"
DURATION = f"{_META}.Duration"
FIELDS_V1 = f"{_META}.FieldsV1"
RAW_EXTENSION = "k8s.io.apimachinery.pkg.runtime.RawExtension"
INT_OR_STRING = "k8s.io.apimachinery.pkg.util.intstr.IntOrString"
QUANTITIES = frozenset({"k8s.io.apimachinery.pkg.api.resource.Quantity",
                        "k8s.io.apimachinery.pkg.api.resource.QuantityValue"})
_GOGO_NULLABLE = 65001
_GOGO_CUSTOMNAME = 65004
_PROTOBUF_MAGIC = b"k8s\x00"
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)

#: a converter's "Go writes null / nothing here" answer
OMIT: Any = object()

Convert = Callable[[Any], Any]
NestedDecoder = Callable[[bytes], dict[str, Any]]


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def gogo_options(options: bytes) -> tuple[bool, str]:
    """(``gogoproto.nullable = false``, ``gogoproto.customname``) of serialized FieldOptions."""
    pos = 0
    value_field = False
    custom_name = ""
    try:
        while pos < len(options):
            tag, pos = _varint(options, pos)
            number, wire = tag >> 3, tag & 7
            if wire == 0:
                value, pos = _varint(options, pos)
                if number == _GOGO_NULLABLE:
                    value_field = value == 0
            elif wire == 2:
                length, pos = _varint(options, pos)
                if pos + length > len(options):
                    break
                if number == _GOGO_CUSTOMNAME:
                    custom_name = options[pos:pos + length].decode("utf-8", "replace")
                pos += length
            elif wire == 1:
                pos += 8
            elif wire == 5:
                pos += 4
            else:
                break
    except IndexError:
        pass
    return value_field, custom_name


def gogo_value_field(options: bytes) -> bool:
    """Whether serialized FieldOptions carry ``gogoproto.nullable = false`` (a Go value field)."""
    return gogo_options(options)[0]


@dataclass(frozen=True)
class GoFieldFacts:
    """What the descriptors say about the Go structs behind the messages."""

    #: (message full name, field name) of Go value (non-pointer) fields
    value_fields: frozenset[tuple[str, str]]
    #: (message full name, field name) of value struct fields named like their type: maybe embedded
    embedded_candidates: frozenset[tuple[str, str]]


def go_field_facts(descriptor_set: descriptor_pb2.FileDescriptorSet) -> GoFieldFacts:
    values: set[tuple[str, str]] = set()
    embedded: set[tuple[str, str]] = set()

    def walk(prefix: str, messages: Iterable[descriptor_pb2.DescriptorProto]) -> None:
        for message in messages:
            full_name = f"{prefix}.{message.name}"
            for field in message.field:
                if not field.HasField("options"):
                    continue
                is_value, custom_name = gogo_options(field.options.SerializeToString())
                if not is_value:
                    continue
                values.add((full_name, field.name))
                if (field.type == field.TYPE_MESSAGE and field.label != field.LABEL_REPEATED
                        and custom_name == field.type_name.rpartition(".")[2]):
                    embedded.add((full_name, field.name))
            walk(full_name, message.nested_type)

    for proto in descriptor_set.file:
        walk(proto.package, proto.message_type)
    return GoFieldFacts(frozenset(values), frozenset(embedded))


@dataclass(frozen=True)
class SchemaHints:
    """Per proto message full name: OpenAPI ``required`` fields and known property names."""

    required: dict[str, frozenset[str]] = dataclasses.field(default_factory=dict)
    properties: dict[str, frozenset[str]] = dataclasses.field(default_factory=dict)


def schema_hints_from_catalog() -> SchemaHints:
    """Hints from the built-in 1.33 schemas (empty when they cannot be loaded)."""
    from genericapi.apimachinery.schemas import SchemaCatalog

    try:
        definitions = SchemaCatalog.load().definitions
    except (OSError, RuntimeError, ValueError):
        return SchemaHints()
    required: dict[str, frozenset[str]] = {}
    properties: dict[str, frozenset[str]] = {}
    for name, definition in definitions.items():
        if not name.startswith("io.k8s."):
            continue
        proto_name = "k8s.io." + name[len("io.k8s."):]
        if definition.get("required"):
            required[proto_name] = frozenset(definition["required"])
        if isinstance(definition.get("properties"), dict):
            properties[proto_name] = frozenset(definition["properties"])
    return SchemaHints(required, properties)


# --- special types ------------------------------------------------------------------------------

def _datetime(seconds: int, nanos: int) -> datetime.datetime:
    try:
        return _EPOCH + datetime.timedelta(seconds=seconds, microseconds=nanos // 1000)
    except OverflowError:
        raise errors.bad_request(f"time out of range: {seconds}s") from None


def _time(message: Any) -> Any:
    if not message.ListFields():  # Go's zero time is marshalled as an empty message
        return OMIT
    moment = _datetime(message.seconds, 0)
    return (f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T"
            f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}Z")


def _micro_time(message: Any) -> Any:
    if not message.ListFields():
        return OMIT
    moment = _datetime(message.seconds, message.nanos)
    return (f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T"
            f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}.{moment.microsecond:06d}Z")


def _fraction(value: int, unit: int) -> str:
    whole, rest = divmod(value, unit)
    if not rest:
        return str(whole)
    digits = len(str(unit)) - 1
    return f"{whole}.{rest:0{digits}d}".rstrip("0")


def go_duration(nanoseconds: int) -> str:
    """``time.Duration.String()``: ``1m30s``, ``1.5s``, ``100ms``, ``0s``."""
    if nanoseconds == 0:
        return "0s"
    sign = "-" if nanoseconds < 0 else ""
    left = abs(nanoseconds)
    if left < 1000:
        return f"{sign}{left}ns"
    if left < 1_000_000:
        return f"{sign}{_fraction(left, 1000)}µs"
    if left < 1_000_000_000:
        return f"{sign}{_fraction(left, 1_000_000)}ms"
    text = _fraction(left % 60_000_000_000, 1_000_000_000) + "s"
    minutes = left // 60_000_000_000
    if minutes:
        text = f"{minutes % 60}m{text}"
        if minutes >= 60:
            text = f"{minutes // 60}h{text}"
    return sign + text


def _duration(message: Any) -> Any:
    return go_duration(message.duration)


def _quantity(message: Any) -> Any:
    return message.string or "0"


def _int_or_string(message: Any) -> Any:
    return message.strVal if message.type == 1 else message.intVal


def _json_bytes(raw: bytes, what: str, nested: NestedDecoder) -> Any:
    if not raw:
        return OMIT
    if raw.startswith(_PROTOBUF_MAGIC):
        return nested(raw)
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise errors.bad_request(f"{what} is not valid JSON: {exc}") from None


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


def _is_list_wrapper(descriptor: Descriptor) -> bool:
    """``ExtraValue``, ``Verbs``: Go slice types whose proto form wraps a single ``items`` list."""
    fields = descriptor.fields
    return (len(fields) == 1 and fields[0].name == "items" and fields[0].is_repeated
            and fields[0].type != FieldDescriptor.TYPE_MESSAGE)


def _is_zero(value: Any) -> bool:
    return value is OMIT or value == 0 or value == "" or value == [] or value is False


# --- plans ----------------------------------------------------------------------------------------

class _MessagePlan:
    """How to write one message type: converters per present field, defaults for absent ones."""

    __slots__ = ("absent_defaults", "converters", "empty", "field_order", "inline", "reorder")

    def __init__(self) -> None:
        self.converters: dict[str, Convert] = {}
        self.absent_defaults: list[tuple[str, Convert]] = []
        self.field_order: tuple[str, ...] = ()
        #: Go embedded structs: their fields are written into the parent object
        self.inline: frozenset[str] = frozenset()
        self.reorder = False
        self.empty: Callable[[], Message] | None = None


class MessageConverter:
    """Converts messages of one descriptor set to JSON dicts (plans cached per message type)."""

    def __init__(self, descriptor_set: descriptor_pb2.FileDescriptorSet,
                 hints: SchemaHints | None, nested: NestedDecoder) -> None:
        facts = go_field_facts(descriptor_set)
        self._value_fields = facts.value_fields
        self._hints = hints or SchemaHints()
        self._embedded = self._embedded_fields(facts.embedded_candidates)
        self._nested = nested
        self._plans: dict[str, _MessagePlan] = {}
        #: plans whose whole graph is built; others may be half-built by another thread
        self._ready: dict[str, _MessagePlan] = {}
        self._build_lock = threading.RLock()

    def _embedded_fields(self, candidates: frozenset[tuple[str, str]]) -> frozenset[tuple[str, str]]:
        """Go embedded (JSON inline) fields: named like their type and absent from the schema.

        Messages without a schema (old versions) borrow the answer from a message of the same
        name that has one (``extensions/v1beta1 IngressRule`` from ``networking/v1``).
        """
        properties = self._hints.properties
        inline: set[tuple[str, str]] = set()
        inline_short: set[tuple[str, str]] = set()
        for message, name in candidates:
            known = properties.get(message)
            if known is not None and name not in known:
                inline.add((message, name))
                inline_short.add((message.rpartition(".")[2], name))
        for message, name in candidates:
            if message not in properties and (message.rpartition(".")[2], name) in inline_short:
                inline.add((message, name))
        return frozenset(inline)

    def convert(self, message: Message) -> dict[str, Any]:
        descriptor = message.DESCRIPTOR
        plan = self._ready.get(descriptor.full_name)
        if plan is None:
            with self._build_lock:
                plan = self._plan(descriptor)
                self._ready[descriptor.full_name] = plan
        return self._apply(plan, message)

    def _apply(self, plan: _MessagePlan, message: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        converters = plan.converters
        for field, value in message.ListFields():
            converted = converters[field.name](value)
            if converted is not OMIT:
                out[field.name] = converted
        for name, make_default in plan.absent_defaults:
            if name not in out:
                out[name] = make_default(None)
        if plan.reorder and len(out) > 1:
            inline = plan.inline
            ordered: dict[str, Any] = {}
            for name in plan.field_order:
                if name in out:
                    if name in inline:
                        ordered.update(out[name])
                    else:
                        ordered[name] = out[name]
            return ordered
        if plan.inline and out:
            return self._flatten(plan, out)
        return out

    @staticmethod
    def _flatten(plan: _MessagePlan, out: dict[str, Any]) -> dict[str, Any]:
        flat: dict[str, Any] = {}
        for name, value in out.items():
            if name in plan.inline:
                flat.update(value)
            else:
                flat[name] = value
        return flat

    def _plan(self, descriptor: Descriptor) -> _MessagePlan:
        plan = self._plans.get(descriptor.full_name)
        if plan is not None:
            return plan
        plan = _MessagePlan()
        self._plans[descriptor.full_name] = plan  # before recursing: types may refer to themselves
        required = self._hints.required.get(descriptor.full_name, frozenset())
        fields = descriptor.fields
        plan.inline = frozenset(f.name for f in fields if (descriptor.full_name, f.name) in self._embedded)
        for field in fields:
            is_value = (descriptor.full_name, field.name) in self._value_fields
            keep_zero = field.name in required
            plan.converters[field.name] = self._field_converter(field, is_value, keep_zero)
            if not is_value or field.is_repeated:
                continue
            if field.type == FieldDescriptor.TYPE_MESSAGE:
                default = self._absent_default(field, keep_zero)
                if default is not None:
                    plan.absent_defaults.append((field.name, default))
            elif keep_zero and field.type != FieldDescriptor.TYPE_BYTES:
                # Go writes required value scalars even when zero (gogo always sends them too)
                plan.absent_defaults.append((field.name, _constant(field.default_value)))
        plan.field_order = tuple(f.name for f in fields)
        by_number = tuple(f.name for f in sorted(fields, key=lambda f: f.number))
        plan.reorder = bool(plan.absent_defaults) or bool(plan.inline) or by_number != plan.field_order
        return plan

    def _absent_default(self, field: FieldDescriptor, keep_zero: bool) -> Convert | None:
        """What Go writes for a value struct that is missing on the wire (None: nothing)."""
        name = field.message_type.full_name
        if name in QUANTITIES:
            return lambda _: "0"
        if name == DURATION:
            return lambda _: "0s"
        if name == INT_OR_STRING:
            return (lambda _: 0) if keep_zero else None
        if name in (TIME, MICRO_TIME, RAW_EXTENSION, FIELDS_V1) or _is_list_wrapper(field.message_type):
            return None
        nested = self._plan(field.message_type)
        message_type = field.message_type
        apply = self._apply

        def empty_struct(_: Any) -> dict[str, Any]:
            if nested.empty is None:
                from google.protobuf import message_factory

                nested.empty = message_factory.GetMessageClass(message_type)
            return apply(nested, nested.empty())

        return empty_struct

    def _message_value(self, descriptor: Descriptor) -> Convert:
        """Converter of one message value (an element, a map value or a singular field)."""
        name = descriptor.full_name
        if name == TIME:
            return _time
        if name == MICRO_TIME:
            return _micro_time
        if name == DURATION:
            return _duration
        if name in QUANTITIES:
            return _quantity
        if name == INT_OR_STRING:
            return _int_or_string
        nested = self._nested
        if name == RAW_EXTENSION:
            return lambda m: _json_bytes(m.raw, "RawExtension", nested)
        if name == FIELDS_V1:
            return lambda m: _json_bytes(m.Raw, "FieldsV1", nested)
        if _is_list_wrapper(descriptor):
            return lambda m: list(m.items)
        plan = self._plan(descriptor)
        apply = self._apply
        return lambda m: apply(plan, m)

    def _scalar_value(self, field: FieldDescriptor) -> Convert | None:
        return _b64 if field.type == FieldDescriptor.TYPE_BYTES else None

    def _field_converter(self, field: FieldDescriptor, is_value: bool, keep_zero: bool) -> Convert:
        is_message = field.type == FieldDescriptor.TYPE_MESSAGE
        if is_message and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            if value_field.type == FieldDescriptor.TYPE_MESSAGE:
                convert_value = self._message_value(value_field.message_type)
                return lambda m: {k: _null(convert_value(v)) for k, v in m.items()}
            if value_field.type == FieldDescriptor.TYPE_BYTES:
                return lambda m: {k: _b64(v) for k, v in m.items()}
            return dict
        if field.is_repeated:
            if is_message:
                convert_element = self._message_value(field.message_type)
                return lambda items: [_null(convert_element(item)) for item in items]
            if field.type == FieldDescriptor.TYPE_BYTES:
                return lambda items: [_b64(item) for item in items]
            return list
        convert = self._message_value(field.message_type) if is_message else self._scalar_value(field)
        # Present pointer fields are "set" and written even when zero; so are value structs.
        omit_zero = is_value and not keep_zero and (
            not is_message or field.message_type.full_name == INT_OR_STRING)
        if is_message and _is_list_wrapper(field.message_type):
            omit_zero = True
        if convert is None:
            return (lambda v: OMIT if not v else v) if omit_zero else _identity
        if omit_zero:
            singular = convert
            return lambda v: OMIT if _is_zero(converted := singular(v)) else converted
        return convert


def _constant(value: Any) -> Convert:
    return lambda _: value


def _identity(value: Any) -> Any:
    return value


def _null(value: Any) -> Any:
    """Inside lists and maps a Go null stays a JSON null."""
    return None if value is OMIT else value
