"""APIService's strategy: kube-aggregator's ``apiServerStrategy`` and its table printer.

On create the status is cleared and a local APIService is marked available at once; a spec
write keeps the stored status and a status write keeps the stored spec (the store does both);
``spec.service`` and the priorities are always serialized, as the Go struct has no omitempty.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from genericapi.apimachinery import validation as schema_validation
from genericapi.apimachinery.errors import FieldError
from genericapi.apimachinery.tables_common import Obj, Printer, age_column, column, name_column, since
from genericapi.registry.meta import now_rfc3339
from genericapi.registry.strategy import Strategy

from . import validation
from .types import DEFAULT_SERVICE_PORT, condition, local_available, set_condition, spec


def _cells(obj: Obj, now: datetime) -> list[Any]:
    svc = (obj.get("spec") or {}).get("service")
    service = f"{svc.get('namespace', '')}/{svc.get('name', '')}" if isinstance(svc, dict) else "Local"
    available = "Unknown"
    cond = condition(dict(obj))
    if cond is not None:
        status = str(cond.get("status") or "")
        reason = str(cond.get("reason") or "")
        available = status if status == "True" or not reason else f"{status} ({reason})"
    meta = obj.get("metadata") or {}
    return [meta.get("name", ""), service, available, since(meta.get("creationTimestamp"), now)]


PRINTER = Printer((
    name_column(),
    column("Service", "string", "The reference to the service that hosts this API endpoint."),
    column("Available", "string", "Whether this service is available."),
    age_column(),
), _cells)


class APIServiceStrategy(Strategy):
    table_printer = PRINTER
    #: kube-aggregator's apiServerStrategy and apiServerStatusStrategy answer false: a PUT of an
    #: APIService (or its status) must name the resourceVersion it replaces.
    allow_unconditional_update = False

    def prepare_for_create(self, obj: dict[str, Any]) -> None:
        obj["status"] = {}
        if not isinstance(spec(obj).get("service"), dict):
            set_condition(obj, local_available(now_rfc3339()))

    def default(self, obj: dict[str, Any]) -> None:
        s = obj.get("spec")
        if not isinstance(s, dict):
            s = obj["spec"] = {}
        s.setdefault("service", None)
        svc = s.get("service")
        if isinstance(svc, dict) and svc.get("port") is None:
            svc["port"] = DEFAULT_SERVICE_PORT  # SetDefaults_ServiceReference
        s.setdefault("groupPriorityMinimum", 0)
        s.setdefault("versionPriority", 0)
        if not isinstance(obj.get("status"), dict):
            obj["status"] = {}

    def _schema(self, obj: dict[str, Any]) -> list[FieldError]:
        if self.schemas is None:
            return []
        info = self.info
        return schema_validation.validate_object(obj, self.schemas, info.group, info.version, info.kind).errors

    def validate(self, obj: dict[str, Any]) -> list[FieldError]:
        errs = self._schema(obj)
        return errs if errs else validation.validate(obj)

    def validate_update(self, new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
        errs = self._schema(new)
        return errs if errs else validation.validate(new) + validation.validate_status(new)
