"""Polling for the integration tests: controllers and the chain settle asynchronously.

One ``eventually`` instead of a copy per test file, so every wait fails with the same message.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def eventually(check: Callable[[], Any], timeout: float = 15, what: str = "") -> Any:
    """Call ``check`` every 0.1 s until it returns something truthy (returned); fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(0.1)
