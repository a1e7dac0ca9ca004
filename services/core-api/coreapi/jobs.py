"""Jobs: the selector and pod-template labels kube-apiserver generates for a new Job.

Unless ``spec.manualSelector`` is true, a Job's pods are tied to it by its uid: the template
gets ``batch.kubernetes.io/controller-uid`` and ``batch.kubernetes.io/job-name`` (and the legacy
``controller-uid`` / ``job-name``), and the selector matches the uid label. kube does this in the
Job strategy's create validation, the first point where the uid exists; so does the store here.
"""

from __future__ import annotations

from typing import Any

CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LEGACY_CONTROLLER_UID_LABEL = "controller-uid"
LEGACY_JOB_NAME_LABEL = "job-name"


def generate_selector(job: dict[str, Any]) -> None:
    """Fill the generated labels and selector in place; labels a user already set are kept."""
    spec = job.get("spec")
    meta = job.get("metadata")
    if not isinstance(spec, dict) or not isinstance(meta, dict) or spec.get("manualSelector") is True:
        return
    template = spec.get("template")
    if not isinstance(template, dict):
        return
    tmeta = template.get("metadata")
    if tmeta is None:
        tmeta = template["metadata"] = {}
    if not isinstance(tmeta, dict):
        return
    labels = tmeta.get("labels")
    if labels is None:
        labels = tmeta["labels"] = {}
    selector = spec.get("selector")
    if selector is None:
        selector = spec["selector"] = {}
    if not isinstance(labels, dict) or not isinstance(selector, dict):
        return
    uid, name = str(meta.get("uid", "")), str(meta.get("name", ""))
    for key, value in ((LEGACY_CONTROLLER_UID_LABEL, uid), (LEGACY_JOB_NAME_LABEL, name),
                       (CONTROLLER_UID_LABEL, uid), (JOB_NAME_LABEL, name)):
        labels.setdefault(key, value)
    match = selector.get("matchLabels")
    if match is None:
        match = selector["matchLabels"] = {}
    if isinstance(match, dict):
        match.setdefault(CONTROLLER_UID_LABEL, uid)
