"""The official ``kubernetes`` Python client against the chain: CRUD, list, watch, patch."""

from __future__ import annotations

import json

import pytest
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException
from support.procs import ChainHandle

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def core(chain: ChainHandle) -> client.CoreV1Api:
    api_client = config.new_client_from_config(config_file=chain.kubeconfig)
    return client.CoreV1Api(api_client)


@pytest.fixture(scope="module")
def apps(chain: ChainHandle) -> client.AppsV1Api:
    return client.AppsV1Api(config.new_client_from_config(config_file=chain.kubeconfig))


def test_configmap_lifecycle(core: client.CoreV1Api) -> None:
    body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="py-cm", labels={"app": "py"}), data={"a": "1"})
    created = core.create_namespaced_config_map("default", body)
    assert created.metadata.uid and created.data == {"a": "1"}
    listed = core.list_namespaced_config_map("default", label_selector="app=py")
    assert [i.metadata.name for i in listed.items] == ["py-cm"]
    patched = core.patch_namespaced_config_map("py-cm", "default", {"data": {"b": "2"}})
    assert patched.data == {"a": "1", "b": "2"}
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map("default", body)
    assert err.value.status == 409
    core.delete_namespaced_config_map("py-cm", "default")
    with pytest.raises(ApiException) as err:
        core.read_namespaced_config_map("py-cm", "default")
    assert err.value.status == 404


def test_watch_with_the_client(core: client.CoreV1Api) -> None:
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="py-watch")))
    listed = core.list_namespaced_config_map("py-watch")
    for i in range(3):
        core.create_namespaced_config_map("py-watch", client.V1ConfigMap(metadata=client.V1ObjectMeta(name=f"c{i}")))
    w = watch.Watch()
    names = []
    for event in w.stream(core.list_namespaced_config_map, "py-watch",
                          resource_version=listed.metadata.resource_version, timeout_seconds=5):
        names.append((event["type"], event["object"].metadata.name))
        if len(names) == 3:
            w.stop()
    assert names == [("ADDED", "c0"), ("ADDED", "c1"), ("ADDED", "c2")]


def test_deployment_scale_and_status(apps: client.AppsV1Api) -> None:
    dep = client.V1Deployment(
        metadata=client.V1ObjectMeta(name="py-dep"),
        spec=client.V1DeploymentSpec(
            replicas=1,
            selector=client.V1LabelSelector(match_labels={"app": "py"}),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels={"app": "py"}),
                spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="nginx")]))))
    apps.create_namespaced_deployment("default", dep)
    scale = apps.patch_namespaced_deployment_scale("py-dep", "default", {"spec": {"replicas": 3}})
    assert scale.spec.replicas == 3
    assert apps.read_namespaced_deployment("py-dep", "default").spec.replicas == 3
    dep.metadata = client.V1ObjectMeta(name="Py_Bad")
    with pytest.raises(ApiException) as err:
        apps.create_namespaced_deployment("default", dep)
    assert err.value.status == 422
    assert json.loads(err.value.body)["message"].startswith('Deployment.apps "Py_Bad" is invalid')


def test_core_api_versions(chain: ChainHandle) -> None:
    api = client.CoreApi(config.new_client_from_config(config_file=chain.kubeconfig))
    versions = api.get_api_versions()
    assert versions.versions == ["v1"]
    assert versions.server_address_by_client_cidrs[0].server_address == chain.url.removeprefix("https://")
