"""Applying PATCH bodies: JSON patch (RFC 6902), merge patch (RFC 7386), strategic merge patch."""

from __future__ import annotations

from typing import Any

import jsonpatch
import orjson

from genericapi.apimachinery import deepjson, strategicpatch
from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery.strategicpatch_errors import StrategicMergePatchError
from genericapi.registry.strategy import Strategy

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH, "application/apply-patch+yaml")


def _unsupported(ctype: str) -> apierrors.APIError:
    return apierrors.APIError(
        415, "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: "
        f"{', '.join(PATCH_TYPES)}" + (f" (got {ctype})" if ctype else ""))


def _decode(raw: bytes) -> Any:
    try:
        return deepjson.loads(raw, max_depth=deepjson.MAX_DEPTH)
    except orjson.JSONDecodeError as err:
        raise apierrors.bad_request(f"error decoding patch: {err}") from None


def apply_patch(ctype: str, raw: bytes, original: dict[str, Any], strategy: Strategy | None) -> dict[str, Any]:
    """The object after applying the patch body of media type ``ctype``."""
    if ctype == JSON_PATCH:
        ops = _decode(raw)
        if not isinstance(ops, list):
            raise apierrors.bad_request(
                "json: cannot unmarshal object into Go value of type jsonpatch.Patch")
        try:
            result = jsonpatch.JsonPatch(ops).apply(original)
        except jsonpatch.JsonPatchTestFailed:
            # Word it as kube's JSON patch library does, without Python's value reprs.
            failed = _failing_test_path(ops, original)
            raise apierrors.APIError(422, "Invalid", "the server rejected our request due to an error in our "
                                     f"request: testing value {failed} failed: test failed") from None
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as err:
            raise apierrors.APIError(422, "Invalid", f"the server rejected our request due to an error "
                                     f"in our request: {err}") from None
        except (TypeError, KeyError, ValueError) as err:
            raise apierrors.bad_request(f"invalid JSON patch: {err}") from None
        if not isinstance(result, dict):
            raise apierrors.bad_request("the patch must produce an object")
        return result
    if ctype == MERGE_PATCH:
        doc = _decode(raw)
        if not isinstance(doc, dict):
            raise apierrors.bad_request("error decoding patch: the merge patch must be a JSON object")
        return strategicpatch.json_merge_patch(original, doc)
    if ctype == STRATEGIC_PATCH:
        doc = _decode(raw)
        if not isinstance(doc, dict):
            raise apierrors.bad_request("error decoding patch: the strategic merge patch must be a JSON object")
        schema = _patch_schema(strategy)
        if schema is None:
            raise apierrors.APIError(
                415, "UnsupportedMediaType",
                "strategic merge patch is not supported for this resource; use a JSON merge patch "
                "(application/merge-patch+json) or a JSON patch (application/json-patch+json)")
        try:
            return strategicpatch.strategic_merge_patch(original, doc, schema)
        except StrategicMergePatchError as err:
            raise err.to_api_error() from None
    raise _unsupported(ctype)


def _failing_test_path(ops: list[Any], original: dict[str, Any]) -> str:
    """The path of the ``test`` operation that failed (replayed op by op, on the error path only)."""
    doc: Any = original
    for op in ops:
        try:
            doc = jsonpatch.JsonPatch([op]).apply(doc)
        except jsonpatch.JsonPatchTestFailed:
            return str(op.get("path", "")) if isinstance(op, dict) else ""
    return ""


def _patch_schema(strategy: Strategy | None) -> Any:
    if strategy is None:
        # Subresource representations (Scale) have no merge keys: plain maps merge.
        return strategicpatch.PatchSchema.schemaless()
    if strategy.schemas is None:
        return None
    info = strategy.info
    return strategy.schemas.patch_schema(info.group, info.version, info.kind)
