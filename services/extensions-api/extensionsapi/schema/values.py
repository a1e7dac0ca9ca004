"""Value validation of custom resources against an openAPIV3Schema, as kube-openapi's validator does.

kube-apiserver validates a custom resource with kube-openapi's ``SchemaValidator`` and turns each
result into a field error (``kubeOpenAPIResultToFieldErrors`` in apiextensions). The validator runs,
per schema node, in this order: type, allOf/oneOf/anyOf/not, string limits, format, number limits,
array limits, enum, object properties/required. Messages carry the value's path and ``in body``
(``spec.replicas in body should be less than or equal to 10``); the field error then prefixes the
path and the value (``spec.replicas: Invalid value: 15: ...``). Errors are de-duplicated by text, and
anyOf/oneOf failures report the branch that matched best, as kube-openapi does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from genericapi.apimachinery import errors
from genericapi.apimachinery.errors import FieldError
from genericapi.apimachinery.gofmt import field_value, go_float, go_v, json_quote

from .formats import effective_format, string_format_check
from .regex import PatternError, compile_pattern

IN = "body"

# kube-openapi error codes that apiextensions maps to specific field error types
REQUIRED = "required"
ENUM = "enum"
TOO_LONG = "too_long"
MAX_ITEMS = "max_items"
MAX_PROPERTIES = "max_properties"
INVALID_TYPE = "invalid_type"
OTHER = "other"
COMPOSITE = "composite"  # not a *Validation error: reported at the validator's root path


@dataclass(frozen=True)
class OpenAPIError:
    """One kube-openapi ``errors.Validation`` (or composite error) before conversion."""

    code: str
    name: str
    message: str
    value: Any = None
    valid: Any = None
    values: tuple[Any, ...] = ()


@dataclass
class Result:
    errors: list[OpenAPIError] = field(default_factory=list)
    match_count: int = 0

    def add(self, *errs: OpenAPIError) -> None:
        for err in errs:
            if all(err.message != seen.message for seen in self.errors):
                self.errors.append(err)

    def merge(self, *others: Result | None) -> Result:
        for other in others:
            if other is not None:
                self.add(*other.errors)
                self.match_count += other.match_count
        return self

    @property
    def valid(self) -> bool:
        return not self.errors


def _in(name: str, text: str) -> str:
    return f"{name} in {IN} {text}"


def _kind(data: Any) -> str:
    if isinstance(data, bool):
        return "bool"
    if isinstance(data, int):
        return "int"
    if isinstance(data, float):
        return "float"
    if isinstance(data, str):
        return "str"
    if isinstance(data, list):
        return "list"
    if isinstance(data, dict):
        return "map"
    return "other"


_SCHEMA_TYPE = {"bool": ("boolean", ""), "str": ("string", ""), "int": ("integer", "int64"),
                "float": ("number", "float64"), "list": ("array", ""), "map": ("object", "")}


def node_types(node: dict[str, Any]) -> list[str]:
    if node.get("x-kubernetes-int-or-string"):
        return ["integer", "string"]
    typ = node.get("type")
    return [typ] if isinstance(typ, str) and typ else []


def invalid_type(name: str, type_name: str, value: str) -> OpenAPIError:
    return OpenAPIError(INVALID_TYPE, name, _in(name, f"must be of type {type_name}: {json_quote(value)}"), value)


def _check_type(node: dict[str, Any], data: Any, path: str) -> Result:
    types = node_types(node)
    fmt = effective_format(node)
    res = Result(match_count=1)
    if data is None:
        if types and "null" not in types and not node.get("nullable"):
            return Result([invalid_type(path, ",".join(types), "null")])
        return res
    kind = _kind(data)
    sch_type, data_fmt = _SCHEMA_TYPE.get(kind, ("", ""))
    is_float_int = sch_type == "number" and float(data).is_integer() and "integer" in types
    is_int_float = sch_type == "integer" and "number" in types
    if kind not in ("str", "list") and fmt and not (sch_type in types or data_fmt == fmt or is_float_int
                                                   or is_int_float):
        return Result([invalid_type(path, fmt, data_fmt)])
    if not ("number" in types or "integer" in types) and fmt and kind in ("str", "list"):
        return res
    if not (sch_type in types or is_float_int or is_int_float):
        return Result([invalid_type(path, ",".join(types), sch_type)])
    return res


def _check_string(node: dict[str, Any], data: str, path: str) -> Result | None:
    max_len = node.get("maxLength")
    if isinstance(max_len, int) and len(data) > max_len:
        return Result([OpenAPIError(TOO_LONG, path, _in(path, f"should be at most {max_len} chars long"),
                                    data, max_len)])
    min_len = node.get("minLength")
    if isinstance(min_len, int) and len(data) < min_len:
        return Result([OpenAPIError(OTHER, path, _in(path, f"should be at least {min_len} chars long"), data)])
    pattern = node.get("pattern")
    if isinstance(pattern, str) and pattern:
        try:
            matched = compile_pattern(pattern).search(data) is not None
        except PatternError as exc:
            return Result([OpenAPIError(OTHER, path, _in(path, f"should match '{pattern}, but pattern is invalid: "
                                                         f"{exc}'"), data)])
        if not matched:
            return Result([OpenAPIError(OTHER, path, _in(path, f"should match '{pattern}'"), data)])
    return None


def _check_format(fmt: str, data: str, path: str) -> Result | None:
    check = string_format_check(fmt)
    if check is None or check(data):
        return None
    return Result([OpenAPIError(INVALID_TYPE, path, _in(path, f"must be of type {fmt}: {json_quote(data)}"), data)])


def _is_json_integer(value: float) -> bool:
    if math.isnan(value) or math.isinf(value):
        return False
    return abs(value - round(value)) < 1e-9 * max(1.0, abs(value))


def _bound_text(bound: float, data: Any) -> str:
    """kube-openapi compares an int64 value with ``int64(bound)`` and prints that; floats print as floats."""
    return str(int(bound)) if isinstance(data, int) else go_float(float(bound))


def _check_number(node: dict[str, Any], data: int | float, path: str) -> Result:
    res = Result(match_count=1)
    multiple = node.get("multipleOf")
    if isinstance(multiple, (int, float)) and not isinstance(multiple, bool) and multiple:
        if isinstance(data, int) and float(multiple).is_integer():
            factor = int(multiple)
            if factor < 0:
                res.add(OpenAPIError(OTHER, path, f"factor MultipleOf declared for {path} must be positive: {factor}",
                                     factor))
            elif data % factor:
                res.add(OpenAPIError(OTHER, path, _in(path, f"should be a multiple of {factor}"), data))
        elif multiple < 0:
            res.add(OpenAPIError(OTHER, path, f"factor MultipleOf declared for {path} must be positive: "
                                 f"{go_float(float(multiple))}", multiple))
        else:
            quotient = (1 / multiple * data) if multiple < 1 else (data / multiple)
            if not _is_json_integer(quotient):
                res.add(OpenAPIError(OTHER, path, _in(path, f"should be a multiple of {go_float(float(multiple))}"),
                                     data))
    minimum = node.get("minimum")
    if isinstance(minimum, (int, float)) and not isinstance(minimum, bool):
        low = int(minimum) if isinstance(data, int) else float(minimum)
        exclusive = bool(node.get("exclusiveMinimum"))
        if data < low or (exclusive and data == low):
            word = "greater than" if exclusive else "greater than or equal to"
            res.add(OpenAPIError(OTHER, path, _in(path, f"should be {word} {_bound_text(minimum, data)}"), data))
    maximum = node.get("maximum")
    if isinstance(maximum, (int, float)) and not isinstance(maximum, bool):
        high = int(maximum) if isinstance(data, int) else float(maximum)
        exclusive = bool(node.get("exclusiveMaximum"))
        if data > high or (exclusive and data == high):
            word = "less than" if exclusive else "less than or equal to"
            res.add(OpenAPIError(OTHER, path, _in(path, f"should be {word} {_bound_text(maximum, data)}"), data))
    return res


def json_equal(a: Any, b: Any) -> bool:
    """Deep equality of decoded JSON where ``true`` never equals ``1``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _check_array(node: dict[str, Any], data: list[Any], path: str) -> Result:
    res = Result()
    items = node.get("items")
    if isinstance(items, dict):
        for i, item in enumerate(data):
            res.merge(validate_value(items, item, f"{path}[{i}]"))
    size = len(data)
    min_items = node.get("minItems")
    if isinstance(min_items, int) and size < min_items:
        res.add(OpenAPIError(OTHER, path, _in(path, f"should have at least {min_items} items"), size))
    max_items = node.get("maxItems")
    if isinstance(max_items, int) and size > max_items:
        res.add(OpenAPIError(MAX_ITEMS, path, _in(path, f"should have at most {max_items} items"), size, max_items))
    if node.get("uniqueItems"):
        for i in range(size):
            if any(json_equal(data[i], data[j]) for j in range(i)):
                res.add(OpenAPIError(OTHER, path, _in(path, "shouldn't contain duplicates")))
                break
    res.match_count += 1
    return res


