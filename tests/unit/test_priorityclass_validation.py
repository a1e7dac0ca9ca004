"""PriorityClass validation as kube 1.33's: the reserved ``system-`` prefix, the user-definable
ceiling, the preemption policies, and what an update may not change."""

from __future__ import annotations

from typing import Any

import pytest
from coreapi.validation.scheduling import validate_priority_class, validate_priority_class_update


def pc(name: str, value: Any = 1000, **extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "value": value, **extra}


@pytest.mark.parametrize(("obj", "expected"), [
    (pc("system-node-critical", 2000001000), []),
    (pc("system-cluster-critical", 2000000000, globalDefault=False), []),
    (pc("high", 1_000_000_000), []),
    (pc("low", -5, preemptionPolicy="Never"), []),
    (pc("system-foo", 10), ["metadata.name: Forbidden: priority class names with 'system-' prefix are reserved "
                            "for system use only. error: system-foo is not a known system priority class"]),
    (pc("system-node-critical", 5), ["metadata.name: Forbidden: priority class names with 'system-' prefix are "
                                     "reserved for system use only. error: value of system-node-critical "
                                     "PriorityClass must be 2000001000"]),
    (pc("system-cluster-critical", 2000000000, globalDefault=True),
     ["metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. "
      "error: globalDefault of system-cluster-critical PriorityClass must be false"]),
    (pc("too-high", 1_000_000_001), ["value: Forbidden: maximum allowed value of a user defined priority is "
                                     "1000000000"]),
    (pc("odd", 1, preemptionPolicy="Sometimes"),
     ['preemptionPolicy: Unsupported value: "Sometimes": supported values: "Never", "PreemptLowerPriority"']),
])
def test_create(obj: dict[str, Any], expected: list[str]) -> None:
    assert [str(e) for e in validate_priority_class(obj)] == expected


def test_update_may_not_change_value_or_policy() -> None:
    old = pc("x", 10, preemptionPolicy="PreemptLowerPriority")
    assert validate_priority_class_update(pc("x", 10, preemptionPolicy="PreemptLowerPriority",
                                             description="new words"), old) == []
    errs = [str(e) for e in validate_priority_class_update(pc("x", 11, preemptionPolicy="Never"), old)]
    assert errs == ["value: Forbidden: may not be changed in an update.",
                    'preemptionPolicy: Invalid value: "Never": field is immutable']
