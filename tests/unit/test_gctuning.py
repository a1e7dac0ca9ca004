"""The GC thresholds a service applies after start-up (genericapi.server.gctuning)."""

from __future__ import annotations

import asyncio
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


async def test_on_a_running_loop_the_freeze_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """A service's start-up: thresholds at once, the collection and freeze after the delay."""
    saved = gc.get_threshold()
    monkeypatch.delenv("KUBECHAIN_GC_THRESHOLD", raising=False)
    gc.unfreeze()
    try:
        timer = gctuning.tune_after_start(delay=0.05)
        assert timer is not None
        assert gc.get_threshold() == gctuning.DEFAULT_THRESHOLDS
        assert gc.get_freeze_count() == 0
        await asyncio.sleep(0.2)
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*saved)


async def test_zero_schedules_nothing_on_a_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECHAIN_GC_THRESHOLD", "0")
    assert gctuning.tune_after_start(delay=0.01) is None
