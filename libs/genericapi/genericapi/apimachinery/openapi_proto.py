"""Swagger 2.0 documents encoded as gnostic ``openapi.v2.Document`` protobuf.

kubectl 1.27/1.28 fetch ``/openapi/v2`` with ``Accept:
application/com.github.proto-openapi.spec.v2@v1.0+protobuf`` and decode it with gnostic's Go
types; kube-apiserver produces those bytes by parsing its JSON document with gnostic. This module
does the same mapping from our dict document: JSON objects become ordered (name, value) pairs,
``$ref`` becomes ``_ref``, parameters and responses take their oneof branch, and every ``x-*``
vendor extension (and every free-form value: enum, default, example) is carried as YAML text in
``Any.yaml``, which is where kube puts it and where kubectl reads it back from.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from types import ModuleType
from typing import Any

import orjson
import yaml

_YAML_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

_pb: ModuleType | None = None


def _messages() -> ModuleType:
    """The generated gnostic module, generating it first when needed."""
    global _pb
    if _pb is None:
        from genericapi.protogen import ensure_generated

        ensure_generated()
        from genericapi.generated.gnostic import openapi_v2_pb2

        _pb = openapi_v2_pb2
    return _pb


@lru_cache(maxsize=4096)
def _yaml_from_json(encoded: bytes) -> str:
    text: str = yaml.dump(
        orjson.loads(encoded), Dumper=_YAML_DUMPER, default_flow_style=False, sort_keys=True, width=1 << 30
    )
    # a bare scalar document ends with an explicit end marker; Go's encoder writes none
    return text.removesuffix("...\n")


def to_yaml(value: Any) -> str:
    """YAML text of a JSON value, as gnostic stores it in ``Any.yaml``."""
    return _yaml_from_json(orjson.dumps(value, option=orjson.OPT_SORT_KEYS))


def _any(value: Any) -> Any:
    return _messages().Any(yaml=to_yaml(value))


def _extensions(node: Mapping[str, Any]) -> list[Any]:
    pb = _messages()
    return [
        pb.NamedAny(name=key, value=pb.Any(yaml=to_yaml(value)))
        for key, value in node.items()
        if key.startswith("x-")
    ]


_SCHEMA_STRINGS = {"format": "format", "title": "title", "description": "description",
                   "pattern": "pattern", "discriminator": "discriminator"}  # fmt: skip
_SCHEMA_NUMBERS = {"multipleOf": "multiple_of", "maximum": "maximum", "minimum": "minimum"}
_SCHEMA_INTS = {
    "maxLength": "max_length",
    "minLength": "min_length",
    "maxItems": "max_items",
    "minItems": "min_items",
    "maxProperties": "max_properties",
    "minProperties": "min_properties",
}
_SCHEMA_BOOLS = {
    "exclusiveMaximum": "exclusive_maximum",
    "exclusiveMinimum": "exclusive_minimum",
    "uniqueItems": "unique_items",
    "readOnly": "read_only",
}


def schema_message(node: Mapping[str, Any]) -> Any:
    """A Swagger schema object as ``openapi.v2.Schema``."""
    pb = _messages()
    fields: dict[str, Any] = {}
    for key, value in node.items():
        if key == "$ref":
            fields["_ref"] = value
        elif key in _SCHEMA_STRINGS:
            fields[_SCHEMA_STRINGS[key]] = str(value)
        elif key in _SCHEMA_NUMBERS and isinstance(value, int | float) and not isinstance(value, bool):
            fields[_SCHEMA_NUMBERS[key]] = float(value)
        elif key in _SCHEMA_INTS and isinstance(value, int):
            fields[_SCHEMA_INTS[key]] = value
        elif key in _SCHEMA_BOOLS and isinstance(value, bool):
            fields[_SCHEMA_BOOLS[key]] = value
        elif key == "type":
            fields["type"] = pb.TypeItem(value=[value] if isinstance(value, str) else list(value))
        elif key == "required":
            fields["required"] = list(value)
        elif key == "enum":
            fields["enum"] = [_any(item) for item in value]
        elif key in ("default", "example"):
            fields[key] = _any(value)
        elif key == "items":
            items = value if isinstance(value, list) else [value]
            fields["items"] = pb.ItemsItem(schema=[schema_message(item) for item in items])
        elif key == "allOf":
            fields["all_of"] = [schema_message(item) for item in value]
        elif key == "properties":
            fields["properties"] = pb.Properties(
                additional_properties=[
                    pb.NamedSchema(name=name, value=schema_message(sub)) for name, sub in value.items()
                ]
            )
        elif key == "additionalProperties":
            if isinstance(value, bool):
                fields["additional_properties"] = pb.AdditionalPropertiesItem(boolean=value)
            else:
                fields["additional_properties"] = pb.AdditionalPropertiesItem(schema=schema_message(value))
        elif key == "externalDocs":
            fields["external_docs"] = _external_docs(value)
    extensions = _extensions(node)
    if extensions:
        fields["vendor_extension"] = extensions
    return pb.Schema(**fields)


def _external_docs(node: Mapping[str, Any]) -> Any:
    return _messages().ExternalDocs(
        description=node.get("description", ""), url=node.get("url", ""), vendor_extension=_extensions(node)
    )


_PARAM_KEYS = {
    "collectionFormat": "collection_format",
    "allowEmptyValue": "allow_empty_value",
    **_SCHEMA_NUMBERS,
    **{k: v for k, v in _SCHEMA_INTS.items() if "Properties" not in k},
    **{k: v for k, v in _SCHEMA_BOOLS.items() if k != "readOnly"},
}


def _primitives_items(node: Mapping[str, Any]) -> Any:
    pb = _messages()
    fields: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("type", "format"):
            fields[key] = value
        elif key == "items":
            fields["items"] = _primitives_items(value)
        elif key in _PARAM_KEYS and key != "allowEmptyValue":
            fields[_PARAM_KEYS[key]] = value
        elif key == "default":
            fields["default"] = _any(value)
        elif key == "enum":
            fields["enum"] = [_any(item) for item in value]
    fields["vendor_extension"] = _extensions(node)
    return pb.PrimitivesItems(**fields)


_SUB_SCHEMAS = {
    "query": ("QueryParameterSubSchema", "query_parameter_sub_schema"),
    "path": ("PathParameterSubSchema", "path_parameter_sub_schema"),
    "header": ("HeaderParameterSubSchema", "header_parameter_sub_schema"),
    "formData": ("FormDataParameterSubSchema", "form_data_parameter_sub_schema"),
}


def parameter_message(node: Mapping[str, Any]) -> Any:
    """A parameter (or a ``$ref`` to one) as ``openapi.v2.ParametersItem``."""
    pb = _messages()
    if "$ref" in node:
        return pb.ParametersItem(
            json_reference=pb.JsonReference(_ref=node["$ref"], description=node.get("description", ""))
        )
    location = node.get("in", "")
    if location == "body":
        body = pb.BodyParameter(
            description=node.get("description", ""),
            name=node.get("name", ""),
            required=bool(node.get("required", False)),
            vendor_extension=_extensions(node),
            **{"in": location},
        )
        if isinstance(node.get("schema"), Mapping):
            body.schema.CopyFrom(schema_message(node["schema"]))
        return pb.ParametersItem(parameter=pb.Parameter(body_parameter=body))
    if location not in _SUB_SCHEMAS:
        raise ValueError(f"parameter {node.get('name')!r} has unsupported location {location!r}")
    message_name, oneof_field = _SUB_SCHEMAS[location]
    message_class = getattr(pb, message_name)
    known = set(message_class.DESCRIPTOR.fields_by_name)
    fields: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("required", "in", "description", "name", "type", "format"):
            fields[key] = value
        elif key in _PARAM_KEYS and _PARAM_KEYS[key] in known:
            fields[_PARAM_KEYS[key]] = value
        elif key == "items":
            fields["items"] = _primitives_items(value)
        elif key == "default":
            fields["default"] = _any(value)
        elif key == "enum":
            fields["enum"] = [_any(item) for item in value]
    fields["vendor_extension"] = _extensions(node)
    non_body = pb.NonBodyParameter(**{oneof_field: message_class(**fields)})
    return pb.ParametersItem(parameter=pb.Parameter(non_body_parameter=non_body))


def _responses(node: Mapping[str, Any]) -> Any:
    pb = _messages()
    codes = []
    for code, response in node.items():
        if code.startswith("x-"):
            continue
        if "$ref" in response:
            value = pb.ResponseValue(json_reference=pb.JsonReference(_ref=response["$ref"]))
        else:
            message = pb.Response(
                description=response.get("description", ""), vendor_extension=_extensions(response)
            )
            if isinstance(response.get("schema"), Mapping):
                message.schema.schema.CopyFrom(schema_message(response["schema"]))
            value = pb.ResponseValue(response=message)
        codes.append(pb.NamedResponseValue(name=str(code), value=value))
    return pb.Responses(response_code=codes, vendor_extension=_extensions(node))


def operation_message(node: Mapping[str, Any]) -> Any:
    pb = _messages()
    operation = pb.Operation(
        tags=node.get("tags", []),
        summary=node.get("summary", ""),
        description=node.get("description", ""),
        operation_id=node.get("operationId", ""),
        produces=node.get("produces", []),
        consumes=node.get("consumes", []),
        parameters=[parameter_message(p) for p in node.get("parameters", [])],
        schemes=node.get("schemes", []),
        deprecated=bool(node.get("deprecated", False)),
        security=[_security_requirement(s) for s in node.get("security", [])],
        vendor_extension=_extensions(node),
    )
    if "responses" in node:
        operation.responses.CopyFrom(_responses(node["responses"]))
    if "externalDocs" in node:
        operation.external_docs.CopyFrom(_external_docs(node["externalDocs"]))
    return operation


_METHODS = ("get", "put", "post", "delete", "options", "head", "patch")


def path_item_message(node: Mapping[str, Any]) -> Any:
    pb = _messages()
    fields: dict[str, Any] = {
        method: operation_message(node[method]) for method in _METHODS if method in node
    }
    if "$ref" in node:
        fields["_ref"] = node["$ref"]
    return pb.PathItem(
        parameters=[parameter_message(p) for p in node.get("parameters", [])],
        vendor_extension=_extensions(node),
        **fields,
    )


def _security_requirement(node: Mapping[str, Any]) -> Any:
    pb = _messages()
    return pb.SecurityRequirement(
        additional_properties=[
            pb.NamedStringArray(name=name, value=pb.StringArray(value=list(scopes)))
            for name, scopes in node.items()
        ]
    )


def _security_definition(node: Mapping[str, Any]) -> Any:
    pb = _messages()
    kind = node.get("type")
    common = {"type": kind, "description": node.get("description", ""), "vendor_extension": _extensions(node)}
    if kind == "apiKey":
        item = pb.ApiKeySecurity(name=node.get("name", ""), **{"in": node.get("in", "")}, **common)
        return pb.SecurityDefinitionsItem(api_key_security=item)
    if kind == "basic":
        return pb.SecurityDefinitionsItem(
            basic_authentication_security=pb.BasicAuthenticationSecurity(**common)
        )
    if kind == "oauth2":
        scopes = pb.Oauth2Scopes(
            additional_properties=[
                pb.NamedString(name=k, value=str(v)) for k, v in (node.get("scopes") or {}).items()
            ]
        )
        flow = node.get("flow", "")
        common.update(flow=flow, scopes=scopes)
        if flow == "implicit":
            item = pb.Oauth2ImplicitSecurity(authorization_url=node.get("authorizationUrl", ""), **common)
            return pb.SecurityDefinitionsItem(oauth2_implicit_security=item)
        if flow == "password":
            item = pb.Oauth2PasswordSecurity(token_url=node.get("tokenUrl", ""), **common)
            return pb.SecurityDefinitionsItem(oauth2_password_security=item)
        if flow == "application":
            item = pb.Oauth2ApplicationSecurity(token_url=node.get("tokenUrl", ""), **common)
            return pb.SecurityDefinitionsItem(oauth2_application_security=item)
        item = pb.Oauth2AccessCodeSecurity(
            authorization_url=node.get("authorizationUrl", ""), token_url=node.get("tokenUrl", ""), **common
        )
        return pb.SecurityDefinitionsItem(oauth2_access_code_security=item)
    raise ValueError(f"unsupported security definition type {kind!r}")


def document_message(doc: Mapping[str, Any]) -> Any:
    """The whole Swagger document as an ``openapi.v2.Document`` message."""
    pb = _messages()
    document = pb.Document(
        swagger=doc.get("swagger", "2.0"),
        host=doc.get("host", ""),
        base_path=doc.get("basePath", ""),
        schemes=doc.get("schemes", []),
        consumes=doc.get("consumes", []),
        produces=doc.get("produces", []),
        security=[_security_requirement(s) for s in doc.get("security", [])],
        tags=[
            pb.Tag(
                name=t.get("name", ""), description=t.get("description", ""), vendor_extension=_extensions(t)
            )
            for t in doc.get("tags", [])
        ],
        vendor_extension=_extensions(doc),
    )
    info = doc.get("info")
    if isinstance(info, Mapping):
        document.info.CopyFrom(
            pb.Info(
                title=info.get("title", ""),
                version=info.get("version", ""),
                description=info.get("description", ""),
                terms_of_service=info.get("termsOfService", ""),
                vendor_extension=_extensions(info),
            )
        )
    paths = doc.get("paths")
    if isinstance(paths, Mapping):
        document.paths.CopyFrom(
            pb.Paths(
                path=[
                    pb.NamedPathItem(name=name, value=path_item_message(item))
                    for name, item in paths.items()
                    if not name.startswith("x-")
                ],
                vendor_extension=_extensions(paths),
            )
        )
    definitions = doc.get("definitions")
    if isinstance(definitions, Mapping):
        document.definitions.CopyFrom(
            pb.Definitions(
                additional_properties=[
                    pb.NamedSchema(name=name, value=schema_message(schema))
                    for name, schema in definitions.items()
                ]
            )
        )
    parameters = doc.get("parameters")
    if isinstance(parameters, Mapping):
        document.parameters.CopyFrom(
            pb.ParameterDefinitions(
                additional_properties=[
                    pb.NamedParameter(name=name, value=parameter_message(p).parameter)
                    for name, p in parameters.items()
                ]
            )
        )
    security_definitions = doc.get("securityDefinitions")
    if isinstance(security_definitions, Mapping):
        document.security_definitions.CopyFrom(
            pb.SecurityDefinitions(
                additional_properties=[
                    pb.NamedSecurityDefinitionsItem(name=name, value=_security_definition(d))
                    for name, d in security_definitions.items()
                ]
            )
        )
    return document


_encoded: dict[int, tuple[Mapping[str, Any], bytes]] = {}


def openapi_v2_to_protobuf(doc: Mapping[str, Any]) -> bytes:
    """Protobuf bytes of a Swagger document; memoized per document object (treat it as immutable)."""
    cached = _encoded.get(id(doc))
    if cached is not None and cached[0] is doc:
        return cached[1]
    data: bytes = document_message(doc).SerializeToString(deterministic=True)
    if len(_encoded) >= 8:
        _encoded.clear()
    _encoded[id(doc)] = (doc, data)
    return data
