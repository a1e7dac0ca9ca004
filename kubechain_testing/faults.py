"""``kubechain_faults``: fault rules at the gateway for one test (kubechain_cli.pytest_faults), found
through this plugin's ``kubechain_kubeconfig`` and ``kubechain_gateway_urls``. Registered from here
under its one name (that module exports the fixture twice, which pytest's ``--fixtures`` cannot sort)."""

from kubechain_cli.pytest_faults import kubechain_faults_fixture

__all__ = ["kubechain_faults_fixture"]
