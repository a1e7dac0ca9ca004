"""The ``kubechain_faults`` pytest fixture: fault rules on the chain's gateways for one test.

Load this module as a plugin (``pytest_plugins = ["kubechain_cli.pytest_faults"]``) or import the
fixture into a plugin or conftest (``from kubechain_cli.pytest_faults import kubechain_faults_fixture``:
pytest registers it as ``kubechain_faults``; the Python name differs so test parameters named
``kubechain_faults`` do not shadow an import). A test then gets a ``kubechain_cli.faults.FaultClient``
with no rules on the gateways; whatever the test adds is removed afterwards, pass or fail::

    from kubechain_cli.faults import conflict

    def test_controller_retries_conflicts(kubechain_faults, my_operator):
        kubechain_faults.add(conflict(verbs=["update"], resources=["configmaps"], first_n=2))
        ...

Which chain: the fixture asks for the first of these fixtures that exists (the kubechain pytest
plugin provides them; a conftest may too):

- ``kubechain_kubeconfig``: the admin kubeconfig's path; with ``kubechain_gateway_urls`` (every
  gateway's URL) rules go to every gateway replica, else to the kubeconfig's server;
- ``kubechain_chain``, ``kubechain`` or ``chain``: an object with ``kubeconfig`` and
  ``server_urls`` (a ``kubechain_cli.chain.Chain``) or ``chain.server_urls`` (the repository's
  own test ``ChainHandle``);

else the ``KUBECHAIN_KUBECONFIG`` environment variable names the kubeconfig. The rules of a gateway
are shared by everything using it: tests that add faults must not run at the same time against
one chain (pytest-xdist workers each with their own chain are fine).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from kubechain_cli.faults import FaultClient

__all__ = ["fault_client_for", "kubechain_faults_fixture"]

KUBECONFIG_FIXTURE = "kubechain_kubeconfig"
GATEWAY_URLS_FIXTURE = "kubechain_gateway_urls"
CHAIN_FIXTURES = ("kubechain_chain", "kubechain", "chain")
KUBECONFIG_ENV = "KUBECHAIN_KUBECONFIG"


def _fixture(request: pytest.FixtureRequest, name: str) -> Any:
    try:
        return request.getfixturevalue(name)
    except pytest.FixtureLookupError:
        return None


def _servers_of(chain: Any) -> list[str]:
    for owner in (chain, getattr(chain, "chain", None)):
        urls = getattr(owner, "server_urls", None)
        if urls:
            return [str(u) for u in urls]
    return []


def fault_client_for(request: pytest.FixtureRequest) -> FaultClient:
    """A ``FaultClient`` for the chain the test's fixtures point at (see the module docstring)."""
    kubeconfig = _fixture(request, KUBECONFIG_FIXTURE)
    if kubeconfig is not None:
        urls = _fixture(request, GATEWAY_URLS_FIXTURE) or []
        return FaultClient(str(kubeconfig), servers=[str(u) for u in urls])
    for name in CHAIN_FIXTURES:
        chain = _fixture(request, name)
        if chain is not None and getattr(chain, "kubeconfig", None):
            return FaultClient(str(chain.kubeconfig), servers=_servers_of(chain))
    path = os.environ.get(KUBECONFIG_ENV)
    if path:
        return FaultClient(path)
    raise pytest.UsageError(
        f"kubechain_faults needs a chain: a {KUBECONFIG_FIXTURE!r} fixture, one of {', '.join(CHAIN_FIXTURES)} "
        f"(with .kubeconfig), or ${KUBECONFIG_ENV}")


@pytest.fixture(name="kubechain_faults")
def kubechain_faults_fixture(request: pytest.FixtureRequest) -> Iterator[FaultClient]:
    """Fault rules for this test: none at the start, all removed at the end."""
    client = fault_client_for(request)
    client.clear()
    try:
        yield client
    finally:
        client.clear()
