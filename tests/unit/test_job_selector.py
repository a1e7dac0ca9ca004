"""A new Job gets its uid-based selector and template labels, unless manualSelector is true."""

from __future__ import annotations

from typing import Any

from coreapi.jobs import generate_selector


def _job(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"template": {"metadata": {"creationTimestamp": None},
                                         "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
    body.update(spec)
    return {"metadata": {"name": "pi", "uid": "u-1"}, "spec": body}


def test_generated_labels_and_selector() -> None:
    job = _job()
    generate_selector(job)
    assert job["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}}
    assert job["spec"]["template"]["metadata"]["labels"] == {
        "batch.kubernetes.io/controller-uid": "u-1", "batch.kubernetes.io/job-name": "pi",
        "controller-uid": "u-1", "job-name": "pi"}


def test_user_labels_are_kept_and_manual_selector_is_left_alone() -> None:
    job = _job()
    job["spec"]["template"]["metadata"]["labels"] = {"app": "x", "job-name": "mine"}
    generate_selector(job)
    assert job["spec"]["template"]["metadata"]["labels"]["app"] == "x"
    assert job["spec"]["template"]["metadata"]["labels"]["job-name"] == "mine"
    manual = _job(manualSelector=True, selector={"matchLabels": {"app": "x"}})
    generate_selector(manual)
    assert manual["spec"]["selector"] == {"matchLabels": {"app": "x"}}
    assert "labels" not in manual["spec"]["template"]["metadata"]


def test_wrong_types_are_left_for_validation() -> None:
    for bad in ({"metadata": {"name": "a", "uid": "u"}, "spec": "x"},
                {"metadata": {"name": "a", "uid": "u"}, "spec": {"template": []}},
                {"metadata": {"name": "a", "uid": "u"}, "spec": {"template": {"metadata": {"labels": []}}}},
                {"metadata": {"name": "a", "uid": "u"}, "spec": {"template": {}, "selector": {"matchLabels": 3}}}):
        generate_selector(bad)  # must not raise
