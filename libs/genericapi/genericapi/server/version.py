"""``/version``: the Kubernetes version whose API (and schemas) kubechain serves."""

from __future__ import annotations

import platform
from typing import Any

KUBERNETES_MAJOR = "1"
KUBERNETES_MINOR = "33"
GIT_VERSION = f"v{KUBERNETES_MAJOR}.{KUBERNETES_MINOR}.0+kubechain"


def version_info() -> dict[str, Any]:
    machine = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    return {
        "major": KUBERNETES_MAJOR,
        "minor": KUBERNETES_MINOR,
        "emulationMajor": KUBERNETES_MAJOR,
        "emulationMinor": KUBERNETES_MINOR,
        "minCompatibilityMajor": KUBERNETES_MAJOR,
        "minCompatibilityMinor": str(int(KUBERNETES_MINOR) - 1),
        "gitVersion": GIT_VERSION,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": f"python{platform.python_version()}",
        "compiler": "cpython",
        "platform": f"linux/{machine}",
    }
