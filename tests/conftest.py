"""Fixtures: a real etcd per session, and the real chain (separate processes) per session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.procs import ChainHandle, EtcdServer, start_chain

from kubechain_cli.chain import Chain, free_port

#: The slowest test files of a measured run, slowest first (tests/support/slow_files.py writes it).
SLOW_FILES = Path(__file__).with_name("slow_files.txt")


def slow_file_ranks(listing: Path = SLOW_FILES) -> dict[str, int]:
    """Each listed file's place in the listing (0 = slowest); nothing when there is no listing."""
    try:
        lines = listing.read_text().splitlines()
    except FileNotFoundError:
        return {}
    paths = [line.split()[1] for line in lines if line.strip() and not line.startswith("#")]
    return {path: rank for rank, path in enumerate(paths)}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Slowest files first, the rest after them in collection order (the sort is stable, and a file's
    tests keep their order). ``./dev test`` gives the xdist workers whole files in this order
    (``--dist loadfile --no-loadscope-reorder``), so a worker's last files are short ones and the two
    workers finish close together instead of one running a long file alone at the end."""
    ranks = slow_file_ranks()
    if ranks:
        unlisted = len(ranks)
        items.sort(key=lambda item: ranks.get(item.nodeid.split("::", 1)[0], unlisted))


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
