"""The CEL bindings load without their REPL (start-up CPU), and the REPL still loads when asked for."""

from __future__ import annotations

import subprocess
import sys

_PROBE = """
import sys
from genericapi.apimachinery.cel.binding import celrust
assert celrust.evaluate("1 + 2") == 3
print(sorted(m for m in ("cel.cli", "prompt_toolkit", "typer", "rich") if m in sys.modules))
import cel.cli
print("prompt_toolkit" in sys.modules, type(cel.cli.__dict__.get("__file__")).__name__)
"""


def test_the_bindings_load_without_the_repl_which_still_loads_on_request() -> None:
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True).stdout
    first, second = out.strip().splitlines()
    assert first == "[]"
    assert second == "True str"
