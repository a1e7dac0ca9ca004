"""The tokens controller: fills ``kubernetes.io/service-account-token`` Secrets, as
kube-controller-manager's TokensController (``--service-account-private-key-file``).

A Secret of that type names its account in the ``kubernetes.io/service-account.name``
annotation (validation requires it). The controller writes ``token`` (a legacy JWT, see
``genericapi.apimachinery.legacytoken``), ``namespace`` and ``ca.crt`` (the cluster CA) into it
and records the account's uid in ``kubernetes.io/service-account.uid``. A Secret whose account
does not exist, or exists under another uid, is deleted; so are an account's token Secrets when
the account is deleted. A token already there is kept (only ``namespace`` and ``ca.crt`` are put
back if they differ): the token must stay what its holders were given. When a token Secret goes,
the account's ``secrets`` list stops naming it. kube 1.24+ generates no Secrets on its own.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Hashable
from typing import Any

from genericapi.apimachinery import legacytoken
from genericapi.apimachinery import serviceaccount as satoken
from genericapi.apimachinery.errors import APIError
from genericapi.controllers import ClientSet, Controller, Informer

SECRET_TYPE = "kubernetes.io/service-account-token"
NAME_ANNOTATION = "kubernetes.io/service-account.name"
UID_ANNOTATION = "kubernetes.io/service-account.uid"


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _annotations(obj: dict[str, Any]) -> dict[str, Any]:
    annotations = _meta(obj).get("annotations")
    return annotations if isinstance(annotations, dict) else {}


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def token_of(secret: dict[str, Any], account: dict[str, Any]) -> bool:
    """kube's ``IsServiceAccountToken``: the Secret names this account (and, if it says, its uid)."""
    annotations = _annotations(secret)
    if annotations.get(NAME_ANNOTATION) != _meta(account).get("name"):
        return False
    uid = annotations.get(UID_ANNOTATION)
    return not uid or uid == _meta(account).get("uid")


class TokensController(Controller):
    name = "serviceaccount-token"

    def __init__(self, clients: ClientSet, key: satoken.PrivateKey, root_ca: str = "") -> None:
        super().__init__()
        self.key = key
        self.root_ca = root_ca
        self.sa_client = clients.client("", "serviceaccounts")
        self.secret_client = clients.client("", "secrets")
        self.accounts = Informer(self.sa_client)
        self.secrets = Informer(self.secret_client)
        self.informers += [self.accounts, self.secrets]
        self.accounts.add_handler(self._account_event)
        self.secrets.add_handler(self._secret_event)

    def _account_event(self, etype: str, obj: dict[str, Any], _old: dict[str, Any] | None) -> None:
        if etype == "DELETED":
            meta = _meta(obj)
            self.queue.add(("account", meta.get("namespace") or "", meta.get("name") or "", meta.get("uid") or ""))

    def _secret_event(self, etype: str, obj: dict[str, Any], _old: dict[str, Any] | None) -> None:
        if obj.get("type") == SECRET_TYPE:
            meta = _meta(obj)
            if etype == "DELETED":
                self.queue.add(("removed", meta.get("namespace") or "", meta.get("name") or "",
                                str(_annotations(obj).get(NAME_ANNOTATION) or "")))
            else:
                self.queue.add(("secret", meta.get("namespace") or "", meta.get("name") or ""))

    async def on_synced(self) -> None:
        for secret in self.secrets.items():
            self._secret_event("ADDED", secret, None)

    async def reconcile(self, key: Hashable) -> None:
        assert isinstance(key, tuple)
        if key[0] == "account":
            await self._account_deleted(*key[1:])
        elif key[0] == "removed":
            await self._remove_reference(*key[1:])
        else:
            await self._sync_secret(key[1], key[2])

    async def _account_deleted(self, namespace: str, name: str, uid: str) -> None:
        """The account's token Secrets go with it."""
        gone = {"metadata": {"name": name, "uid": uid}}
        for secret in self.secrets.items():
            meta = _meta(secret)
            if meta.get("namespace") == namespace and secret.get("type") == SECRET_TYPE and token_of(secret, gone):
                await self._delete(secret)

    async def _delete(self, secret: dict[str, Any]) -> None:
        meta = _meta(secret)
        try:
            await self.secret_client.delete(meta.get("namespace") or "", meta.get("name") or "", uid=meta.get("uid"))
        except APIError as err:
            if err.code not in (404, 409):  # gone already, or replaced by a new Secret of that name
                raise

    async def _account(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The account, from the cache or (a new one the cache has not seen yet) a live read."""
        account = self.accounts.get(namespace, name)
        if account is not None:
            return account
        try:
            return await self.sa_client.get(namespace, name)
        except APIError as err:
            if err.code == 404:
                return None
            raise

    async def _sync_secret(self, namespace: str, name: str) -> None:
        secret = self.secrets.get(namespace, name)
        if secret is None or secret.get("type") != SECRET_TYPE or _meta(secret).get("deletionTimestamp"):
            return
        account_name = str(_annotations(secret).get(NAME_ANNOTATION) or "")
        account = await self._account(namespace, account_name) if account_name else None
        if account is None or not token_of(secret, account):
            await self._delete(secret)  # kube: a token for an account that is not there is removed
            return
        data = secret.get("data") if isinstance(secret.get("data"), dict) else {}
        assert isinstance(data, dict)
        wanted = {"namespace": _b64(namespace)}
        if self.root_ca:
            wanted["ca.crt"] = _b64(self.root_ca)
        if not data.get("token"):
            uid = str(_meta(account).get("uid") or "")
            wanted["token"] = _b64(legacytoken.issue(self.key, namespace=namespace, name=account_name, uid=uid,
                                                     secret_name=name))
        annotations = _annotations(secret)
        uid = str(_meta(account).get("uid") or "")
        if all(data.get(k) == v for k, v in wanted.items()) and annotations.get(UID_ANNOTATION) == uid:
            return
        fixed = copy.deepcopy(secret)  # cached objects are shared: change a copy
        fixed["data"] = {**(fixed.get("data") or {}), **wanted}
        fixed["metadata"]["annotations"] = {**annotations, NAME_ANNOTATION: account_name, UID_ANNOTATION: uid}
        try:
            await self.secret_client.update(namespace, name, fixed)  # 409 on a stale copy: retried
        except APIError as err:
            if err.code != 404:
                raise

    async def _remove_reference(self, namespace: str, name: str, account_name: str) -> None:
        """A deleted token Secret no longer appears in its account's ``secrets``."""
        account = self.accounts.get(namespace, account_name) if account_name else None
        if account is None:
            return
        refs = account.get("secrets") or []
        kept = [r for r in refs if not (isinstance(r, dict) and r.get("name") == name)]
        if len(kept) == len(refs):
            return
        fixed = copy.deepcopy(account)
        fixed["secrets"] = kept
        try:
            await self.sa_client.update(namespace, account_name, fixed)
        except APIError as err:
            if err.code != 404:
                raise
