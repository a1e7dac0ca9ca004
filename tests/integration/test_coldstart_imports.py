"""What a cold start does not load (issue 15): no service of a ready chain has imported aiohttp.

aiohttp's import was ~0.25 s of the fork server's serial preload; nothing on the way to ``/readyz``
needs it (the controllers reach the other members' Unix sockets with
``genericapi.controllers.unixclient``), so a module that brings it back onto the start path shows
here. Read off ``/proc/<pid>/maps`` (aiohttp's compiled parser is mapped by ``import aiohttp``) of
each service as ``Chain.start`` returns and again once core-api's controllers have their lease and
run, which is when they first reach extensions-api.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import aiohttp
import pytest

from kubechain_cli.chain import Chain, free_port

pytestmark = pytest.mark.integration

SERVICES = ("core-api", "extensions-api", "aggregator")


#: core-api's log line once its controllers lead (they start then).
LEASE_LINE = "acquired lease kube-system/kube-controller-manager"


def _assert_no_aiohttp(chain: Chain, when: str) -> None:
    loaded = {name: _maps_aiohttp(chain.processes[name].pid) for name in SERVICES}
    assert loaded == dict.fromkeys(SERVICES, False), when


def _maps_aiohttp(pid: int) -> bool:
    return "/aiohttp/" in Path(f"/proc/{pid}/maps").read_text()


def test_no_service_of_a_ready_chain_has_imported_aiohttp(tmp_path: Path) -> None:
    assert aiohttp.__file__ and _maps_aiohttp(os.getpid())  # the probe sees an import
    chain = Chain(tmp_path / "data", port=free_port())
    try:
        chain.start()
        _assert_no_aiohttp(chain, "at ready")
        log = tmp_path / "data" / "logs" / "core-api.log"
        deadline = time.monotonic() + 60
        while LEASE_LINE not in _read(log) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert LEASE_LINE in _read(log)
        time.sleep(1.0)  # the controllers' first lists of the delegate's resources
        _assert_no_aiohttp(chain, "with the controllers running")
    finally:
        chain.stop(timeout=5)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
