"""``AuthorizingClient``: a controller's client that asks the authorizer before every verb.

kube-controller-manager (``--use-service-account-credentials``) calls the API server as each
controller's service account, and the API server authorizes every call. kubechain's controllers
reach their stores directly (``LocalClient``) or the delegate link (``HTTPClient``), and neither
path passes the gateway's authorizer, so this wrapper asks core-api's authorizer (the one the
access reviews use) with the attributes the request would have had, and answers kube's 403 when
it does not allow. Reads done by informers (``list``/``watch``) are authorized as the identity of
kube's shared informers, ``system:kube-controller-manager`` (see ``Informer``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from genericapi.apimachinery.authorization import Attributes, Authorizer, Decision, forbidden
from genericapi.apimachinery.user import UserInfo

from .types import APIResource, Patch, ResourceClient, WatchEvent


class AuthorizingClient:
    """``ResourceClient`` over ``inner`` (which acts as ``user``), each call authorized first."""

    def __init__(self, inner: ResourceClient, user: UserInfo, authorizer: Authorizer,
                 shared: ResourceClient | None = None) -> None:
        self.inner = inner
        self.resource: APIResource = inner.resource
        self.user = user
        self.authorizer = authorizer
        #: The same resource as the shared informers' identity (``Informer`` reads through it).
        self.shared = shared

    async def _authorize(self, verb: str, namespace: str = "", name: str = "", subresource: str = "") -> None:
        r = self.resource
        attrs = Attributes(self.user, verb, True, namespace if r.namespaced else "", r.group, r.version,
                           r.plural, subresource, name)
        decision, reason = await self.authorizer.authorize(attrs)
        if decision is not Decision.ALLOW:
            raise forbidden(attrs, reason)  # the controller logs it and retries, as kube's do

    async def list(self, namespace: str = "", *, label_selector: str = "", field_selector: str = "",
                   limit: int = 0, continue_token: str = "") -> tuple[list[dict[str, Any]], str, str]:
        await self._authorize("list", namespace)
        return await self.inner.list(namespace, label_selector=label_selector, field_selector=field_selector,
                                     limit=limit, continue_token=continue_token)

    def watch(self, resource_version: str, namespace: str = "", *,
              field_selector: str = "") -> AsyncIterator[WatchEvent]:
        return self._watch(resource_version, namespace, field_selector)

    async def _watch(self, resource_version: str, namespace: str,
                     field_selector: str = "") -> AsyncIterator[WatchEvent]:
        await self._authorize("watch", namespace)
        inner = (self.inner.watch(resource_version, namespace, field_selector=field_selector) if field_selector
                 else self.inner.watch(resource_version, namespace))
        async for event in inner:
            yield event

    async def get(self, namespace: str, name: str) -> dict[str, Any]:
        await self._authorize("get", namespace, name)
        return await self.inner.get(namespace, name)

    async def create(self, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
        await self._authorize("create", namespace)  # kube's RequestInfo of a POST names no object
        return await self.inner.create(namespace, obj)

    async def update(self, namespace: str, name: str, obj: dict[str, Any], *,
                     subresource: str = "") -> dict[str, Any]:
        await self._authorize("update", namespace, name, subresource)
        return await self.inner.update(namespace, name, obj, subresource=subresource)

    async def patch(self, namespace: str, name: str, patch: Patch, *,
                    patch_type: str = "merge", subresource: str = "") -> dict[str, Any]:
        await self._authorize("patch", namespace, name, subresource)
        return await self.inner.patch(namespace, name, patch, patch_type=patch_type, subresource=subresource)

    async def apply(self, namespace: str, name: str, config: dict[str, Any], *, field_manager: str,
                    force: bool = False, subresource: str = "") -> dict[str, Any]:
        await self._authorize("patch", namespace, name, subresource)  # server-side apply is a PATCH
        return await self.inner.apply(namespace, name, config, field_manager=field_manager, force=force,
                                      subresource=subresource)

    async def delete(self, namespace: str, name: str, *, propagation_policy: str | None = None,
                     uid: str | None = None, resource_version: str | None = None,
                     grace_period_seconds: int | None = None) -> dict[str, Any] | None:
        await self._authorize("delete", namespace, name)
        return await self.inner.delete(namespace, name, propagation_policy=propagation_policy, uid=uid,
                                       resource_version=resource_version,
                                       grace_period_seconds=grace_period_seconds)

    async def delete_collection(self, namespace: str) -> None:
        await self._authorize("deletecollection", namespace)
        await self.inner.delete_collection(namespace)
