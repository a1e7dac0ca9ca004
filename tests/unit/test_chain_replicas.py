"""How ``Chain(replicas=N)`` wires its processes, without starting any: every replica its own
socket (or ports) and control address, every gateway listing all of them per member, each
core-api delegating to every extensions-api; replicas=1 keeps the plain names; the chain is down
only when a service has no process left."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kubechain_cli import chain as chain_module
from kubechain_cli.chain import Chain


def wired(tmp_path: Path, replicas: int, transport: str = "unix") -> tuple[Chain, dict[str, list[str]]]:
    c = Chain(tmp_path / "data", port=1234, etcd_endpoints="http://127.0.0.1:1", backend_transport=transport,
              replicas=replicas)
    spawned: dict[str, list[str]] = {}

    def spawn(name: str, argv: list[str]) -> None:
        spawned[name] = argv

    c._spawn = spawn  # type: ignore[method-assign]
    c.wait_ready = lambda _timeout: None  # type: ignore[method-assign,assignment]
    c._start_once(1.0)
    return c, spawned


def values(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


@pytest.mark.parametrize("transport", ["unix", "tls"])
def test_three_replicas_are_wired_to_each_other(tmp_path: Path, transport: str) -> None:
    c, spawned = wired(tmp_path, 3, transport)
    assert sorted(spawned) == sorted(f"{s}{suffix}" for s in ("aggregator", "core-api", "extensions-api")
                                     for suffix in ("", "-1", "-2"))
    core, ext = c.replica_urls["core-api"], c.replica_urls["extensions-api"]
    assert len(set(core + ext)) == 6
    assert len(set(c.replica_grpc["core-api"] + c.replica_grpc["extensions-api"])) == 6
    assert c.backend_urls == {"core-api": core[0], "extensions-api": ext[0]}
    assert len(set(c.gateway_ports)) == 3 and c.gateway_ports[0] == 1234
    assert c.server_urls == [f"https://127.0.0.1:{p}" for p in c.gateway_ports]
    listen_flag = "--bind-unix-socket" if transport == "unix" else "--port"
    for service, urls in (("core-api", core), ("extensions-api", ext)):
        for i, url in enumerate(urls):
            expected = url.rsplit(":", 1)[1] if transport == "tls" else url.removeprefix("unix://")
            assert values(spawned[c.replica_name(service, i)], listen_flag) == [expected]
    for i in range(3):
        assert values(spawned[c.replica_name("core-api", i)], "--delegate-url") == ext
        gateway = spawned[c.replica_name("aggregator", i)]
        assert values(gateway, "--secure-port") == [str(c.gateway_ports[i])]
        assert values(gateway, "--member") == [",".join(core), ",".join(ext)]
        assert values(gateway, "--member-grpc") == [f"core-api={','.join(c.replica_grpc['core-api'])}",
                                                    f"extensions-api={','.join(c.replica_grpc['extensions-api'])}"]


def test_one_replica_keeps_the_plain_names(tmp_path: Path) -> None:
    c, spawned = wired(tmp_path, 1)
    assert sorted(spawned) == ["aggregator", "core-api", "extensions-api"]
    run = Path(c.backend_urls["core-api"].removeprefix("unix://")).parent
    assert c.backend_urls == {"core-api": f"unix://{run}/core-api.sock",
                              "extensions-api": f"unix://{run}/extensions-api.sock"}
    assert c.backend_grpc["extensions-api"] == f"unix://{run}/extensions-api.grpc.sock"
    assert c.server_urls == ["https://127.0.0.1:1234"]
    assert values(spawned["aggregator"], "--member") == [c.backend_urls["core-api"], c.backend_urls["extensions-api"]]


@pytest.mark.parametrize("count", [0, -1])
def test_fewer_than_one_replica_is_refused(tmp_path: Path, count: int) -> None:
    with pytest.raises(ValueError, match=f"replicas must be at least 1, not {count}"):
        wired(tmp_path, count)
    assert not (tmp_path / "data").exists()


def test_replica_names_map_to_their_service() -> None:
    assert chain_module._replica_of("core-api-1") == "core-api"
    assert chain_module._replica_of("extensions-api-12") == "extensions-api"
    assert chain_module._replica_of("extensions-api") == ""
    assert chain_module._replica_of("etcd") == ""
    assert chain_module._tier("aggregator-2") == "aggregator"
    assert chain_module._tier("sample-apiserver") == ""


def test_add_process_refuses_a_running_name(tmp_path: Path) -> None:
    c = Chain(tmp_path)
    proc = c.add_process("sleeper-1", ["sleep", "30"])
    try:
        with pytest.raises(ValueError, match="already running"):
            c.add_process("sleeper-1", ["sleep", "30"])
        assert (tmp_path / "logs" / "sleeper-1.log").exists()
    finally:
        c.stop(timeout=5)
    assert proc.poll() is not None and c.processes == {}
    assert isinstance(proc, subprocess.Popen)
