"""The ServiceAccount admission plugin (kube-apiserver's ``ServiceAccount``, enabled by default).

On Pod CREATE (the pod itself, never a subresource) it gives a pod that names no account the
namespace's ``default`` one, refuses a pod whose account does not exist (403), mounts the account's
API credentials as the ``kube-api-access-*`` projected volume at the well-known path in every
container lacking a mount there (unless automounting is turned off, the pod's choice winning over
the account's), copies the account's imagePullSecrets into a pod that lists none, and, when the
account carries the enforce-mountable-secrets annotation, refuses secret references the account
does not list. Mirror pods are only checked: they may name no account, reference no secret and
project no token.

Accounts are read from the ServiceAccount store's watch cache first, as kube reads its informer;
on a miss the store is asked directly, several times for ``default`` because the serviceaccounts
controller creates it just after its namespace. Admission runs before defaulting here, so the
deprecated ``serviceAccount`` alias is honoured as v1 conversion would have done, and the volume is
built complete (kube builds it complete too).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from genericapi.apimachinery import admission as adm
from genericapi.apimachinery import errors as apierrors
from genericapi.registry.meta import generate_name
from genericapi.registry.store import Store

from .admission_priority import admission_name

PODS = ("", "pods")
DEFAULT_SERVICE_ACCOUNT = "default"
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
ENFORCE_MOUNTABLE_SECRETS = "kubernetes.io/enforce-mountable-secrets"
VOLUME_PREFIX = "kube-api-access-"
TOKEN_MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
#: kube's WarnOnlyBoundTokenExpirationSeconds: an hour and seven seconds, so the kubelet's tokens
#: are recognisable as auto-mounted ones.
TOKEN_EXPIRATION_SECONDS = 3607
#: 0644, set explicitly as kube does.
PROJECTED_DEFAULT_MODE = 420
ROOT_CA_CONFIGMAP = "kube-root-ca.crt"
#: Lookups of the ``default`` account when it is missing (the controller may not have made it yet).
DEFAULT_ACCOUNT_ATTEMPTS = 10
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
#: Volume sources whose ``secretRef`` names a secret.
_SECRET_REF_SOURCES = ("cephfs", "cinder", "flexVolume", "rbd", "scaleIO", "iscsi", "storageos")

Sleep = Callable[[float], Awaitable[None]]


def token_volume_source() -> dict[str, Any]:
    """The projected volume source of the auto-mounted API credentials."""
    return {
        "defaultMode": PROJECTED_DEFAULT_MODE,
        "sources": [
            {"serviceAccountToken": {"expirationSeconds": TOKEN_EXPIRATION_SECONDS, "path": "token"}},
            {"configMap": {"name": ROOT_CA_CONFIGMAP, "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace",
                                        "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
        ],
    }


def _dicts(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, list):
        yield from (item for item in value if isinstance(item, dict))


def _dict(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def parse_bool(value: Any) -> bool:
    """Go's strconv.ParseBool, anything unparsable being false."""
    return value in ("1", "t", "T", "TRUE", "true", "True")


def should_automount(account: dict[str, Any], spec: dict[str, Any]) -> bool:
    """The pod's automountServiceAccountToken, else the account's, else true."""
    for choice in (spec.get("automountServiceAccountToken"), account.get("automountServiceAccountToken")):
        if isinstance(choice, bool):
            return choice
    return True


def mount_token(spec: dict[str, Any], generate: Callable[[str], str] = generate_name) -> None:
    """Mount the API credentials volume in every init and regular container lacking a mount at the
    token path; add the volume unless one named ``kube-api-access-*`` is there already."""
    existing = next((v["name"] for v in _dicts(spec.get("volumes"))
                     if isinstance(v.get("name"), str) and v["name"].startswith(VOLUME_PREFIX)), "")
    name = existing or generate(VOLUME_PREFIX)
    needed = False
    for key in ("initContainers", "containers"):
        for container in _dicts(spec.get(key)):
            mounts = container.get("volumeMounts")
            if mounts is None:
                mounts = container["volumeMounts"] = []
            elif not isinstance(mounts, list):
                continue  # malformed: left for validation to report
            if any(m.get("mountPath") == TOKEN_MOUNT_PATH for m in _dicts(mounts)):
                continue
            mounts.append({"name": name, "readOnly": True, "mountPath": TOKEN_MOUNT_PATH})
            needed = True
    if needed and not existing:
        volumes = spec.get("volumes")
        if not isinstance(volumes, list):
            volumes = spec["volumes"] = []
        volumes.append({"name": name, "projected": token_volume_source()})


