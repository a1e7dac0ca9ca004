"""kube's own audit annotations for a mutating webhook call: keys, levels and value texts.

kube's mutating dispatcher (``webhookAnnotator``) writes, per call, ``mutation.webhook.admission.k8s.io/
round_<r>_index_<i>`` at audit level Metadata (``{"configuration":...,"webhook":...,"mutated":...}``)
and, when the webhook's JSONPatch was applied, ``patch.webhook.admission.k8s.io/round_<r>_index_<i>``
at level Request (``AddAnnotationWithLevel``: the patch may carry what a Metadata-level event must
not show), whose value is Go's ``json.Marshal`` of ``PatchAuditAnnotation``: the patch as
``jsonpatch.Patch`` (a list of ``map[string]*json.RawMessage``), so each operation's keys come out
sorted (a duplicate key: the last), each value is the webhook's own JSON compacted, and ``<``,
``>``, ``&``, U+2028 and U+2029 are escaped as Go's HTML-safe encoder does. Numbers keep the
webhook's text (``1e3`` stays ``1e3``); strings are re-encoded (a webhook's ``\\u00e9`` escape
comes out as ``é``, which Go's RawMessage would keep verbatim).

Which events show a Request-level annotation is the audit policy's level, known only where the
event is written (the gateway): ``record`` hands the annotation to the admission record's
level-aware ``add_annotation_with_level`` when the record has one, and otherwise drops it rather
than log a patch at Metadata.
"""

from __future__ import annotations

import json
from typing import Any

from genericapi.apimachinery.admission import Attributes

MUTATION_PREFIX = "mutation.webhook.admission.k8s.io/"
PATCH_PREFIX = "patch.webhook.admission.k8s.io/"
FAILED_OPEN_MUTATING_PREFIX = "failed-open." + MUTATION_PREFIX
LEVEL_METADATA = "Metadata"
LEVEL_REQUEST = "Request"
_HTML = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


class _Number(str):
    """A number as the webhook wrote it."""


class _Object(list[tuple[str, Any]]):
    """A JSON object's members in the webhook's order."""


def _go_string(value: str) -> str:
    text = json.dumps(value, ensure_ascii=False)
    for char, escaped in _HTML.items():
        if char in text:
            text = text.replace(char, escaped)
    return text


def _encode(value: Any) -> str:
    if isinstance(value, _Number):
        return str(value)
    if isinstance(value, str):
        return _go_string(value)
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, _Object):
        return "{" + ",".join(f"{_go_string(k)}:{_encode(v)}" for k, v in value) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_encode(v) for v in value) + "]"
    raise TypeError(f"unexpected JSON value {value!r}")


def _decode(raw: bytes) -> Any:
    return json.loads(raw, parse_int=_Number, parse_float=_Number, parse_constant=_Number,
                      object_pairs_hook=_Object)


def patch_value(configuration: str, webhook: str, raw_patch: bytes) -> str:
    """kube's ``jsonPatchAnnotationValue`` for the JSONPatch a webhook returned (already decoded once
    by the dispatcher, so ``raw_patch`` is a JSON list)."""
    ops = _decode(raw_patch)
    rendered = []
    for op in ops:
        fields = dict(op) if isinstance(op, _Object) else {}
        rendered.append("{" + ",".join(f"{_go_string(k)}:{_encode(fields[k])}" for k in sorted(fields)) + "}")
    return (f'{{"configuration":{_go_string(configuration)},"webhook":{_go_string(webhook)},'
            f'"patch":[{",".join(rendered)}],"patchType":"JSONPatch"}}')


def mutation_value(configuration: str, webhook: str, mutated: bool) -> str:
    """kube's ``mutationAnnotationValue``."""
    return (f'{{"configuration":{_go_string(configuration)},"webhook":{_go_string(webhook)},'
            f'"mutated":{"true" if mutated else "false"}}}')


def record(attrs: Attributes, key: str, value: str, level: str) -> None:
    """kube's ``AddAnnotationWithLevel``: a Metadata annotation in every event, a higher one only in
    events at that level or above (the gateway's audit filter compares)."""
    attrs.add_annotation_with_level(key, value, level)
