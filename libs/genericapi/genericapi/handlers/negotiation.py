"""Content negotiation: what the client asked to receive (JSON, Table, PartialObjectMetadata)."""

from __future__ import annotations

from dataclasses import dataclass

from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery import tables

JSON = "application/json"
YAML = "application/yaml"
PROTOBUF = "application/vnd.kubernetes.protobuf"


@dataclass(frozen=True, slots=True)
class MediaType:
    type: str
    params: dict[str, str]

    @property
    def as_(self) -> str:
        return self.params.get("as", "")

    @property
    def group(self) -> str:
        return self.params.get("g", "")

    @property
    def version(self) -> str:
        return self.params.get("v", "")


def parse_media_types(header: str) -> list[MediaType]:
    out: list[MediaType] = []
    for part in header.split(","):
        part = part.strip()
        if not part:
            continue
        pieces = [p.strip() for p in part.split(";")]
        params: dict[str, str] = {}
        for p in pieces[1:]:
            if "=" in p:
                k, v = p.split("=", 1)
                params[k.strip().lower()] = v.strip().strip('"')
        out.append(MediaType(pieces[0].lower(), params))
    # Highest quality first (stable, so equal ones keep the client's order); q=0 means "not this".
    ranked = [(_quality(mt), i, mt) for i, mt in enumerate(out)]
    return [mt for q, _i, mt in sorted(ranked, key=lambda r: (-r[0], r[1])) if q > 0]


def _quality(mt: MediaType) -> float:
    try:
        return float(mt.params.get("q", "1"))
    except ValueError:
        return 1.0


@dataclass(frozen=True, slots=True)
class Output:
    """What to render: ``object`` (plain), ``table``, ``partial`` (PartialObjectMetadata)."""

    mode: str
    yaml: bool = False
    #: For Table output: what each row embeds (``includeObject``: None, Metadata or Object).
    include_object: str = "Metadata"


#: What a 406 lists: the serializers' media types, without the ``;stream=watch`` variants.
_ACCEPTED = ["application/json", "application/yaml", "application/vnd.kubernetes.protobuf"]


def negotiate(accept: str) -> Output:
    """Pick the first acceptable representation in the client's Accept list."""
    if not accept:
        return Output("object")
    unsupported_as = False
    for mt in parse_media_types(accept):
        if mt.type not in (JSON, "*/*", "application/*", YAML):
            continue
        as_ = mt.as_
        if not as_:
            return Output("object", yaml=mt.type == YAML)
        if mt.group == "meta.k8s.io" and mt.version in ("v1", "v1beta1"):
            if as_ == "Table":
                return Output("table")
            if as_ in ("PartialObjectMetadata", "PartialObjectMetadataList"):
                return Output("partial")
        unsupported_as = True
    if unsupported_as:
        raise apierrors.not_acceptable(_ACCEPTED)
    for mt in parse_media_types(accept):
        if mt.type == PROTOBUF:
            # Clients that offer only protobuf get JSON's refusal with the list we speak.
            raise apierrors.not_acceptable(_ACCEPTED)
    raise apierrors.not_acceptable(_ACCEPTED)


def output_for(accept: str, include_object: str) -> Output:
    """The representation for a request: Accept header plus the ``includeObject`` parameter.

    Clients send a handful of distinct Accept headers (kubectl's, client-go's, the Python client's),
    so the answer is remembered per (Accept, includeObject): parsing and ranking the media types
    was ~10 us of every request. A request that is refused (406, a bad ``includeObject``) raises
    every time and is not remembered; past ``_MEMO_SIZE`` entries nothing new is kept, so odd
    headers cannot grow it."""
    key = (accept, include_object)
    out = _memo.get(key)
    if out is None:
        out = _output_for(accept, include_object)
        if len(_memo) < _MEMO_SIZE:
            _memo[key] = out
    return out


#: Distinct (Accept, includeObject) pairs remembered by ``output_for``.
_MEMO_SIZE = 256
_memo: dict[tuple[str, str], Output] = {}


def _output_for(accept: str, include_object: str) -> Output:
    out = negotiate(accept)
    if out.mode == "table":
        return Output("table", include_object=tables.validate_include_object(include_object))
    return out
