"""The plugin's settings: command-line options, each with an ini twin (``[tool.pytest.ini_options]``
or pytest.ini), read once per session. A chain lives for the whole session (one per xdist worker), so
what shapes it (controllers, reuse of a running server) is an option, never a per-test marker."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

_SWITCH = {"on": True, "true": True, "yes": True, "1": True, "off": False, "false": False, "no": False, "0": False}


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("kubechain", "kubechain: a real Kubernetes API server (etcd included) for tests")
    group.addoption("--kubechain-kubeconfig", default=None, metavar="PATH",
                    help="use the API server this kubeconfig names (say, a `kubechain up` left running) "
                         "instead of starting a chain; ini: kubechain_kubeconfig")
    group.addoption("--kubechain-controllers", default=None, metavar="on|off",
                    help="run core-api's controllers (namespace deletion, ServiceAccounts, "
                         "kube-root-ca.crt, garbage collection); off is envtest's bare API server. "
                         "ini: kubechain_controllers (default on)")
    group.addoption("--kubechain-kubectl", default=None, metavar="BINARY",
                    help="kubectl binary for the kubechain_kubectl fixture; ini: kubechain_kubectl (default kubectl)")
    parser.addini("kubechain_kubeconfig", "kubeconfig of a running API server to use instead of starting a chain",
                  default="")
    parser.addini("kubechain_controllers", "run core-api's controllers: on or off", default="on")
    parser.addini("kubechain_kubectl", "kubectl binary for the kubechain_kubectl fixture", default="kubectl")
    parser.addini("kubechain_start_timeout", "seconds the chain may take to become ready", default="60")


@dataclass(frozen=True)
class Settings:
    kubeconfig: Path | None
    controllers: bool
    kubectl: str
    start_timeout: float

    @classmethod
    def from_config(cls, config: pytest.Config) -> Settings:
        """The settings, or ``pytest.UsageError`` naming the option whose value is wrong."""
        kubeconfig = config.getoption("kubechain_kubeconfig") or str(config.getini("kubechain_kubeconfig"))
        switch = config.getoption("kubechain_controllers") or str(config.getini("kubechain_controllers"))
        if switch.strip().lower() not in _SWITCH:
            raise pytest.UsageError(f"--kubechain-controllers / kubechain_controllers: {switch!r} is not on or off")
        timeout_text = str(config.getini("kubechain_start_timeout"))
        try:
            timeout = float(timeout_text)
        except ValueError:
            timeout = -1.0
        if not timeout > 0:
            raise pytest.UsageError(f"kubechain_start_timeout: {timeout_text!r} is not a positive number of seconds")
        return cls(
            kubeconfig=Path(kubeconfig) if kubeconfig else None,
            controllers=_SWITCH[switch.strip().lower()],
            kubectl=config.getoption("kubechain_kubectl") or str(config.getini("kubechain_kubectl")),
            start_timeout=timeout,
        )
