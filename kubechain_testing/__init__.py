"""kubechain as a test harness: a pytest plugin (``kubechain_testing.plugin``, loaded through the
``pytest11`` entry point) that starts the real chain once per test session, the way envtest starts
kube-apiserver and etcd for Go operators, with fixtures for a namespace per test, the kubeconfig, the
official ``kubernetes`` client, kubectl, and CRDs installed by a marker.

The fixtures live in small modules (``cluster``, ``fixtures``, ``crds``); the plugin module lists them
in ``pytest_plugins``, so another fixture module (fault rules at the gateway, say) is one more entry.
"""

from .cluster import Kubechain, KubechainStartError, Kubectl, KubectlError

__all__ = ["Kubechain", "KubechainStartError", "Kubectl", "KubectlError"]
