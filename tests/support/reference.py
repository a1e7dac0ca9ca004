"""Where the shared Kubernetes reference data lives (``KUBECHAIN_SHARED_DIR`` or ``../shared``)."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_DIR = Path(os.environ.get("KUBECHAIN_SHARED_DIR", str(REPO_ROOT.parent / "shared")))
DISCOVERY_DIR = SHARED_DIR / "k8s-reference" / "api" / "discovery"
