"""The pytest plugin (entry point ``pytest11: kubechain``): options, the marker, and the fixture
modules. Nothing starts until a test asks for a kubechain fixture, so loading it costs a test run
that never touches Kubernetes nothing. Disable with ``-p no:kubechain``; load it by hand, where
plugin autoloading is off, with ``-p kubechain_testing.plugin``.

Fixture modules are registered through ``pytest_plugins``: a new family of fixtures (fault rules at
the gateway, say) is a new module added to this list.
"""

from __future__ import annotations

import pytest

from .options import Settings, add_options

pytest_plugins = [
    "kubechain_testing.fixtures",
    "kubechain_testing.crds",
    # kubechain_faults: fault rules at the gateway for one test (it finds the chain through
    # kubechain_kubeconfig and kubechain_gateway_urls)
    "kubechain_testing.faults",
]


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "kubechain_crds(*paths): install these CustomResourceDefinition files (or every .yaml/.yml/.json in "
        "these directories; relative paths from the rootdir) before the test and wait until they are "
        "Established and served; they stay installed for the rest of the session")
    Settings.from_config(config)  # a wrong option value stops the run at once, naming the option
