"""Secrets: ``stringData`` is write-only, merged into ``data`` before the Secret is stored.

kube-apiserver does this while decoding a v1 Secret: every ``stringData`` entry is base64-encoded
into ``data`` (replacing a ``data`` entry of the same key) and ``stringData`` itself is never
stored or returned.
"""

from __future__ import annotations

import base64
from typing import Any


def merge_string_data(secret: dict[str, Any]) -> None:
    """Move ``stringData`` into ``data`` in place; values of the wrong type are left for validation."""
    string_data = secret.get("stringData")
    if not isinstance(string_data, dict):
        return
    if not all(isinstance(v, str) for v in string_data.values()):
        return
    data = secret.get("data")
    if data is None:
        data = secret["data"] = {}
    if not isinstance(data, dict):
        return
    for key, value in string_data.items():
        data[key] = base64.b64encode(value.encode()).decode()
    del secret["stringData"]
