"""Pods: graceful deletion, as kube-apiserver's pod strategy (``CheckGracefulDelete``) does it.

A Pod that runs somewhere gets time to shut down: DELETE sets ``deletionTimestamp`` (now + the
grace period) and ``deletionGracePeriodSeconds`` and the Pod stays until its kubelet (or a
``--grace-period=0 --force`` delete) removes it. A Pod that was never scheduled
(``spec.nodeName`` empty) or has finished (Succeeded/Failed) has nothing to stop: grace 0, gone
at once.
"""

from __future__ import annotations

from typing import Any

from genericapi.registry.options import DeleteOptions

#: What defaulting puts in spec.terminationGracePeriodSeconds (DefaultTerminationGracePeriodSeconds).
DEFAULT_GRACE_SECONDS = 30


def grace_period(obj: dict[str, Any], opts: DeleteOptions) -> int:
    """The Pod strategy's ``check_graceful_delete``: the request's grace period, else the Pod's
    ``terminationGracePeriodSeconds``; 0 for Pods that never ran or have finished."""
    spec = obj.get("spec") or {}
    if opts.grace_period_seconds is not None:
        period = opts.grace_period_seconds
    else:
        configured = spec.get("terminationGracePeriodSeconds")
        period = configured if isinstance(configured, int) else DEFAULT_GRACE_SECONDS
    if not spec.get("nodeName"):
        period = 0  # never scheduled: nothing runs, delete at once
    if (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        period = 0  # already terminated
    return 1 if period < 0 else period