def copy_pull_secrets(spec: dict[str, Any], account: dict[str, Any]) -> None:
    """A pod that lists no imagePullSecrets gets the account's (names only)."""
    if spec.get("imagePullSecrets"):
        return
    names = [{"name": ref.get("name", "")} for ref in _dicts(account.get("imagePullSecrets"))]
    if names:
        spec["imagePullSecrets"] = names


def _container_secret_refs(container: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    """(kind, env var name, secret name) of each secret an ``env`` or ``envFrom`` entry reads."""
    for env in _dicts(container.get("env")):
        ref = _dict((_dict(env.get("valueFrom")) or {}).get("secretKeyRef"))
        if ref is not None:
            yield "env", str(env.get("name", "")), str(ref.get("name", ""))
    for env_from in _dicts(container.get("envFrom")):
        ref = _dict(env_from.get("secretRef"))
        if ref is not None:
            yield "envFrom", "", str(ref.get("name", ""))


def pod_secret_names(spec: dict[str, Any]) -> list[str]:
    """Every secret the pod references (kube's VisitPodSecretNames over all containers)."""
    names = [str(ref.get("name", "")) for ref in _dicts(spec.get("imagePullSecrets"))]
    for key in CONTAINER_LISTS:
        for container in _dicts(spec.get(key)):
            names.extend(secret for _kind, _env, secret in _container_secret_refs(container))
    for volume in _dicts(spec.get("volumes")):
        azure, secret, csi = _dict(volume.get("azureFile")), _dict(volume.get("secret")), _dict(volume.get("csi"))
        if azure is not None and azure.get("secretName"):
            names.append(str(azure["secretName"]))
        if secret is not None:
            names.append(str(secret.get("secretName", "")))
        if csi is not None and _dict(csi.get("nodePublishSecretRef")) is not None:
            names.append(str(csi["nodePublishSecretRef"].get("name", "")))
        for key in _SECRET_REF_SOURCES:
            ref = _dict((_dict(volume.get(key)) or {}).get("secretRef"))
            if ref is not None:
                names.append(str(ref.get("name", "")))
        for source in _dicts((_dict(volume.get("projected")) or {}).get("sources")):
            if _dict(source.get("secret")) is not None:
                names.append(str(source["secret"].get("name", "")))
    return names


def mirror_pod_violation(spec: dict[str, Any]) -> str:
    """Why a mirror pod may not be created, or ""."""
    if spec.get("serviceAccountName") or spec.get("serviceAccount"):
        return "a mirror pod may not reference service accounts"
    if pod_secret_names(spec):
        return "a mirror pod may not reference secrets"
    for volume in _dicts(spec.get("volumes")):
        for source in _dicts((_dict(volume.get("projected")) or {}).get("sources")):
            if source.get("serviceAccountToken") is not None:
                return "a mirror pod may not use ServiceAccountToken volume projections"
    return ""


def enforces_mountable_secrets(account: dict[str, Any]) -> bool:
    annotations = _dict((_dict(account.get("metadata")) or {}).get("annotations")) or {}
    return parse_bool(annotations.get(ENFORCE_MOUNTABLE_SECRETS))


def secret_reference_violation(spec: dict[str, Any], account: dict[str, Any]) -> str:
    """The first secret reference the account does not allow, as kube words it, or ""."""
    sa = str((_dict(account.get("metadata")) or {}).get("name", ""))
    mountable = {str(ref.get("name", "")) for ref in _dicts(account.get("secrets"))}
    for volume in _dicts(spec.get("volumes")):
        secret = _dict(volume.get("secret"))
        if secret is not None and str(secret.get("secretName", "")) not in mountable:
            return (f'volume with secret.secretName="{secret.get("secretName", "")}" is not allowed because '
                    f"service account {sa} does not reference that secret")
    for key, what in (("initContainers", "init container"), ("containers", "container")):
        for container in _dicts(spec.get(key)):
            for kind, env, secret_name in _container_secret_refs(container):
                if secret_name in mountable:
                    continue
                via = f"envVar {env}" if kind == "env" else "envFrom"
                return (f'{what} {container.get("name", "")} with {via} referencing secret.secretName="{secret_name}" '
                        f"is not allowed because service account {sa} does not reference that secret")
    pullable = {str(ref.get("name", "")) for ref in _dicts(account.get("imagePullSecrets"))}
    for i, ref in enumerate(_dicts(spec.get("imagePullSecrets"))):
        if str(ref.get("name", "")) not in pullable:
            return (f'imagePullSecrets[{i}].name="{ref.get("name", "")}" is not allowed because service account '
                    f"{sa} does not reference that imagePullSecret")
    return ""


class ServiceAccount:
    """The admission hook; ``accounts`` is core-api's ServiceAccount store."""

    def __init__(self, accounts: Store, generate: Callable[[str], str] = generate_name,
                 sleep: Sleep = asyncio.sleep, pause: Callable[[], float] | None = None) -> None:
        self.accounts = accounts
        self.generate = generate
        self.sleep = sleep
        #: The pause between lookups of a missing ``default`` account: 100-200 ms, drawn per request.
        self.pause = pause or (lambda: random.uniform(0.1, 0.2))

    def handles(self, operation: str) -> bool:
        return operation == adm.CREATE

    def applies_to(self, group: str, resource: str, subresource: str) -> bool:
        """Pods only (their main resource): the admission chain skips this plugin for anything else."""
        return (group, resource) == PODS and not subresource

    async def admit(self, attrs: adm.Attributes) -> None:
        obj, namespace = attrs.obj, attrs.namespace
        if obj is None or attrs.subresource or (attrs.group, attrs.resource) != PODS:
            return
        spec = obj.get("spec")
        meta = obj.get("metadata")
        if not isinstance(spec, dict) or not isinstance(meta, dict):
            return  # validation reports it
        if not isinstance(spec.get("serviceAccountName") or "", str) or \
                not isinstance(spec.get("serviceAccount") or "", str):
            return  # validation reports it
        annotations = meta.get("annotations")
        if isinstance(annotations, dict) and MIRROR_POD_ANNOTATION in annotations:
            why = mirror_pod_violation(spec)
            if why:
                raise apierrors.forbidden_error(*PODS, admission_name(obj), why)
            return
        name = spec.get("serviceAccountName") or spec.get("serviceAccount") or DEFAULT_SERVICE_ACCOUNT
        spec["serviceAccountName"] = name
        account = await self.lookup(namespace, name, obj)
        if should_automount(account, spec):
            mount_token(spec, self.generate)
        copy_pull_secrets(spec, account)
        if enforces_mountable_secrets(account):
            why = secret_reference_violation(spec, account)
            if why:
                raise apierrors.forbidden_error(*PODS, admission_name(obj), why)

    async def lookup(self, namespace: str, name: str, pod: dict[str, Any]) -> dict[str, Any]:
        """The account from the watch cache, else from the store (retried for ``default``); a missing
        one, or a failed read, forbids the pod."""
        if self.accounts.cache.ready:
            cached = self.accounts.cache.get(self.accounts.key(namespace, name))
            if cached is not None:
                return cached.obj
        attempts = DEFAULT_ACCOUNT_ATTEMPTS if name == DEFAULT_SERVICE_ACCOUNT else 1
        pause = self.pause()
        cause = f'serviceaccount "{name}" not found'
        for attempt in range(attempts):
            if attempt:
                await self.sleep(pause)
            try:
                return await self.accounts.get(namespace, name)
            except apierrors.APIError as err:
                if err.code != 404:
                    cause = err.message
                    break
        raise apierrors.forbidden_error(*PODS, admission_name(pod),
                                        f"error looking up service account {namespace}/{name}: {cause}")
