"""The ServiceAccount admission hook: the default account, kube's Forbidden messages for missing
accounts and mirror pods, the kube-api-access projected volume and its mounts, automount choices,
imagePullSecrets and the enforce-mountable-secrets rules."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from coreapi import defaults
from coreapi.admission_serviceaccount import (
    TOKEN_MOUNT_PATH,
    ServiceAccount,
    mirror_pod_violation,
    mount_token,
    parse_bool,
    pod_secret_names,
    secret_reference_violation,
    token_volume_source,
)
from genericapi.apimachinery.errors import APIError
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.registry.meta import _ALPHANUMS
from support.admission import run_admit

PODS = ResourceInfo("", "v1", "Pod", "pods", "pod", namespaced=True)
ACCOUNTS = ResourceInfo("", "v1", "ServiceAccount", "serviceaccounts", "serviceaccount", namespaced=True)
PATH = TOKEN_MOUNT_PATH


class Cached:
    def __init__(self, obj: dict[str, Any]) -> None:
        self.obj = obj


class FakeCache:
    def __init__(self, ready: bool, objects: dict[bytes, dict[str, Any]]) -> None:
        self.ready = ready
        self.objects = objects

    def get(self, key: bytes) -> Cached | None:
        obj = self.objects.get(key)
        return Cached(obj) if obj is not None else None


class FakeStore:
    """Accounts in the watch cache (``cached``) and in etcd (``stored``, read by ``get``)."""

    def __init__(self, info: ResourceInfo, cached: list[dict[str, Any]] | None = None,
                 stored: list[dict[str, Any]] | None = None, ready: bool = True,
                 appear_after: int = 0, error: APIError | None = None) -> None:
        self.info = info
        self.cache = FakeCache(ready, {self.key("ns", o["metadata"]["name"]): o for o in cached or []})
        self.stored = {o["metadata"]["name"]: o for o in stored or []}
        self.gets: list[str] = []
        self.appear_after = appear_after  # the stored accounts show up on this get (0: at once)
        self.error = error

    def key(self, namespace: str, name: str) -> bytes:
        return f"/{namespace}/{name}".encode()

    async def get(self, _namespace: str, name: str) -> dict[str, Any]:
        self.gets.append(name)
        if self.error is not None:
            raise self.error
        if name not in self.stored or len(self.gets) <= self.appear_after:
            raise APIError(404, "NotFound", f'serviceaccounts "{name}" not found')
        return copy.deepcopy(self.stored[name])


def sa(name: str = "default", **fields: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns"}
    if "annotations" in fields:
        meta["annotations"] = fields.pop("annotations")
    return {"metadata": meta, **fields}


def pod(name: str = "p", annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"metadata": meta, "spec": {"containers": [{"name": "c", "image": "nginx"}], **spec}}


class Harness:
    def __init__(self, store: FakeStore) -> None:
        self.sleeps: list[float] = []
        self.names = iter(["kube-api-access-abcde", "kube-api-access-fghjk"])

        async def sleep(seconds: float) -> None:
            self.sleeps.append(seconds)

        self.hook = ServiceAccount(store, generate=lambda prefix: next(self.names), sleep=sleep,  # type: ignore[arg-type]
                                   pause=lambda: 0.15)

    async def admit(self, obj: dict[str, Any], operation: str = "CREATE", info: ResourceInfo = PODS) -> None:
        await run_admit(self.hook, operation, info, "ns", obj)


async def forbidden(h: Harness, obj: dict[str, Any]) -> APIError:
    with pytest.raises(APIError) as err:
        await h.admit(obj)
    assert err.value.code == 403 and err.value.reason == "Forbidden"
    return err.value


async def test_default_account_volume_and_mounts() -> None:
    h = Harness(FakeStore(ACCOUNTS, cached=[sa()]))
    p = pod(initContainers=[{"name": "i", "image": "busybox"}])
    await h.admit(p)
    spec = p["spec"]
    assert spec["serviceAccountName"] == "default"
    assert spec["volumes"] == [{"name": "kube-api-access-abcde", "projected": token_volume_source()}]
    mount = {"name": "kube-api-access-abcde", "readOnly": True, "mountPath": PATH}
    assert spec["containers"][0]["volumeMounts"] == [mount]
    assert spec["initContainers"][0]["volumeMounts"] == [mount]
    assert "imagePullSecrets" not in spec


def test_volume_is_kubes_and_survives_defaulting() -> None:
    source = token_volume_source()
    assert source["defaultMode"] == 420
    assert source["sources"][0] == {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}
    assert source["sources"][1] == {"configMap": {"name": "kube-root-ca.crt",
                                                  "items": [{"key": "ca.crt", "path": "ca.crt"}]}}
    assert source["sources"][2]["downwardAPI"]["items"][0]["fieldRef"] == {"apiVersion": "v1",
                                                                            "fieldPath": "metadata.namespace"}
    p = pod()
    mount_token(p["spec"])
    before = copy.deepcopy(p["spec"]["volumes"])
    defaults.apply(PODS, p)
    assert p["spec"]["volumes"] == before  # built complete: defaulting adds nothing
    name = before[0]["name"]
    assert name.startswith("kube-api-access-") and len(name) == 21
    assert all(ch in _ALPHANUMS for ch in name[-5:])


async def test_deprecated_alias_and_named_account() -> None:
    h = Harness(FakeStore(ACCOUNTS, cached=[sa("builder")]))
    p = pod(serviceAccount="builder")
    await h.admit(p)
    assert p["spec"]["serviceAccountName"] == "builder"
    p = pod(serviceAccountName="builder", serviceAccount="other")
    await h.admit(p)
    assert p["spec"]["serviceAccountName"] == "builder"


async def test_missing_named_account_is_forbidden_after_one_lookup() -> None:
    store = FakeStore(ACCOUNTS, cached=[sa()])
    h = Harness(store)
    err = await forbidden(h, pod("web", serviceAccountName="ghost"))
    assert err.message == ('pods "web" is forbidden: error looking up service account ns/ghost: '
                           'serviceaccount "ghost" not found')
    assert store.gets == ["ghost"] and h.sleeps == []
    err = await forbidden(h, {"metadata": {"generateName": "web-"}, "spec": {"serviceAccountName": "x"}})
    assert err.message.startswith('pods "web-" is forbidden: ')


async def test_default_account_is_retried_ten_times() -> None:
    store = FakeStore(ACCOUNTS)
    h = Harness(store)
    err = await forbidden(h, pod())
    assert err.message == ('pods "p" is forbidden: error looking up service account ns/default: '
                           'serviceaccount "default" not found')
    assert store.gets == ["default"] * 10 and h.sleeps == [0.15] * 9


async def test_default_account_created_meanwhile_is_found() -> None:
    store = FakeStore(ACCOUNTS, stored=[sa(automountServiceAccountToken=False)], ready=False, appear_after=3)
    h = Harness(store)
    p = pod()
    await h.admit(p)
    assert len(store.gets) == 4 and len(h.sleeps) == 3
    assert "volumes" not in p["spec"]


async def test_other_lookup_errors_are_wrapped() -> None:
    h = Harness(FakeStore(ACCOUNTS, error=APIError(500, "InternalError", "etcd down")))
    err = await forbidden(h, pod())
    assert err.message == 'pods "p" is forbidden: error looking up service account ns/default: etcd down'


def test_default_retry_pause_is_100_to_200ms() -> None:
    hook = ServiceAccount(FakeStore(ACCOUNTS))  # type: ignore[arg-type]
    pauses = [hook.pause() for _ in range(200)]
    assert all(0.1 <= s <= 0.2 for s in pauses) and len(set(pauses)) > 1


@pytest.mark.parametrize(("pod_choice", "account_choice", "mounted"), [
    (None, None, True), (False, None, False), (None, False, False), (True, False, True), (False, True, False),
    ("no", False, False),  # not a bool: the account decides
])
async def test_automount_choices(pod_choice: Any, account_choice: Any, mounted: bool) -> None:
    account = sa() if account_choice is None else sa(automountServiceAccountToken=account_choice)
    h = Harness(FakeStore(ACCOUNTS, cached=[account]))
    p = pod() if pod_choice is None else pod(automountServiceAccountToken=pod_choice)
    await h.admit(p)
    assert ("volumes" in p["spec"]) is mounted
    assert ("volumeMounts" in p["spec"]["containers"][0]) is mounted


def test_existing_volume_and_mounts_are_reused() -> None:
    spec: dict[str, Any] = {
        "volumes": [{"name": "data", "emptyDir": {}}, {"name": "kube-api-access-zzzzz", "emptyDir": {}}],
        "containers": [{"name": "a", "volumeMounts": [{"name": "data", "mountPath": PATH}]},
                       {"name": "b"}],
    }
    mount_token(spec, generate=lambda _p: pytest.fail("no name needed"))
    assert [v["name"] for v in spec["volumes"]] == ["data", "kube-api-access-zzzzz"]
    assert spec["containers"][0]["volumeMounts"] == [{"name": "data", "mountPath": PATH}]
    assert spec["containers"][1]["volumeMounts"] == [{"name": "kube-api-access-zzzzz", "readOnly": True,
                                                      "mountPath": PATH}]


def test_no_volume_when_every_container_mounts_the_path() -> None:
    spec: dict[str, Any] = {"containers": [{"name": "a", "volumeMounts": [{"name": "x", "mountPath": PATH}]}],
                            "ephemeralContainers": [{"name": "e"}]}
    mount_token(spec, generate=lambda p: p + "abcde")
    assert "volumes" not in spec and "volumeMounts" not in spec["ephemeralContainers"][0]
    bad: dict[str, Any] = {"containers": [{"name": "a", "volumeMounts": "nope"}, "junk"]}
    mount_token(bad)  # malformed: left for validation
    assert bad == {"containers": [{"name": "a", "volumeMounts": "nope"}, "junk"]}


async def test_image_pull_secrets_copied_only_when_pod_has_none() -> None:
    account = sa(imagePullSecrets=[{"name": "reg"}, {"name": "reg2"}])
    h = Harness(FakeStore(ACCOUNTS, cached=[account]))
    p = pod()
    await h.admit(p)
    assert p["spec"]["imagePullSecrets"] == [{"name": "reg"}, {"name": "reg2"}]
    p = pod(imagePullSecrets=[{"name": "own"}])
    await h.admit(p)
    assert p["spec"]["imagePullSecrets"] == [{"name": "own"}]


async def test_ignored_requests() -> None:
    h = Harness(FakeStore(ACCOUNTS))  # no account at all: anything admitted was skipped
    for operation, info in (("UPDATE", PODS), ("DELETE", PODS), ("CREATE", ACCOUNTS)):
        p = pod()
        await h.admit(p, operation, info)
        assert "serviceAccountName" not in p["spec"]
    for malformed in ({"metadata": {"name": "p"}, "spec": "x"}, pod(serviceAccountName=5)):
        before = copy.deepcopy(malformed)
        await h.admit(malformed)
        assert malformed == before


@pytest.mark.parametrize(("spec", "why"), [
    ({"serviceAccountName": "default"}, "a mirror pod may not reference service accounts"),
    ({"serviceAccount": "x"}, "a mirror pod may not reference service accounts"),
    ({"imagePullSecrets": [{"name": "r"}]}, "a mirror pod may not reference secrets"),
    ({"volumes": [{"name": "v", "secret": {"secretName": "s"}}]}, "a mirror pod may not reference secrets"),
    ({"containers": [{"name": "c", "envFrom": [{"secretRef": {"name": "s"}}]}]},
     "a mirror pod may not reference secrets"),
    ({"volumes": [{"name": "v", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}]},
     "a mirror pod may not use ServiceAccountToken volume projections"),
])
async def test_mirror_pods_are_only_checked(spec: dict[str, Any], why: str) -> None:
    h = Harness(FakeStore(ACCOUNTS))
    p = pod("m", annotations={"kubernetes.io/config.mirror": "hash"}, **spec)
    err = await forbidden(h, p)
    assert err.message == f'pods "m" is forbidden: {why}'
    ok = pod("m", annotations={"kubernetes.io/config.mirror": ""})
    await h.admit(ok)
    assert ok == pod("m", annotations={"kubernetes.io/config.mirror": ""})  # untouched


def test_pod_secret_names_cover_all_sources() -> None:
    spec = {
        "imagePullSecrets": [{"name": "pull"}],
        "ephemeralContainers": [{"name": "e", "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "env"}}}]}],
        "volumes": [{"name": "a", "azureFile": {"secretName": "az"}},
                    {"name": "b", "cephfs": {"secretRef": {"name": "ceph"}}},
                    {"name": "c", "csi": {"nodePublishSecretRef": {"name": "csi"}}},
                    {"name": "d", "projected": {"sources": [{"secret": {"name": "proj"}}]}},
                    {"name": "e", "configMap": {"name": "cm"}}, {"name": "f", "azureFile": {"secretName": ""}}],
    }
    assert sorted(pod_secret_names(spec)) == ["az", "ceph", "csi", "env", "proj", "pull"]
    assert mirror_pod_violation({"containers": [{"name": "c", "env": [{"name": "X", "value": "y"}]}]}) == ""


@pytest.mark.parametrize(("value", "enforced"), [("true", True), ("1", True), ("T", True), ("yes", False),
                                                 ("false", False), (None, False)])
def test_parse_bool(value: Any, enforced: bool) -> None:
    assert parse_bool(value) is enforced


def test_secret_reference_violations() -> None:
    account = sa("builder", secrets=[{"name": "ok"}], imagePullSecrets=[{"name": "reg"}])
    assert secret_reference_violation({"volumes": [{"name": "v", "secret": {"secretName": "ok"}}]}, account) == ""
    cases: list[tuple[dict[str, Any], str]] = [
        ({"volumes": [{"name": "v", "secret": {"secretName": "no"}}]},
         'volume with secret.secretName="no" is not allowed because service account builder does not reference '
         "that secret"),
        ({"initContainers": [{"name": "i", "env": [{"name": "E", "valueFrom": {"secretKeyRef": {"name": "no"}}}]}]},
         'init container i with envVar E referencing secret.secretName="no" is not allowed because service account '
         "builder does not reference that secret"),
        ({"containers": [{"name": "c", "envFrom": [{"secretRef": {"name": "no"}}]}]},
         'container c with envFrom referencing secret.secretName="no" is not allowed because service account '
         "builder does not reference that secret"),
        ({"imagePullSecrets": [{"name": "reg"}, {"name": "no"}]},
         'imagePullSecrets[1].name="no" is not allowed because service account builder does not reference that '
         "imagePullSecret"),
    ]
    for spec, why in cases:
        assert secret_reference_violation(spec, account) == why


async def test_enforce_mountable_secrets_annotation() -> None:
    account = sa("builder", annotations={"kubernetes.io/enforce-mountable-secrets": "true"},
                 secrets=[{"name": "ok"}], imagePullSecrets=[{"name": "reg"}])
    h = Harness(FakeStore(ACCOUNTS, cached=[account]))
    p = pod(serviceAccountName="builder")
    await h.admit(p)  # the copied pull secrets are the account's own
    assert p["spec"]["imagePullSecrets"] == [{"name": "reg"}]
    err = await forbidden(h, pod(serviceAccountName="builder", volumes=[{"name": "v", "secret": {"secretName": "x"}}]))
    assert err.message.startswith('pods "p" is forbidden: volume with secret.secretName="x" is not allowed')
    lax = Harness(FakeStore(ACCOUNTS, cached=[sa("builder", annotations={"kubernetes.io/enforce-mountable-secrets":
                                                                         "no"})]))
    await lax.admit(pod(serviceAccountName="builder", volumes=[{"name": "v", "secret": {"secretName": "x"}}]))
