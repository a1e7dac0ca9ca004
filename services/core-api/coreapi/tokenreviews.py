"""TokenReview (``authentication.k8s.io/v1``): is this bearer token valid, and whose is it?

Delegated authentication asks this (aggregated API servers, webhooks, kubelets). As kube's
``TokenREST``: ``spec.token`` is required (400 otherwise); the answer echoes the spec and says
``status.authenticated``, the user and the audiences, or ``status.error``. Nothing is stored.

The tokens core-api can check are service account tokens: it holds the signing key (so the
public key) and the ServiceAccounts; a token of the gateway's static ``--token-auth-file`` is not
known here and is answered unauthenticated.
"""

from __future__ import annotations

from typing import Any

from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery import serviceaccount as satoken
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.registry.fieldtracking import Writer
from genericapi.registry.strategy import Strategy
from genericapi.storage.etcd import EtcdClient

from .tokenrequest import TokenIssuer
from .virtual import VirtualStore, mapping

TOKEN_REVIEW = ResourceInfo("authentication.k8s.io", "v1", "TokenReview", "tokenreviews", "tokenreview", False,
                            verbs=("create",))


class TokenReviewStore(VirtualStore):
    def __init__(self, info: ResourceInfo, strategy: Strategy, client: EtcdClient, key_prefix: str,
                 accounts: Any, issuer: TokenIssuer | None) -> None:
        super().__init__(info, strategy, client, key_prefix)
        self._accounts = accounts
        self._issuer = issuer

    async def create(self, namespace: str, obj: dict[str, Any], dry_run: bool = False,
                     writer: Writer | None = None) -> dict[str, Any]:
        spec = mapping(obj.get("spec"))
        token = spec.get("token")
        if not isinstance(token, str) or not token:
            raise apierrors.bad_request("token is required for TokenReview in authentication")
        wanted = spec.get("audiences") or []
        if not isinstance(wanted, list) or not all(isinstance(a, str) for a in wanted):
            raise apierrors.bad_request("spec.audiences: must be a list of strings")
        status: dict[str, Any] = {"user": {}}
        out = {"kind": "TokenReview", "apiVersion": self.info.api_version,
               "metadata": {"creationTimestamp": None}, "spec": dict(spec), "status": status}
        if self._issuer is None:
            status["authenticated"] = False
            return out
        audiences = wanted or list(self._issuer.audiences)
        try:
            subject = satoken.verify(token, [self._issuer.key.public_key()], issuers=[self._issuer.issuer],
                                     audiences=audiences)
        except satoken.TokenError as err:
            status.update(authenticated=False, error=f"[invalid bearer token, {err}]")
            return out
        try:
            account = await self._accounts.get(subject.namespace, subject.name)
        except apierrors.APIError as err:
            if err.code != 404:
                raise
            account = None
        uid = str(account["metadata"].get("uid") or "") if account is not None else ""
        if uid != subject.uid:
            status.update(authenticated=False, error="[service account token has been invalidated]")
            return out
        status.update(authenticated=True, audiences=audiences, user={
            "username": satoken.username(subject.namespace, subject.name), "uid": subject.uid,
            "groups": [*satoken.groups_of(subject.namespace), "system:authenticated"]})
        return out