def _check_enum(node: dict[str, Any], data: Any, path: str) -> Result | None:
    enum = node.get("enum")
    if not isinstance(enum, list) or not enum:
        return None
    if any(json_equal(data, allowed) for allowed in enum):
        return None
    shown = "[" + " ".join(go_v(v) for v in enum) + "]"
    return Result([OpenAPIError(ENUM, path, _in(path, f"should be one of {shown}"), data, values=tuple(enum))])


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _check_object(node: dict[str, Any], data: dict[str, Any], path: str) -> Result:
    count = len(data)
    min_props = node.get("minProperties")
    if isinstance(min_props, int) and count < min_props:
        return Result([OpenAPIError(OTHER, path, _in(path, f"should have at least {min_props} properties"), count)])
    max_props = node.get("maxProperties")
    if isinstance(max_props, int) and count > max_props:
        return Result([OpenAPIError(MAX_PROPERTIES, path, _in(path, f"should have at most {max_props} properties"),
                                    count, max_props)])
    res = Result()
    raw_props = node.get("properties")
    props: dict[str, Any] = raw_props if isinstance(raw_props, dict) else {}
    additional = node.get("additionalProperties")
    if additional is False:
        for key in data:
            if key not in props:
                res.add(OpenAPIError(OTHER, path, f"{path}.{key} in {IN} is a forbidden property", key))
    elif isinstance(additional, dict):
        for key, value in data.items():
            if key not in props:
                res.merge(validate_value(additional, value, f"{path}.{key}"))
    for name, sub in props.items():
        if name in data and isinstance(sub, dict):
            res.merge(validate_value(sub, data[name], _child(path, name)))
    for name in node.get("required") or ():
        if name not in data:
            res.add(OpenAPIError(REQUIRED, f"{path}.{name}", _in(f"{path}.{name}", "is required")))
    return res


