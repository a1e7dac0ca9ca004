"""``serviceaccounts/<name>/token``: TokenRequest, what ``kubectl create token`` asks for.

As kube's ``TokenREST``: the body's name and namespace, when given, must be the account's; the
account must exist (404 otherwise); audiences default to the API audiences; ``expirationSeconds``
defaults to an hour, may not be under ten minutes nor over 2^32 seconds, and is capped by
``--service-account-max-token-expiration``; a ``boundObjectRef`` (Pod or Secret) must name an
existing object with the same uid, and the token then dies with it. Nothing is stored: the answer
is the request with ``status.token`` (a JWT signed with the chain's service account key, see
``genericapi.apimachinery.serviceaccount``) and ``status.expirationTimestamp``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery import serviceaccount as satoken
from genericapi.apimachinery.errors import FieldError
from genericapi.registry.meta import now_rfc3339
from genericapi.registry.store import Store

KIND = "TokenRequest"
GROUP = "authentication.k8s.io"
DEFAULT_EXPIRATION = 3600
MIN_EXPIRATION = 600
MAX_EXPIRATION = 1 << 32
#: Objects a token may be bound to (kube's TokenRequest accepts v1 Pods and Secrets, and Nodes).
BOUND_KINDS = {"Pod": "pods", "Secret": "secrets"}


@dataclass(frozen=True)
class TokenIssuer:
    key: satoken.PrivateKey
    issuer: str
    audiences: list[str]
    max_expiration: int = 0


def _invalid(name: str, errs: list[FieldError]) -> apierrors.APIError:
    return apierrors.invalid_object(GROUP, KIND, name, errs)


def _validate(name: str, spec: dict[str, Any]) -> None:
    seconds = spec.get("expirationSeconds")
    path = "spec.expirationSeconds"
    if not isinstance(seconds, int) or isinstance(seconds, bool):
        raise _invalid(name, [apierrors.invalid(path, seconds, "must be a whole number of seconds")])
    if seconds < MIN_EXPIRATION:
        raise _invalid(name, [apierrors.invalid(path, seconds, "may not specify a duration less than 10 minutes")])
    if seconds > MAX_EXPIRATION:
        raise _invalid(name, [apierrors.invalid(path, seconds, "may not specify a duration larger than 2^32 seconds")])
    audiences = spec.get("audiences")
    if not isinstance(audiences, list) or not all(isinstance(a, str) for a in audiences):
        raise _invalid(name, [apierrors.invalid("spec.audiences", audiences, "must be a list of strings")])


async def _bound_object(stores: dict[str, Store], namespace: str, ref: Any) -> satoken.BoundObject | None:
    if ref is None:
        return None
    if not isinstance(ref, dict):
        raise apierrors.bad_request("spec.boundObjectRef: must be an object")
    kind, ref_name, ref_uid = ref.get("kind"), str(ref.get("name") or ""), str(ref.get("uid") or "")
    plural = BOUND_KINDS.get(str(kind))
    if plural is None or ref.get("apiVersion") not in ("v1", None):
        raise apierrors.bad_request(f'cannot bind token for object of type {ref.get("apiVersion")}, Kind={kind}')
    obj = await stores[plural].get(namespace, ref_name)
    uid = str(obj["metadata"].get("uid") or "")
    if ref_uid and ref_uid != uid:
        raise apierrors.APIError(409, "Conflict", f'Operation cannot be fulfilled on {str(kind).lower()} "{ref_name}": '
                                 f"the UID in the bound object reference ({ref_uid}) does not match the UID in "
                                 "record. The object might have been deleted and then recreated",
                                 {"name": ref_name, "kind": str(kind).lower()})
    return satoken.BoundObject(str(kind), ref_name, uid)


def install_token_request(accounts: Store, stores: dict[str, Store], issuer: TokenIssuer) -> None:
    """POST ``serviceaccounts/<name>/token`` on the ServiceAccount store."""

    async def create(namespace: str, name: str, obj: dict[str, Any], dry_run: bool) -> tuple[int, dict[str, Any]]:
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        assert isinstance(meta, dict)
        if meta.get("name") and meta["name"] != name:
            raise _invalid(name, [apierrors.invalid("metadata.name", meta["name"],
                                                    "must match the service account name if specified")])
        if meta.get("namespace") and meta["namespace"] != namespace:
            raise _invalid(name, [apierrors.invalid("metadata.namespace", meta["namespace"],
                                                    "must match the service account namespace if specified")])
        account = await accounts.get(namespace, name)
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        assert isinstance(spec, dict)
        spec = {"audiences": spec.get("audiences") or list(issuer.audiences),
                # kube defaults a missing or null expirationSeconds (kubectl 1.27 sends null)
                "expirationSeconds": DEFAULT_EXPIRATION if spec.get("expirationSeconds") is None
                else spec["expirationSeconds"],
                "boundObjectRef": spec.get("boundObjectRef")}
        _validate(name, spec)
        bound = await _bound_object(stores, namespace, spec["boundObjectRef"])
        if issuer.max_expiration and spec["expirationSeconds"] > issuer.max_expiration:
            spec["expirationSeconds"] = issuer.max_expiration
        now = int(time.time())
        out = {"kind": KIND, "apiVersion": f"{GROUP}/v1",
               "metadata": {"name": name, "namespace": namespace, "creationTimestamp": now_rfc3339()},
               "spec": spec, "status": {"token": "", "expirationTimestamp": None}}
        if dry_run:
            return 201, out
        token, expires = satoken.issue(issuer.key, issuer=issuer.issuer, audiences=spec["audiences"],
                                       namespace=namespace, name=name, uid=str(account["metadata"]["uid"]),
                                       now=now, expiration_seconds=spec["expirationSeconds"], bound=bound)
        out["status"] = {"token": token,
                         "expirationTimestamp": datetime.fromtimestamp(expires, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
        return 201, out

    accounts.subresource_creators["token"] = create
