"""The ``batch/v1`` kinds: Jobs (a generated uid selector, ``status.successful`` selectable) and
CronJobs, as kube's ``pkg/registry/batch`` strategies."""

from __future__ import annotations

from typing import Any

from genericapi.apimachinery.errors import FieldError

from coreapi import jobs
from coreapi.defaults import workloads as defaults
from coreapi.validation import batch

from . import fieldsets, printers_apps
from .base import BuiltinStrategy


class JobStrategy(BuiltinStrategy):
    """Jobs: the uid-based selector and template labels are generated once the uid exists."""

    tracks_generation = True
    field_support = fieldsets.JOB_FIELDS
    table_printer = printers_apps.JOB_PRINTER

    def set_defaults(self, obj: dict[str, Any]) -> None:
        defaults.job(obj)

    def validate_kind(self, obj: dict[str, Any]) -> list[FieldError]:
        return batch.validate_job(obj)

    def validate_kind_update(self, new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
        return batch.validate_job_update(new, old)

    def validate(self, obj: dict[str, Any]) -> list[FieldError]:
        jobs.generate_selector(obj)
        return super().validate(obj)


class CronJobStrategy(BuiltinStrategy):
    tracks_generation = True
    table_printer = printers_apps.CRON_JOB_PRINTER

    def set_defaults(self, obj: dict[str, Any]) -> None:
        defaults.cron_job(obj)

    def validate_kind(self, obj: dict[str, Any]) -> list[FieldError]:
        return batch.validate_cron_job(obj)

    def validate_kind_update(self, new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
        return batch.validate_cron_job(new, old)
