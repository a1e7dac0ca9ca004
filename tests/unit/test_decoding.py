"""decode_body / encode_json: formats, duplicate detection and Go-worded failures."""

from __future__ import annotations

import pytest
from genericapi.apimachinery.decoding import decode_body, encode_json
from genericapi.apimachinery.errors import APIError


def _fail(body: bytes, content_type: str = "application/json", kind: str = "") -> APIError:
    with pytest.raises(APIError) as info:
        decode_body(body, content_type, kind=kind)
    return info.value


def test_json_fast_path_has_no_warnings() -> None:
    obj, warnings = decode_body(b'{"a": 1, "a": 2}', "application/json")
    assert obj == {"a": 2}
    assert warnings == []


def test_json_duplicates_with_full_paths() -> None:
    body = (b'{"metadata":{"name":"a","name":"b","labels":{"x":"1","x":"2"}},'
            b'"spec":{"containers":[{"name":"c","image":"i","image":"j"}]}}')
    obj, warnings = decode_body(body, "application/json; charset=utf-8", detect_duplicates=True)
    assert obj["metadata"]["name"] == "b"
    assert warnings == [
        'duplicate field "metadata.name"',
        'duplicate field "metadata.labels.x"',
        'duplicate field "spec.containers[0].image"',
    ]


@pytest.mark.parametrize(("body", "message"), [
    (b'{"a":', "unexpected end of JSON input"),
    (b"", "unexpected end of JSON input"),
    (b"x", "invalid character 'x' looking for beginning of value"),
    (b'{"a" 1}', "invalid character '1' after object key"),
    (b'{"a":1 "b":2}', "invalid character '\"' after object key:value pair"),
    (b"{a:1}", "invalid character 'a' looking for beginning of object key string"),
    (b'{"a":1}}', "invalid character '}' after top-level value"),
    (b'{"a":tru}', "invalid character '}' in literal true (expecting 'e')"),
    (b"[1 2]", "invalid character '2' after array element"),
])
def test_malformed_json_go_wording(body: bytes, message: str) -> None:
    err = _fail(body)
    assert err.code == 400 and err.reason == "BadRequest"
    assert err.message == f"couldn't get version/kind; json parse error: {message}"


def test_malformed_json_with_kind_is_summarized() -> None:
    err = _fail(b"xyz", kind="Deployment")
    assert err.message == ("the object provided is unrecognized (must be of type Deployment): "
                           "couldn't get version/kind; json parse error: invalid character 'x' "
                           "looking for beginning of value (78797a)")


def test_non_object_body_is_rejected() -> None:
    err = _fail(b"[1, 2]")
    assert err.code == 400
    assert "cannot unmarshal array into Go value of type struct { APIVersion string" in err.message
    assert _fail(b'"s"').message.startswith("couldn't get version/kind; json parse error: json: "
                                            "cannot unmarshal string")
    assert _fail(b"null").message == "Object 'Kind' is missing in 'null'"


def test_big_integers_fall_back_like_go() -> None:
    obj, _ = decode_body(b'{"n": 123456789012345678901234567890}', "application/json")
    assert isinstance(obj["n"], float)
    obj, _ = decode_body(b'{"n": 9223372036854775807}', "application/json")
    assert obj["n"] == 9223372036854775807


def test_yaml_sorted_keys_timestamps_stay_strings_and_duplicates() -> None:
    body = (b"kind: Pod\napiVersion: v1\nmetadata:\n  name: a\n  name: b\n"
            b"  creationTimestamp: 2024-01-01T00:00:00Z\n")
    obj, warnings = decode_body(body, "application/yaml", detect_duplicates=True)
    assert list(obj) == ["apiVersion", "kind", "metadata"]
    assert obj["metadata"] == {"creationTimestamp": "2024-01-01T00:00:00Z", "name": "b"}
    assert warnings == ['line 5: key "name" already set in map']
    _, quiet = decode_body(body, "application/yaml")
    assert quiet == []


def test_yaml_errors() -> None:
    err = _fail(b"a: b: c", "application/yaml")
    assert err.code == 400 and err.message == "yaml: line 1: mapping values are not allowed in this context"
    assert _fail(b"- 1\n- 2", "application/yaml").code == 400
    assert _fail(b"", "application/yaml").message == "Object 'Kind' is missing in 'null'"
    assert "unsupported value: NaN" in _fail(b"a: .nan", "application/yaml").message


def test_unknown_media_type_is_415() -> None:
    assert _fail(b"{}", "text/plain").code == 415


def test_encode_json() -> None:
    assert encode_json({"a": [1, {}]}) == b'{"a":[1,{}]}\n'
    assert encode_json({"a": {"b": 1}}, pretty=True) == b'{\n  "a": {\n    "b": 1\n  }\n}\n'
