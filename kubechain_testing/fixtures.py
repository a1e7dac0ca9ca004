"""The fixtures every kubechain test uses: the session's chain, its kubeconfig, clients, and a fresh
namespace per test.

Scope: one chain per session (per worker under pytest-xdist: each worker has its own temporary
directory, so its own data dir, and free ports of its own). Tests share it and are kept apart by
namespaces: ``kubechain_namespace`` creates a uniquely named one before the test and deletes it after,
pass or fail, without waiting for the deletion to finish.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .cluster import Kubechain, KubechainStartError, Kubectl, kubernetes_client
from .options import Settings

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

#: Annotation on each test namespace naming the test that made it (for a look at a kept chain).
TEST_ANNOTATION = "kubechain.io/test"


@pytest.fixture(scope="session")
def kubechain(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubechain]:
    """The session's API server: a chain started in a temporary directory, or (with
    ``--kubechain-kubeconfig``) the server a kubeconfig names. Stopped at the end of the session."""
    settings = Settings.from_config(request.config)
    handle: Kubechain | None = None
    try:
        if settings.kubeconfig is not None:
            handle = Kubechain.attach(settings.kubeconfig, timeout=settings.start_timeout)
        else:
            handle = Kubechain.start(tmp_path_factory.mktemp("kubechain"), controllers=settings.controllers,
                                     timeout=settings.start_timeout)
    except KubechainStartError as err:
        failure = str(err)
    if handle is None:  # failed outside the except block: the report is the message, not a chain of errors
        pytest.fail(failure, pytrace=False)
    yield handle
    handle.stop()


@pytest.fixture(scope="session")
def kubechain_kubeconfig(kubechain: Kubechain) -> Path:
    """Path of the kubeconfig (admin credentials, context namespace ``default``): for ``KUBECONFIG``,
    ``kubectl --kubeconfig`` or ``kubernetes.config.load_kube_config``."""
    return kubechain.kubeconfig


@pytest.fixture(scope="session")
def kubechain_gateway_urls(kubechain: Kubechain) -> list[str]:
    """Every gateway's URL (one unless the chain runs replicas); fault rules go to each."""
    return kubechain.chain.server_urls if kubechain.chain is not None else [kubechain.server_url]


@pytest.fixture(scope="session")
def kubechain_session_client(kubechain: Kubechain) -> Iterator[ApiClient]:
    """One ``kubernetes.client.ApiClient`` for the whole session (the plugin's own calls use it)."""
    with kubechain.api_client() as client:
        yield client


@pytest.fixture
def kubechain_client(kubechain: Kubechain) -> Iterator[ApiClient]:
    """A ``kubernetes.client.ApiClient`` configured from the kubeconfig, closed after the test:
    ``kubernetes.client.CoreV1Api(kubechain_client)``."""
    with kubechain.api_client() as client:
        yield client


@pytest.fixture
def kubechain_namespace(request: pytest.FixtureRequest, kubechain_session_client: ApiClient) -> Iterator[str]:
    """The name of a namespace made for this test (``kc-<test name>-<random>``), deleted afterwards."""
    kubernetes = kubernetes_client()
    core = kubernetes.client.CoreV1Api(kubechain_session_client)
    name = namespace_name(request.node.name)
    core.create_namespace({"metadata": {"name": name, "annotations": {TEST_ANNOTATION: request.node.nodeid[:1024]}}})
    yield name
    try:
        core.delete_namespace(name)
    except kubernetes.client.ApiException as err:
        if err.status != 404:  # the test may have deleted it itself
            raise


@pytest.fixture
def kubechain_kubectl(kubechain: Kubechain, kubechain_namespace: str, pytestconfig: pytest.Config) -> Kubectl:
    """kubectl bound to the kubeconfig and the test's namespace: ``kubechain_kubectl("get", "cm")``
    returns stdout or raises ``KubectlError`` with kubectl's stderr; ``.run(...)`` never raises."""
    return kubechain.kubectl(kubechain_namespace, Settings.from_config(pytestconfig).kubectl)


def namespace_name(test_name: str) -> str:
    """A DNS-1123 label from a test's name, unique by a random suffix: ``kc-test-apply-x-4f9k2``."""
    suffix = secrets.token_hex(3)[:5]
    base = re.sub(r"[^a-z0-9]+", "-", test_name.lower()).strip("-")
    base = base[:63 - len("kc--") - len(suffix)].rstrip("-")
    return f"kc-{base}-{suffix}" if base else f"kc-{suffix}"
