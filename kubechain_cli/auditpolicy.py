"""The audit policy ``kubechain up`` writes by default (and deploy/audit-policy.yaml holds the same).

An operator should be able to read who did what from the start, without the log filling with the
chain's own noise or with credentials: every request at Metadata (user, verb, object, outcome;
no bodies), nothing for health and version probes or kube's loopback identity, and the kinds that
carry credentials (Secrets, ConfigMaps, TokenReviews, TokenRequests) never above Metadata, whatever
rule is added below them. The RequestReceived stage is left out: ResponseComplete says all it does.
"""

from __future__ import annotations

from pathlib import Path

DEFAULT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
# ResponseComplete (or ResponseStarted for watches) carries everything RequestReceived would.
omitStages:
  - RequestReceived
rules:
  # kube's loopback identity and health/version probes: noise.
  - level: None
    users: ["system:apiserver"]
  - level: None
    nonResourceURLs: ["/healthz*", "/livez*", "/readyz*", "/version", "/version/"]
  # Credentials: never their bodies (this rule stays above any more detailed one).
  - level: Metadata
    resources:
      - group: ""
        resources: ["secrets", "configmaps", "serviceaccounts/token"]
      - group: authentication.k8s.io
        resources: ["tokenreviews"]
  # Everything else: who, what, when and the outcome.
  - level: Metadata
"""


def write_default(path: Path) -> Path:
    """Write the default policy once (an operator's edits to it are kept)."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(DEFAULT_POLICY)
    return path
