"""Stopping background tasks: cancel, then wait until the task has really finished.

Informers, the controller manager, discovery pollers and control-plane streams all own one
long-running task; ``stop()`` must not return while it still runs (or its cancellation leaks).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any


async def cancel_and_wait(task: asyncio.Task[Any] | None) -> None:
    """Cancel ``task`` (if any) and await it, swallowing its ``CancelledError``."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
