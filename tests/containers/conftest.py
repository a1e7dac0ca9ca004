"""Fixtures of the container tests: a Docker engine, the compose CLI and current images.

These tests run only where an engine answers and the base and etcd images exist (built once by
``deploy/images/build-base.sh``, or named by ``KUBECHAIN_BASE_IMAGE`` / ``ETCD_IMAGE``), and, unless
selected with ``-m containers`` (``./dev containers``), the service images were built before;
anywhere else they are skipped with the reason, so the default suite does not depend on Docker. Set
``KUBECHAIN_CONTAINER_TESTS=0`` to skip them on a machine that has both.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

docker = pytest.importorskip("docker", reason="the docker SDK is not installed (pip install -e '.[test]')")

from compose_stack import SERVICES, Engine, build_images, compose_commands, image_settings  # noqa: E402


@pytest.fixture(scope="session")
def engine(request: pytest.FixtureRequest) -> Iterator[Engine]:
    if os.environ.get("KUBECHAIN_CONTAINER_TESTS") == "0":
        pytest.skip("container tests disabled (KUBECHAIN_CONTAINER_TESTS=0)")
    try:
        client = docker.from_env(timeout=600)
        client.ping()
    except Exception as err:
        pytest.skip(f"no Docker engine answers ({err.__class__.__name__}): start dockerd to run the container tests")
    composes = compose_commands()
    if not composes:
        pytest.skip("neither `docker compose` nor `docker-compose` is installed")
    images = image_settings(client)
    missing = [k for k, v in images.items() if not v]
    if missing:
        pytest.skip(f"{' and '.join(missing)} not available: run deploy/images/build-base.sh --base-only "
                    "(or set them to images this engine has)")
    # In a plain `pytest` run they also need the service images built once already (then they are
    # rebuilt from the tree, which the layer cache keeps short); `pytest -m containers` builds them.
    if "containers" not in (request.config.getoption("markexpr") or ""):
        for service in SERVICES:
            try:
                client.images.get(f"kubechain/{service}:latest")
            except docker.errors.ImageNotFound:
                pytest.skip(f"image kubechain/{service}:latest is not built: run `./dev containers` "
                            "or deploy/images/build-base.sh")
    started = time.monotonic()
    seconds = build_images(client, images["KUBECHAIN_BASE_IMAGE"])
    print(f"\nservice images rebuilt from the working tree in {seconds:.1f}s")
    yield Engine(client, composes, images, time.monotonic() - started)
