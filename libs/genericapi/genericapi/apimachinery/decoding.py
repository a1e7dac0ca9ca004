"""Request bodies to objects and objects to response bodies.

kube-apiserver accepts JSON and YAML bodies; YAML is converted to JSON first (so object keys
come out sorted), and strict field validation reports duplicate fields: for JSON as
``duplicate field "spec.paused"`` (full path), for YAML as go-yaml's
``line 14: key "paused" already set in map``. Malformed bodies are 400s worded like the Go
decoders. orjson is the fast path; the slower duplicate-aware parse runs only when asked.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import orjson
import yaml

from genericapi.apimachinery import deepjson, errors
from genericapi.apimachinery.go_json_errors import go_syntax_error

_FIND_KIND_TYPE = ('struct { APIVersion string "json:\\"apiVersion,omitempty\\""; '
                   'Kind string "json:\\"kind,omitempty\\"" }')
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def is_yaml(content_type: str) -> bool:
    media = _media_type(content_type)
    return media in ("application/yaml", "application/x-yaml", "text/yaml") or media.endswith("+yaml")


def is_json(content_type: str) -> bool:
    media = _media_type(content_type)
    return media in ("", "application/json", "*/*") or media.endswith("+json")


def _summarize(body: bytes, limit: int = 30) -> str:
    """Go's ``summarizeData``: JSON-looking bodies as text, anything else as hex."""
    if not body:
        return "<empty>"
    if body[:1] == b"{":
        return body[:limit].decode("utf-8", "replace") + (" ..." if len(body) > limit else "")
    return body[:limit].hex() + (" ..." if len(body) > limit else "")


def _decode_failure(message: str, body: bytes, kind: str) -> errors.APIError:
    if kind:
        return errors.bad_request(
            f"the object provided is unrecognized (must be of type {kind}): {message} ({_summarize(body)})")
    return errors.bad_request(message)


def _go_kind_name(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return "string"


def _require_object(value: Any, body: bytes, kind: str) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if value is None:
        raise errors.bad_request(f"Object 'Kind' is missing in '{body.decode('utf-8', 'replace').strip()}'")
    message = ("couldn't get version/kind; json parse error: json: cannot unmarshal "
               f"{_go_kind_name(value)} into Go value of type {_FIND_KIND_TYPE}")
    raise _decode_failure(message, body, kind)


# --- JSON -------------------------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ValueError(f"invalid constant {name}")


def _parse_int(text: str) -> int | float:
    number = int(text)
    # Go (PreserveInts) keeps int64 and falls back to float64 beyond it.
    return number if _INT64_MIN <= number <= _INT64_MAX else float(number)


class _DuplicateTracker:
    """Builds dicts from key/value pairs, remembering which keys repeated in which dict."""

    def __init__(self) -> None:
        self.repeated: dict[int, list[str]] = {}

    def __call__(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        dupes: list[str] = []
        for key, value in pairs:
            if key in out and key not in dupes:
                dupes.append(key)
            out[key] = value
        if dupes:
            self.repeated[id(out)] = dupes
        return out


def _duplicate_paths(value: Any, repeated: dict[int, list[str]], path: str, out: list[str]) -> None:
    """Every repeated key's path, depth first in document order (iterative: any depth)."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        node, at = stack.pop()
        children: list[tuple[Any, str]] = []
        if isinstance(node, dict):
            dupes = repeated.get(id(node), ())
            for key, child in node.items():
                child_path = f"{at}.{key}" if at else key
                if key in dupes:
                    children.append((_DUPLICATE, child_path))
                children.append((child, child_path))
        elif isinstance(node, list):
            children = [(child, f"{at}[{index}]") for index, child in enumerate(node)]
        elif node is _DUPLICATE:
            out.append(at)
        stack.extend(reversed(children))


_DUPLICATE = object()  # marks a repeated key's place in _duplicate_paths' walk


def _decode_json(body: bytes, detect_duplicates: bool, kind: str) -> tuple[Any, list[str]]:
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as err:
        too_deep = _too_deep(body)
        if too_deep is not None:
            raise _decode_failure(f"couldn't get version/kind; json parse error: {too_deep}", body, kind) from None
        if "depth" not in str(err):  # deeper than orjson parses (1,024), within Go's 10,000: parsed below
            # Invalid UTF-8 or huge integers are fine for Go; anything else is a real syntax error,
            # worded as Go's decoder words it (the slow scanner runs only on this path).
            syntax = go_syntax_error(body)
            if syntax is not None:
                raise _decode_failure(f"couldn't get version/kind; json parse error: {syntax}", body,
                                      kind) from None
    else:
        if not detect_duplicates:
            return value, []
    # The standard library's parser recurses once per level: importing deepjson allowed MAX_DEPTH.
    tracker = _DuplicateTracker()
    text = body.decode("utf-8", "replace")
    paths: list[str] = []
    try:
        value = json.loads(text, object_pairs_hook=tracker, parse_constant=_reject_constant, parse_int=_parse_int)
        if detect_duplicates and tracker.repeated:
            _duplicate_paths(value, tracker.repeated, "", paths)
    except RecursionError:
        # Deeper than the interpreter's recursion limit allows (lowered since deepjson raised
        # it): the depth error rather than a 500.
        message = _too_deep(body, 0) or "exceeded max depth"
        raise _decode_failure(f"couldn't get version/kind; json parse error: {message}", body, kind) from None
    if "\\u" in text and _has_surrogate(value):
        value = _replace_surrogates(value)
    return value, [f'duplicate field "{p}"' for p in paths]


#: Nesting a request body may have, as kube's decoder (``deepjson.MAX_DEPTH``, 10,000); one level more
#: is a 400 with Go's scanner text. Every verb serves an object that deep in a second or two: the
#: encoders, patches and field tracking are linear in depth (tests/integration/test_deep_custom_resources.py).
MAX_JSON_DEPTH = deepjson.MAX_DEPTH


def _too_deep(body: bytes, limit: int = MAX_JSON_DEPTH) -> str | None:
    """Go's scanner error for a body nested deeper than ``limit`` (0: its deepest point), else None."""
    openings = list(_openings(body)) if limit == 0 else None
    if openings is not None:
        limit = max((depth for _, depth in openings), default=1) - 1
    for index, depth in openings if openings is not None else _openings(body):
        if depth > limit:
            return f"invalid character '{chr(body[index])}' exceeded max depth"
    return None


_openings = deepjson.openings


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _has_surrogate(value: Any) -> bool:
    """Whether any key or string holds a lone surrogate (iterative: a body may nest 10,000 deep)."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            if _LONE_SURROGATE.search(node) is not None:
                return True
        elif isinstance(node, dict):
            stack.extend(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def _replace_surrogates(value: Any) -> Any:
    """Go's decoder turns an escaped lone UTF-16 surrogate (``"\\ud800"``) into U+FFFD; Python keeps
    it, and it could then never be encoded as UTF-8 again."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_replace_surrogates(k): _replace_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_surrogates(v) for v in value]
    return value


# --- YAML -------------------------------------------------------------------------------------

_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _KubeYAMLLoader(_BaseLoader):  # type: ignore[misc]
    """Safe loader that leaves timestamps as strings (as go-yaml does into interface{})."""

    duplicate_messages: list[str]


_KubeYAMLLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in _BaseLoader.yaml_implicit_resolvers.items()
}


def _yaml_key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if key is None:
        return "null"
    if isinstance(key, bool):
        return "true" if key else "false"
    return str(key)


def _construct_mapping(loader: _KubeYAMLLoader, node: yaml.MappingNode, deep: bool = False) -> dict[str, Any]:
    loader.flatten_mapping(node)
    out: dict[str, Any] = {}
    for key_node, value_node in node.value:
        key = _yaml_key(loader.construct_object(key_node, deep=True))
        if key in out:
            loader.duplicate_messages.append(
                f'line {key_node.start_mark.line + 1}: key "{key}" already set in map')
        out[key] = loader.construct_object(value_node, deep=True)
    return dict(sorted(out.items()))


_KubeYAMLLoader.add_constructor("tag:yaml.org,2002:map", _construct_mapping)


def _check_finite(value: Any) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        text = "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")
        raise ValueError(f"json: unsupported value: {text}")
    if isinstance(value, dict):
        for child in value.values():
            _check_finite(child)
    elif isinstance(value, list):
        for child in value:
            _check_finite(child)


