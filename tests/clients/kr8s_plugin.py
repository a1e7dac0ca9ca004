"""pytest plugin that runs kr8s's own test suite (shipped in its wheel) against a running kubechain.

kr8s's suite expects two fixtures from its repository's root conftest, which the wheel does not ship:
``k8s_cluster`` (session, autouse: a pytest-kind cluster whose kubeconfig is in ``$KUBECONFIG``) and
``ensure_gc``. This plugin provides them for the chain ``$KUBECONFIG`` points at (``run_kr8s.py`` starts
it with ``kubechain up``), creates what a fresh kind cluster would already hold (``kind_objects``), and
deselects the tests that need a kubelet by the rule in ``kubelet_rule`` (reported at the end of the run,
grouped by reason), and marks the few known failures strict xfail with their cause.

Load it with ``-p clients.kr8s_plugin`` (``tests`` on ``PYTHONPATH``).
"""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clients import kind_objects
from clients.kubelet_rule import kubelet_needs

_deselected: dict[str, list[str]] = {}

# Kept in the run but expected to fail, strictly (an unexpected pass fails the run, so the entry is removed
# when the cause is fixed). By fixture: kubechain gaps, each with a regression test in
# tests/integration/test_client_fidelity.py.
KUBECHAIN_GAPS: dict[str, str] = {
    # (none open: TokenRequest and ServiceAccount token authentication, the last one, are served now)
}
# By test: failures inside the client libraries, with no request sent (not kubechain's to fix).
CLIENT_SIDE: dict[str, tuple[str, type[Exception]]] = {
    "test_cast_to_from_kubernetes": ("client side: the test reaches kubernetes.client.models.v1_pod, which the "
                                     "kubernetes client (>= 35) no longer imports eagerly", AttributeError),
}


class KubechainCluster:
    """What kr8s's conftest uses of pytest-kind's ``KindCluster``: the kubeconfig and kubectl."""

    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig_path = kubeconfig
        kubectl = shutil.which("kubectl")
        if kubectl is None:
            raise RuntimeError("kubectl is not on PATH")
        self.kubectl_path = kubectl

    def kubectl(self, *args: str, input: str | None = None, timeout: float = 60) -> str:
        env = dict(os.environ, KUBECONFIG=str(self.kubeconfig_path))
        proc = subprocess.run([self.kubectl_path, *args], input=input, capture_output=True, text=True, env=env,
                              timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
        return proc.stdout


@pytest.fixture(scope="session", autouse=True)
def k8s_cluster() -> Iterator[KubechainCluster]:
    kubeconfig = os.environ.get("KUBECONFIG", "")
    if not kubeconfig or not Path(kubeconfig).is_file():
        raise pytest.UsageError("KUBECONFIG must name the kubeconfig of a running kubechain (see run_kr8s.py)")
    cluster = KubechainCluster(Path(kubeconfig))
    # As kr8s's conftest does after kind create: the default ServiceAccounts come from a controller.
    for ns in ("default", "kube-system"):
        cluster.kubectl("wait", "--for=create", "serviceaccount/default", "-n", ns, "--timeout=60s")
    kind_objects.create(cluster.kubectl)
    yield cluster


@pytest.fixture
def ensure_gc() -> Iterator[None]:
    """kr8s's root conftest: collect garbage around tests that create classes dynamically."""
    gc.collect()
    yield
    gc.collect()


def _needs(item: pytest.Item) -> list[str]:
    reasons: list[str] = []
    func = getattr(item, "function", None)
    if func is not None:
        reasons += [f"test: {r}" for r in kubelet_needs(func)]
    info: Any = getattr(item, "_fixtureinfo", None)
    for name in getattr(item, "fixturenames", ()):
        defs = info.name2fixturedefs.get(name) if info is not None else None
        if defs:
            reasons += [f"fixture {name}: {r}" for r in kubelet_needs(defs[-1].func)]
    return reasons

# By test: left out because the outcome is a client-side race, not API behaviour. test_api_timeout expects
# a 10 us httpx timeout to fire on a reused connection; httpx lets the read win whenever the response is
# readable when the loop wakes. Measured here: plain httpx with that timeout, after three requests on one
# connection, did not time out 9 of 12 times against kubechain's /version and 12 of 12 against etcd's
# /version (a Go HTTP server, no kubechain code), so no server answer decides it (kr8s's CI reruns it).
CLIENT_RACES: dict[str, str] = {
    "test_api_timeout": "client-side race: httpx does not reliably enforce a 10 us timeout on a reused "
                        "connection (same with etcd's Go HTTP server)",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kept, dropped = [], []
    for item in items:
        reasons = _needs(item)
        if getattr(item, "originalname", item.name) in CLIENT_RACES:
            reasons = [CLIENT_RACES[getattr(item, "originalname", item.name)]]
        if reasons:
            dropped.append(item)
            _deselected[item.nodeid] = reasons
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
    for item in kept:
        gaps = [KUBECHAIN_GAPS[f] for f in getattr(item, "fixturenames", ()) if f in KUBECHAIN_GAPS]
        if gaps:
            # The fixture's kubectl fails: RuntimeError from KubechainCluster.kubectl.
            item.add_marker(pytest.mark.xfail(reason=gaps[0], raises=RuntimeError, strict=True))
        name = getattr(item, "originalname", item.name)
        if name in CLIENT_SIDE:
            reason, raises = CLIENT_SIDE[name]
            item.add_marker(pytest.mark.xfail(reason=reason, raises=raises, strict=True))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _deselected:
        return
    by_reason: dict[str, list[str]] = {}
    for nodeid, reasons in _deselected.items():
        by_reason.setdefault(reasons[0], []).append(nodeid.split("::")[-1])
    races = sum(1 for reasons in _deselected.values() if reasons[0].startswith("client-side race"))
    terminalreporter.section(f"kr8s tests left out: {len(_deselected) - races} need a kubelet, {races} client race")
    for reason, tests in sorted(by_reason.items()):
        terminalreporter.write_line(f"{reason}\n    {', '.join(sorted(tests))}")