def _composite(text: str) -> OpenAPIError:
    return OpenAPIError(COMPOSITE, "", text)


def _check_junctors(node: dict[str, Any], data: Any, path: str) -> Result:
    main = Result()
    any_of = node.get("anyOf")
    if isinstance(any_of, list) and any_of:
        best: Result | None = None
        first_success: Result | None = None
        for sub in any_of:
            result = validate_value(sub, data, path)
            if result.valid:
                best = None
                first_success = result
                break
            if best is None or result.match_count > best.match_count:
                best = result
        if first_success is None:
            main.add(_composite(f"{json_quote(path)} must validate at least one schema (anyOf)"))
        main.merge(best if best is not None else first_success)
    one_of = node.get("oneOf")
    if isinstance(one_of, list) and one_of:
        best = None
        first_success = None
        validated = 0
        for sub in one_of:
            result = validate_value(sub, data, path)
            if result.valid:
                validated += 1
                best = None
                first_success = first_success or result
                continue
            if validated == 0 and (best is None or result.match_count > best.match_count):
                best = result
        if validated != 1:
            extra = "Found none valid" if validated == 0 else f"Found {validated} valid alternatives"
            main.add(_composite(f"{json_quote(path)} must validate one and only one schema (oneOf). {extra}"))
            main.merge(best)
        else:
            main.merge(first_success)
    all_of = node.get("allOf")
    if isinstance(all_of, list) and all_of:
        passed = 0
        for sub in all_of:
            result = validate_value(sub, data, path)
            passed += result.valid
            main.merge(result)
        if passed != len(all_of):
            extra = ". None validated" if passed == 0 else ""
            main.add(_composite(f"{json_quote(path)} must validate all the schemas (allOf){extra}"))
    not_schema = node.get("not")
    if isinstance(not_schema, dict) and validate_value(not_schema, data, path).valid:
        main.add(_composite(f"{json_quote(path)} must not validate the schema (not)"))
    main.match_count += 1
    return main


