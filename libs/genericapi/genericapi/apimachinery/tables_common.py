"""Shared pieces of server-side Table printing: columns, ages, cell formats and ``Printer``.

The per-kind printers (core-api's ``coreapi.kinds.printers_*``, the aggregator's APIService and a
CRD's additionalPrinterColumns) use these helpers so every cell is formatted the way
``pkg/printers/internalversion`` formats it (``duration.HumanDuration`` ages, ``<none>``
placeholders, container/image lists).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from genericapi.apimachinery.schemas import SchemaCatalog

Obj = Mapping[str, Any]
Cells = list[Any]


@dataclass(frozen=True)
class RowResult:
    """Cells of one row plus optional row conditions (pods report ``Completed``)."""

    cells: Cells
    conditions: list[dict[str, str]] | None = None


CellsFunc = Callable[[Obj, datetime], "Cells | RowResult"]


@dataclass(frozen=True)
class Printer:
    columns: tuple[dict[str, Any], ...]
    cells: CellsFunc


def printer(columns: Sequence[dict[str, Any]], cells: CellsFunc) -> Printer:
    """A kind's printer: its column definitions and the function filling one row's cells (a
    built-in kind's strategy class in core-api names it; a CRD's come from additionalPrinterColumns)."""
    return Printer(tuple(columns), cells)


# --- column definitions ----------------------------------------------------------------------


def _definitions() -> dict[str, dict[str, Any]]:
    # The catalog validation and OpenAPI use (one parse per process). Importing kubernetes_validate to
    # find the file would load jsonschema with it (~3% of a service's start-up instructions).
    return SchemaCatalog.load("1.33").definitions


@functools.cache
def doc(definition: str, prop: str) -> str:
    """The API documentation of ``definition.prop`` (what Go's ``SwaggerDoc()[prop]`` returns)."""
    try:
        schema = _definitions()[definition]
        return str(schema["properties"][prop].get("description", ""))
    except (KeyError, OSError, RuntimeError, ValueError):
        return ""


META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


def column(name: str, type_: str = "string", description: str = "", *, priority: int = 0,
           format_: str = "") -> dict[str, Any]:
    """One ``TableColumnDefinition`` in the key order kube-apiserver serializes."""
    return {"name": name, "type": type_, "format": format_, "description": description, "priority": priority}


def name_column() -> dict[str, Any]:
    return column("Name", "string", doc(META, "name"), format_="name")


def age_column() -> dict[str, Any]:
    return column("Age", "string", doc(META, "creationTimestamp"))


def containers_columns(selector_description: str | None) -> list[dict[str, Any]]:
    cols = [
        column("Containers", "string", "Names of each container in the template.", priority=1),
        column("Images", "string", "Images referenced by each container in the template.", priority=1),
    ]
    if selector_description is not None:
        cols.append(column("Selector", "string", selector_description, priority=1))
    return cols


# --- time and duration -----------------------------------------------------------------------

_NS_PER_SECOND = 1_000_000_000
_NS_PER_MINUTE = 60 * _NS_PER_SECOND
_NS_PER_HOUR = 60 * _NS_PER_MINUTE


def human_duration(seconds: float) -> str:
    """``k8s.io/apimachinery/pkg/util/duration.HumanDuration`` for a duration in seconds."""
    ns = int(seconds * _NS_PER_SECOND) if isinstance(seconds, float) else int(seconds) * _NS_PER_SECOND
    return _human_duration_ns(ns)


def _trunc_div(a: int, b: int) -> int:
    """Go integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _human_duration_ns(ns: int) -> str:
    whole_seconds = _trunc_div(ns, _NS_PER_SECOND)
    if whole_seconds < -1:
        return "<invalid>"
    if whole_seconds < 0:
        return "0s"
    if whole_seconds < 60 * 2:
        return f"{whole_seconds}s"
    minutes = ns // _NS_PER_MINUTE
    if minutes < 10:
        s = (ns // _NS_PER_SECOND) % 60
        return f"{minutes}m" if s == 0 else f"{minutes}m{s}s"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = ns // _NS_PER_HOUR
    if hours < 8:
        m = minutes % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d" if h == 0 else f"{hours // 24}d{h}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        dy = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if dy == 0 else f"{hours // 24 // 365}y{dy}d"
    return f"{hours // 24 // 365}y"


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 ``metav1.Time``/``MicroTime`` string, or None when unset/unparsable."""
    if not isinstance(value, str) or not value:
        return None
    text = value[:-1] + "+00:00" if value.endswith("Z") else value
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def since(value: Any, now: datetime) -> str:
    """``translateTimestampSince``: age of a timestamp, ``<unknown>`` when unset."""
    then = parse_time(value)
    if then is None:
        return "<unknown>"
    delta = now - then
    ns = (delta.days * 86400 + delta.seconds) * _NS_PER_SECOND + delta.microseconds * 1000
    return _human_duration_ns(ns)


def between(start: Any, end: Any) -> str:
    """HumanDuration of ``end - start`` (job durations)."""
    first, last = parse_time(start), parse_time(end)
    if first is None or last is None:
        return ""
    delta = last - first
    ns = (delta.days * 86400 + delta.seconds) * _NS_PER_SECOND + delta.microseconds * 1000
    return _human_duration_ns(ns)


def rfc3339(value: Any) -> str:
    """``Time.UTC().Format(time.RFC3339)``; the zero time when unset."""
    then = parse_time(value)
    if then is None:
        return "0001-01-01T00:00:00Z"
    return then.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- object access -----------------------------------------------------------------------------


def get(obj: Any, *path: str) -> Any:
    current = obj
    for key in path:
        if not isinstance(current, Mapping):
            return None
        current = current.get(key)
    return current


def text(obj: Any, *path: str) -> str:
    value = get(obj, *path)
    return value if isinstance(value, str) else ""


def integer(obj: Any, *path: str, default: int = 0) -> int:
    value = get(obj, *path)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def items(obj: Any, *path: str) -> list[Any]:
    value = get(obj, *path)
    return value if isinstance(value, list) else []


def mapping(obj: Any, *path: str) -> dict[str, Any]:
    value = get(obj, *path)
    return dict(value) if isinstance(value, Mapping) else {}


def container_cells(containers: list[Any]) -> tuple[str, str]:
    """``layoutContainerCells``: comma-joined names and images."""
    names = ",".join(text(c, "name") for c in containers)
    images = ",".join(text(c, "image") for c in containers)
    return names, images


def name_of(obj: Obj) -> str:
    return text(obj, "metadata", "name")


def age_of(obj: Obj, now: datetime) -> str:
    return since(get(obj, "metadata", "creationTimestamp"), now)
