"""The GC thresholds a service applies after start-up (genericapi.server.gctuning)."""

from __future__ import annotations

import gc

import pytest
from genericapi.server import gctuning


def test_default_and_named_thresholds() -> None:
    assert gctuning.thresholds_from_env(None) == gctuning.DEFAULT_THRESHOLDS
    assert gctuning.thresholds_from_env("  ") == gctuning.DEFAULT_THRESHOLDS
    assert gctuning.thresholds_from_env("5000,10,10") == (5000, 10, 10)
    assert gctuning.thresholds_from_env("0") is None


@pytest.mark.parametrize("bad", ["1,2", "a,b,c", "1,-2,3", "1,2,3,4"])
def test_bad_thresholds_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        gctuning.thresholds_from_env(bad)


def test_tuning_freezes_and_sets_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    saved = gc.get_threshold()
    monkeypatch.delenv("KUBECHAIN_GC_THRESHOLD", raising=False)
    try:
        gctuning.tune_after_start()
        assert gc.get_threshold() == gctuning.DEFAULT_THRESHOLDS
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*saved)


def test_zero_leaves_the_collector_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    saved = gc.get_threshold()
    monkeypatch.setenv("KUBECHAIN_GC_THRESHOLD", "0")
    gctuning.tune_after_start()
    assert gc.get_threshold() == saved
