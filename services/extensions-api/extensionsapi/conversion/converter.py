"""``CRConverter``: custom resources of one CRD converted between its versions.

As apiextensions-apiserver's delegating converter (``pkg/apiserver/conversion/converter.go``):
versions are checked against the CRD, objects already at the desired version are left alone,
strategy ``None`` rewrites ``apiVersion`` only, strategy ``Webhook`` sends the rest in one
ConversionReview and every converted object is checked (groupVersion, kind, name, namespace, uid)
and gets its original metadata back except labels and annotations. A failure is the error kube
returns for it: HTTP 500 with no reason and the Go error text as message
(``conversion for <group>/<version>, Kind=<Kind> failed: conversion webhook for /, Kind= failed: ...``;
kube converts one object at a time through an anonymous list, hence the empty inner GVK).
"""

from __future__ import annotations

import copy
import uuid
from typing import Any

from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery.serviceresolver import ServiceResolver

from . import review
from .review import ReviewError, gv_string, gvk_string
from .webhook import DEFAULT_TIMEOUT, WebhookClient

#: The inner GVK kube prints for the webhook call: it converts through a list with no apiVersion/kind.
_WEBHOOK_LIST_GVK = "/, Kind="


def _is_empty_object(obj: dict[str, Any]) -> bool:
    """Only apiVersion and kind (kube's cacher smoke test): converted without calling anyone."""
    return len(obj) == 2 and "apiVersion" in obj and "kind" in obj


class CRConverter:
    """Converts custom resources of one CRD between its versions (one instance per CRD generation)."""

    def __init__(self, crd: dict[str, Any], resolver: ServiceResolver | None = None, *,
                 client_cert: tuple[str, str] | None = None, timeout: float = DEFAULT_TIMEOUT) -> None:
        spec = crd.get("spec") or {}
        self.group = str(spec.get("group") or "")
        self.versions = frozenset(str(v.get("name")) for v in spec.get("versions") or [] if isinstance(v, dict))
        conversion = spec.get("conversion") or {}
        self.strategy = str(conversion.get("strategy") or "None")
        self._webhook: WebhookClient | None = None
        self._review_versions: list[Any] = []
        if self.strategy == "Webhook":
            webhook = conversion.get("webhook") or {}
            self._review_versions = list(webhook.get("conversionReviewVersions") or [])
            self._webhook = WebhookClient(webhook.get("clientConfig") or {}, resolver, client_cert, timeout)
        elif self.strategy != "None":
            name = (crd.get("metadata") or {}).get("name", "")
            raise ValueError(f'unknown conversion strategy "{self.strategy}" for CRD {name}')

    async def close(self) -> None:
        """Release the webhook connection pool (when the CRD changes or the server stops)."""
        if self._webhook is not None:
            await self._webhook.close()

    def _valid(self, api_version: str) -> bool:
        group, version = review.split_api_version(api_version)
        return group == self.group and version in self.versions

    def _check(self, objs: list[dict[str, Any]], desired: str) -> list[int]:
        """Version checks; the indexes of the objects that need converting."""
        if not self._valid(desired):
            raise apierrors.unknown_error(f"request to convert CR to an invalid group/version: {gv_string(desired)}")
        if len(objs) == 1 and not self._valid(str(objs[0].get("apiVersion") or "")):
            raise apierrors.unknown_error("request to convert CR from an invalid group/version: "
                                          f"{gv_string(str(objs[0].get('apiVersion') or ''))}")
        pending: list[int] = []
        for i, obj in enumerate(objs):
            api_version = str(obj.get("apiVersion") or "")
            if not self._valid(api_version):
                raise apierrors.unknown_error("request to convert CR list failed, list index "
                                              f"{i} has invalid group/version: {gv_string(api_version)}")
            if api_version != desired:
                pending.append(i)
        return pending

    def convert_none(self, objs: list[dict[str, Any]], to_version: str) -> list[dict[str, Any]]:
        """Strategy None (and the cases that need nobody): apiVersion rewritten, nothing else."""
        desired = f"{self.group}/{to_version}"
        pending = self._check(objs, desired)
        out = list(objs)
        for i in pending:
            out[i] = {**objs[i], "apiVersion": desired}
        return out

    async def convert(self, objs: list[dict[str, Any]], to_version: str) -> list[dict[str, Any]]:
        """``objs`` (any versions of this CRD) at ``to_version``; inputs are never mutated.

        Objects needing a webhook go in one ConversionReview. Raises APIError (500) as kube does.
        """
        if self._webhook is None:
            return self.convert_none(objs, to_version)
        desired = f"{self.group}/{to_version}"
        pending = self._check(objs, desired)
        if not pending:
            return list(objs)
        if len(objs) == 1 and _is_empty_object(objs[0]):
            return self.convert_none(objs, to_version)
        first = objs[pending[0]]
        source = gvk_string(str(first.get("apiVersion") or ""), str(first.get("kind") or ""))
        originals = [objs[i] for i in pending]
        try:
            converted = await self._call_webhook(originals, desired)
        except ReviewError as err:
            raise apierrors.unknown_error(f"conversion for {source} failed: {err}") from err
        if len(converted) != len(originals):
            raise apierrors.unknown_error(
                f"conversion for {source} returned {len(converted)} objects, expected {len(originals)}")
        out = list(objs)
        for n, (i, original, raw) in enumerate(zip(pending, originals, converted, strict=True), start=1):
            try:
                obj = review.as_object(raw)
            except ReviewError as err:
                raise apierrors.unknown_error(f"conversion for {source} failed: {err}") from err
            prefix = f"conversion for {source} returned invalid converted object at index {n}"
            got_gv = gv_string(str(obj.get("apiVersion") or ""))
            if got_gv != gv_string(desired):
                raise apierrors.unknown_error(
                    f"{prefix}: invalid groupVersion (expected {gv_string(desired)}, received {got_gv})")
            if obj.get("kind") != original.get("kind"):
                raise apierrors.unknown_error(
                    f"{prefix}: invalid kind (expected {original.get('kind', '')}, received {obj.get('kind', '')})")
            try:
                review.check_identity(original, obj)
            except ReviewError as err:
                raise apierrors.unknown_error(f"{prefix}: {err}") from err
            try:
                out[i] = review.restore_metadata(original, obj)
            except ReviewError as err:
                raise apierrors.unknown_error(
                    f"conversion for {source} returned invalid metadata in object at index {n}: {err}") from err
        return out

    async def _call_webhook(self, objects: list[dict[str, Any]], desired: str) -> list[Any]:
        assert self._webhook is not None
        version = review.review_version(self._review_versions)  # its error is not the webhook's
        uid = str(uuid.uuid4())
        # The webhook may answer with anything; the originals stay untouched for the checks.
        body = review.build_request(version, [copy.copy(o) for o in objects], desired, uid)
        try:
            answer = await self._webhook.post(body)
            return review.decode_response(version, uid, answer)
        except ReviewError as err:
            raise ReviewError(f"conversion webhook for {_WEBHOOK_LIST_GVK} failed: {err}") from err
