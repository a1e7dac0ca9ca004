"""Go's flag syntax for kube's boolean flags, so every service parses them as kube-apiserver does.

kube's bool flags (``--anonymous-auth``, ``--enable-bootstrap-token-auth``, ...) take
``strconv.ParseBool`` values and may be given bare (``--flag`` is true); a value Go refuses stops
the binary with Go's wording. ``parse_bool`` is the argparse ``type`` for such a flag (with
``nargs="?", const=True``).
"""

from __future__ import annotations

import argparse

_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def parse_bool(text: str) -> bool:
    """``strconv.ParseBool``; anything else is argparse's error with Go's text."""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise argparse.ArgumentTypeError(f'invalid argument "{text}": strconv.ParseBool: parsing "{text}": invalid syntax')
