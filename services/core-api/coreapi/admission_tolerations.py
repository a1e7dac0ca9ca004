"""The DefaultTolerationSeconds admission plugin (kube-apiserver's, enabled by default).

Every Pod written (create and update, not its subresources' writes in kube) that does not already
tolerate the node lifecycle controller's NoExecute taints for not-ready and unreachable nodes gets
a toleration for each, bounded to 300 seconds, so its pods are evicted five minutes after a node
goes away rather than at once. A toleration with an empty key or an empty effect counts as
tolerating them, as the plugin decides.
"""

from __future__ import annotations

from typing import Any

from genericapi.apimachinery import admission as adm

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
#: kube-apiserver's --default-not-ready-toleration-seconds and --default-unreachable-toleration-seconds.
DEFAULT_TOLERATION_SECONDS = 300


def _tolerates(toleration: Any, taint_key: str) -> bool:
    if not isinstance(toleration, dict):
        return False
    key, effect = toleration.get("key") or "", toleration.get("effect") or ""
    return key in ("", taint_key) and effect in ("", "NoExecute")


def add_default_tolerations(spec: dict[str, Any], seconds: int = DEFAULT_TOLERATION_SECONDS) -> None:
    """Append the not-ready and unreachable tolerations the Pod spec lacks."""
    tolerations = spec.get("tolerations")
    if tolerations is None:
        tolerations = []
    elif not isinstance(tolerations, list):
        return  # malformed: left for validation to report
    added = [{"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}
             for key in (NOT_READY, UNREACHABLE) if not any(_tolerates(t, key) for t in tolerations)]
    if added:
        spec["tolerations"] = tolerations + added


class DefaultTolerationSeconds:
    """The mutating plugin (stateless)."""

    def __init__(self, seconds: int = DEFAULT_TOLERATION_SECONDS) -> None:
        self.seconds = seconds

    def handles(self, operation: str) -> bool:
        return operation in (adm.CREATE, adm.UPDATE)

    def applies_to(self, group: str, resource: str, subresource: str) -> bool:
        """Pods only (their main resource): the admission chain skips this plugin for anything else."""
        return (group, resource) == ("", "pods") and not subresource

    async def admit(self, attrs: adm.Attributes) -> None:
        obj = attrs.obj
        if obj is None or attrs.subresource or (attrs.group, attrs.resource) != ("", "pods"):
            return
        spec = obj.get("spec")
        if isinstance(spec, dict):
            add_default_tolerations(spec, self.seconds)
