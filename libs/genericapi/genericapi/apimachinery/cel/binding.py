"""The CEL interpreter's Python bindings, imported without their interactive shell.

``common-expression-language`` 0.10's package ``__init__`` imports its command-line REPL
(``cel.cli``: typer, prompt_toolkit, rich, pygments) before the compiled module. A server never
uses the REPL, and importing it was about a tenth of each service's start-up CPU (the three
services import CEL at start). While ``cel`` is imported here, ``cel.cli`` is a placeholder in
``sys.modules`` (the import system binds a module it finds there instead of executing it); it is
removed afterwards, so an explicit ``import cel.cli`` elsewhere still loads the real REPL.
Every module of ours imports the bindings from here.
"""

from __future__ import annotations

import sys
import types


def _hold_cli() -> types.ModuleType | None:
    """Put the placeholder in place unless ``cel`` is loaded already (then nothing to do)."""
    if "cel" in sys.modules:
        return None
    placeholder = types.ModuleType("cel.cli", "placeholder while the CEL bindings load (genericapi's cel.binding)")
    sys.modules.setdefault("cel.cli", placeholder)
    return placeholder


def _release_cli(placeholder: types.ModuleType | None) -> None:
    if placeholder is None:
        return
    if sys.modules.get("cel.cli") is placeholder:
        del sys.modules["cel.cli"]
    package = sys.modules.get("cel")
    if package is not None and getattr(package, "cli", None) is placeholder:
        del package.cli


_placeholder = _hold_cli()
try:
    import cel as celrust
finally:
    _release_cli(_placeholder)

__all__ = ["celrust"]
