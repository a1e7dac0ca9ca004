"""Server-side Table printing (``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``).

kubectl asks the server to render ``kubectl get`` output; the server answers a ``meta.k8s.io/v1``
Table whose columns and cells come from the kind's printer (its strategy's ``table_printer``) and,
for kinds without one, from the default convertor (``Name`` + ``Created At``), exactly as
kube-apiserver's ``TableConvertor`` and ``rest.NewDefaultTableConvertor`` do.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from genericapi.apimachinery.errors import bad_request
from genericapi.apimachinery.tables_common import (
    META,
    Printer,
    RowResult,
    column,
    doc,
    get,
    human_duration,
    name_column,
    rfc3339,
    since,
)

__all__ = [
    "INCLUDE_METADATA",
    "INCLUDE_NONE",
    "INCLUDE_OBJECT",
    "build_table",
    "human_duration",
    "partial_object_metadata",
    "since",
    "table_columns",
    "table_row",
    "table_row_cells",
]

INCLUDE_NONE = "None"
INCLUDE_METADATA = "Metadata"
INCLUDE_OBJECT = "Object"
_INCLUDE_VALUES = (INCLUDE_NONE, INCLUDE_METADATA, INCLUDE_OBJECT)


def _default_columns() -> list[dict[str, Any]]:
    return [name_column(), column("Created At", "date", doc(META, "creationTimestamp"))]


def table_columns(group: str, resource: str, printer: Printer | None = None) -> list[dict[str, Any]]:
    """The ``columnDefinitions`` of a kind's ``printer`` (a fresh list the caller may modify);
    without one, the default Name / Created At columns."""
    columns = printer.columns if printer is not None else _default_columns()
    return [dict(c) for c in columns]


def _now(now: datetime | None) -> datetime:
    if now is None:
        return datetime.now(UTC)
    return now if now.tzinfo is not None else now.replace(tzinfo=UTC)


def _row(group: str, resource: str, obj: Mapping[str, Any], now: datetime,
         printer: Printer | None = None) -> RowResult:
    if printer is None:
        return RowResult([get(obj, "metadata", "name") or "",
                          rfc3339(get(obj, "metadata", "creationTimestamp"))])
    result = printer.cells(obj, now)
    return result if isinstance(result, RowResult) else RowResult(result)


def table_row_cells(group: str, resource: str, obj: Mapping[str, Any],
                    now: datetime | None = None, printer: Printer | None = None) -> list[Any]:
    """The cells of one object's row, one per column of :func:`table_columns`."""
    return _row(group, resource, obj, _now(now), printer).cells


def partial_object_metadata(obj: Mapping[str, Any], api_version: str = "meta.k8s.io/v1") -> dict[str, Any]:
    """What ``includeObject=Metadata`` embeds: the object's full metadata, nothing else."""
    return {"kind": "PartialObjectMetadata", "apiVersion": api_version,
            "metadata": copy.deepcopy(dict(obj.get("metadata") or {}))}


def table_row(group: str, resource: str, obj: Mapping[str, Any], include_object: str = INCLUDE_METADATA,
              now: datetime | None = None, table_api_version: str = "meta.k8s.io/v1",
              printer: Printer | None = None) -> dict[str, Any]:
    """One ``TableRow`` (useful for watch events with ``as=Table``)."""
    result = _row(group, resource, obj, _now(now), printer)
    row: dict[str, Any] = {"cells": result.cells}
    if result.conditions:
        row["conditions"] = [dict(c) for c in result.conditions]
    if include_object == INCLUDE_METADATA or include_object == "":
        row["object"] = partial_object_metadata(obj, table_api_version)
    elif include_object == INCLUDE_OBJECT:
        row["object"] = obj
    return row


def validate_include_object(include_object: str) -> str:
    """Normalise ``includeObject`` ('' means Metadata); reject unknown values as a 400."""
    if include_object == "":
        return INCLUDE_METADATA
    if include_object not in _INCLUDE_VALUES:
        raise bad_request(f'unrecognized includeObject value: "{include_object}"')
    return include_object


def build_table(group: str, resource: str, objects: Iterable[Mapping[str, Any]],
                include_object: str = INCLUDE_METADATA, now: datetime | None = None,
                list_meta: Mapping[str, Any] | None = None, *, no_headers: bool = False,
                table_api_version: str = "meta.k8s.io/v1", printer: Printer | None = None) -> dict[str, Any]:
    """A complete ``meta.k8s.io/v1`` Table for ``objects`` (``printer``: see :func:`table_columns`).

    ``list_meta`` is the list's metadata (``resourceVersion``, ``continue``,
    ``remainingItemCount``); for a single object pass ``[obj]`` and its resourceVersion is used.
    ``no_headers`` (``TableOptions.noHeaders``) leaves ``columnDefinitions`` empty.
    """
    include = validate_include_object(include_object)
    moment = _now(now)
    object_list = list(objects)
    metadata: dict[str, Any] = {}
    if list_meta is not None:
        for key in ("resourceVersion", "continue", "remainingItemCount"):
            value = list_meta.get(key)
            if value not in (None, ""):
                metadata[key] = value
    elif len(object_list) == 1:
        version = get(object_list[0], "metadata", "resourceVersion")
        if version:
            metadata["resourceVersion"] = version
    return {
        "kind": "Table",
        "apiVersion": table_api_version,
        "metadata": metadata,
        "columnDefinitions": [] if no_headers else table_columns(group, resource, printer),
        "rows": [table_row(group, resource, obj, include, moment, table_api_version, printer)
                 for obj in object_list],
    }