def validate_value(node: dict[str, Any], data: Any, path: str = "") -> Result:
    """kube-openapi's ``SchemaValidator.Validate`` for one node (recursing into children)."""
    result = Result()
    applies_type = bool(node_types(node)) or bool(effective_format(node))
    if data is None:
        if applies_type:
            result.merge(_check_type(node, data, path))
        result.merge(_check_enum(node, data, path))
        return result
    kind = _kind(data)
    steps: list[Result | None] = []
    if applies_type:
        steps.append(_check_type(node, data, path))
    steps.append(_check_junctors(node, data, path))
    if kind == "str":
        steps.append(_check_string(node, data, path))
        fmt = effective_format(node)
        if fmt and string_format_check(fmt) is not None:
            steps.append(_check_format(fmt, data, path))
    if kind in ("int", "float"):
        steps.append(_check_number(node, data, path))
    if kind == "list":
        steps.append(_check_array(node, data, path))
    steps.append(_check_enum(node, data, path))
    if kind == "map":
        steps.append(_check_object(node, data, path))
    for step in steps:
        result.merge(step)
        result.match_count += 1
    result.match_count += 1
    return result


def _join(prefix: str | None, name: str) -> str:
    if not prefix:
        return name
    return f"{prefix}.{name}" if name else prefix


def to_field_errors(result: Result, prefix: str | None = None) -> list[FieldError]:
    """apiextensions' ``kubeOpenAPIResultToFieldErrors`` (``prefix`` None means the object root)."""
    out: list[FieldError] = []
    root = prefix if prefix else "<nil>"
    for err in result.errors:
        if err.code == COMPOSITE:
            out.append(errors.invalid(root, "", err.message))
            continue
        name = err.name[1:] if err.name.startswith(".") else err.name
        path = _join(prefix, name) if name and name != "." else root
        value = "" if err.value is None else err.value
        if err.code == REQUIRED:
            out.append(errors.required(path))
        elif err.code == ENUM:
            supported = [v if isinstance(v, str) else _json(v) for v in err.values]
            out.append(errors.not_supported(path, field_value(err.value), supported))
        elif err.code == TOO_LONG:
            out.append(errors.too_long_value(path, err.valid if isinstance(err.valid, int) else -1))
        elif err.code in (MAX_ITEMS, MAX_PROPERTIES):
            out.append(errors.too_many(path, err.value if isinstance(err.value, int) else -1,
                                       err.valid if isinstance(err.valid, int) else -1))
        elif err.code == INVALID_TYPE:
            out.append(errors.type_invalid(path, field_value(value), err.message))
        else:
            out.append(errors.invalid(path, field_value(value), err.message))
    return out


def _json(value: Any) -> str:
    import orjson

    return orjson.dumps(value).decode()