def _decode_yaml(body: bytes, kind: str) -> tuple[Any, list[str]]:
    loader = _KubeYAMLLoader(body)
    loader.duplicate_messages = []
    try:
        value = _first_document(loader)
        _check_finite(value)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = f"line {mark.line + 1}: " if mark is not None else ""
        raise _decode_failure(f"yaml: {line}{err.problem or err.context}", body, kind) from None
    except (yaml.YAMLError, ValueError) as err:
        raise _decode_failure(f"yaml: {err}", body, kind) from None
    finally:
        loader.dispose()
    return value, loader.duplicate_messages


def _first_document(loader: _KubeYAMLLoader) -> Any:
    if loader.check_node():
        node = loader.get_node()
        if node is not None:
            return loader.construct_document(node)
    return None


# --- public API -------------------------------------------------------------------------------


def decode_body(body: bytes, content_type: str, detect_duplicates: bool = False,
                kind: str = "") -> tuple[dict[str, Any], list[str]]:
    """Parse a JSON or YAML request body into an object.

    Returns the object and, when ``detect_duplicates`` is set, kube-apiserver's duplicate
    field messages (for ``fieldValidation=Warn|Strict``). ``kind`` (the kind the endpoint
    serves) only shapes error wording. Raises :class:`errors.APIError`: 400 for malformed
    bodies or bodies that are not objects, 415 for media types other than JSON/YAML.
    """
    if is_yaml(content_type):
        value, duplicates = _decode_yaml(body, kind)
        if not detect_duplicates:
            duplicates = []
        if value is None:
            raise errors.bad_request("Object 'Kind' is missing in 'null'")
    elif is_json(content_type):
        value, duplicates = _decode_json(body, detect_duplicates, kind)
    else:
        raise errors.unsupported_media_type(content_type)
    return _require_object(value, body, kind), duplicates


def encode_json(obj: Any, pretty: bool = False) -> bytes:
    """Serialize a response object; ``pretty`` indents by two spaces like Go's MarshalIndent."""
    if pretty:
        return deepjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
    try:  # orjson inline, deepjson only past its 254 levels
        return orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError:
        return deepjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE)
