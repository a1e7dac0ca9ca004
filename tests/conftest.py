"""Fixtures: a real etcd per session, and the real chain (separate processes) per session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.procs import ChainHandle, EtcdServer, start_chain

from kubechain_cli.chain import Chain, free_port


@pytest.fixture(scope="session")
def etcd_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdServer]:
    server = EtcdServer.start(tmp_path_factory.mktemp("etcd"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChainHandle]:
    data: Path = tmp_path_factory.mktemp("chain")
    c = Chain(data, port=free_port(), bookmark_interval=1.0, watch_cache_size=200)
    yield start_chain(c)
    c.stop()
