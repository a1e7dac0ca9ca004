"""Run one admission plugin the way the store's chain runs it (for plugin unit tests)."""

from __future__ import annotations

from typing import Any

from genericapi.apimachinery.admission import MutatingPlugin
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.registry.admissionchain import attributes


async def run_admit(plugin: MutatingPlugin, operation: str, info: ResourceInfo, namespace: str,
                    obj: dict[str, Any] | None, old: dict[str, Any] | None = None) -> None:
    """The mutating phase with this one plugin (nothing when it does not handle the operation)."""
    name = str(((obj or old or {}).get("metadata") or {}).get("name") or "")
    attrs = attributes(info, operation, namespace, name, obj, old)
    if plugin.handles(operation):
        await plugin.admit(attrs)
