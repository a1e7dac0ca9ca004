"""``HTTPClient``: a controller's client for a resource served behind the delegate link.

Custom resources (extensions-api) are not in core-api's stores; a controller reaches them with
the same ``ResourceClient`` verbs over HTTP, through ``Transport``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

from genericapi.apimachinery import errors as apierrors

from .transport import Transport
from .types import APIResource, Patch, WatchEvent

#: Watches end after this long and are resumed, so a silently dead connection cannot last.
WATCH_TIMEOUT_SECONDS = 300

_PATCH_TYPES = {"merge": "application/merge-patch+json", "json": "application/json-patch+json"}


class HTTPClient:
    """``ResourceClient`` over HTTP to the delegate link."""

    def __init__(self, transport: Transport, resource: APIResource) -> None:
        self.transport = transport
        self.resource = resource

    def _path(self, namespace: str = "", name: str = "", subresource: str = "") -> str:
        r = self.resource
        path = f"/apis/{r.group}/{r.version}" if r.group else f"/api/{r.version}"
        if r.namespaced and namespace:
            path += f"/namespaces/{quote(namespace, safe='')}"
        path += f"/{r.plural}"
        if name:
            path += f"/{quote(name, safe='')}"
        if subresource:
            path += f"/{subresource}"
        return path

    async def list(self, namespace: str = "", *, label_selector: str = "", field_selector: str = "",
                   limit: int = 0, continue_token: str = "") -> tuple[list[dict[str, Any]], str, str]:
        params: dict[str, str] = {}
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        if limit:
            params["limit"] = str(limit)
        if continue_token:
            params["continue"] = continue_token
        _s, _t, doc = await self.transport.request("GET", self._path(namespace), params=params)
        if not isinstance(doc, dict):
            raise apierrors.internal_error("the delegate's list is not an object")
        meta = doc.get("metadata") or {}
        items = doc.get("items") or []
        r = self.resource
        for item in items:  # list items may omit kind and apiVersion
            item.setdefault("kind", r.kind)
            item.setdefault("apiVersion", r.api_version)
        return items, str(meta.get("resourceVersion") or ""), str(meta.get("continue") or "")

    def watch(self, resource_version: str, namespace: str = "", *,
              field_selector: str = "") -> AsyncIterator[WatchEvent]:
        return self._watch(resource_version, namespace, field_selector)

    async def _watch(self, resource_version: str, namespace: str,
                     field_selector: str = "") -> AsyncIterator[WatchEvent]:
        params = {"watch": "1", "allowWatchBookmarks": "true", "timeoutSeconds": str(WATCH_TIMEOUT_SECONDS)}
        if resource_version:
            params["resourceVersion"] = resource_version
        if field_selector:
            params["fieldSelector"] = field_selector
        async for line in self.transport.stream_lines(self._path(namespace), params):
            etype = str(line.get("type") or "")
            obj = line.get("object")
            if not isinstance(obj, dict):
                continue
            if etype == "ERROR":
                code = obj.get("code")
                raise apierrors.APIError(int(code) if isinstance(code, int) else 500,
                                         str(obj.get("reason") or ""), str(obj.get("message") or ""),
                                         obj.get("details"))
            yield WatchEvent(etype, obj)

    async def get(self, namespace: str, name: str) -> dict[str, Any]:
        _s, _t, doc = await self.transport.request("GET", self._path(namespace, name))
        return dict(doc)

    async def create(self, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
        _s, _t, doc = await self.transport.request("POST", self._path(namespace), body=obj)
        return dict(doc)

    async def update(self, namespace: str, name: str, obj: dict[str, Any], *,
                     subresource: str = "") -> dict[str, Any]:
        _s, _t, doc = await self.transport.request("PUT", self._path(namespace, name, subresource), body=obj)
        return dict(doc)

    async def patch(self, namespace: str, name: str, patch: Patch, *,
                    patch_type: str = "merge", subresource: str = "") -> dict[str, Any]:
        ctype = _PATCH_TYPES.get(patch_type)
        if ctype is None:
            raise apierrors.bad_request(f"unsupported patch type {patch_type!r} (merge or json)")
        _s, _t, doc = await self.transport.request("PATCH", self._path(namespace, name, subresource),
                                                   body=patch, content_type=ctype)
        return dict(doc)

    async def apply(self, namespace: str, name: str, config: dict[str, Any], *, field_manager: str,
                    force: bool = False, subresource: str = "") -> dict[str, Any]:
        params = {"fieldManager": field_manager, **({"force": "true"} if force else {})}
        _s, _t, doc = await self.transport.request("PATCH", self._path(namespace, name, subresource), params=params,
                                                   body=config, content_type="application/apply-patch+yaml")
        return dict(doc)

    async def delete(self, namespace: str, name: str, *, propagation_policy: str | None = None,
                     uid: str | None = None, resource_version: str | None = None,
                     grace_period_seconds: int | None = None) -> dict[str, Any] | None:
        """The object while it waits for finalizers; None when it is gone."""
        opts: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation_policy is not None:
            opts["propagationPolicy"] = propagation_policy
        if grace_period_seconds is not None:
            opts["gracePeriodSeconds"] = grace_period_seconds
        pre: dict[str, str] = {}
        if uid is not None:
            pre["uid"] = uid
        if resource_version is not None:
            pre["resourceVersion"] = resource_version
        if pre:
            opts["preconditions"] = pre
        status, _t, doc = await self.transport.request("DELETE", self._path(namespace, name), body=opts)
        if status == 202 and isinstance(doc, dict) and doc.get("kind") != "Status":
            return doc
        return None

    async def delete_collection(self, namespace: str) -> None:
        await self.transport.request("DELETE", self._path(namespace))
