"""Query options of the pod connect subresources, decoded and validated as kube does.

``pods/log`` reads a ``PodLogOptions`` from the query (a value that does not convert is a 400
with Go's conversion error; ``ValidatePodLogOptions`` failures a 422 naming the field) before it
looks at the pod. Booleans follow apimachinery's query conversion: only absent, ``false`` and
``0`` are false.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlencode

from genericapi.apimachinery import errors as apierrors

Query = list[tuple[str, str]]


def first(query: Query, key: str) -> str | None:
    return next((v for k, v in query if k == key), None)


def flag(query: Query, key: str) -> bool:
    value = first(query, key)
    return value is not None and value not in ("false", "0")


def _int(query: Query, key: str) -> int | None:
    value = first(query, key)
    if value is None or value == "":
        return None
    try:
        return int(value, 10)
    except ValueError:
        raise apierrors.bad_request(f'strconv.ParseInt: parsing "{value}": invalid syntax') from None


def _time(query: Query, key: str) -> str | None:
    value = first(query, key)
    if value is None or value == "":
        return None
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise apierrors.bad_request(
            f'parsing time "{value}" as "2006-01-02T15:04:05Z07:00": cannot parse "{value}" as "2006"') from None
    return value


@dataclass(frozen=True, slots=True)
class PodLogOptions:
    container: str
    follow: bool
    previous: bool
    timestamps: bool
    since_seconds: int | None
    since_time: str | None
    tail_lines: int | None
    limit_bytes: int | None

    def kubelet_query(self) -> str:
        """The query kube's ``LogLocation`` passes to the kubelet's ``/containerLogs``."""
        params: list[tuple[str, str]] = []
        for key, on in (("follow", self.follow), ("previous", self.previous), ("timestamps", self.timestamps)):
            if on:
                params.append((key, "true"))
        for key, value in (("sinceSeconds", self.since_seconds), ("sinceTime", self.since_time),
                           ("tailLines", self.tail_lines), ("limitBytes", self.limit_bytes)):
            if value is not None:
                params.append((key, str(value)))
        return urlencode(sorted(params))


def pod_log_options(pod_name: str, query: Query) -> PodLogOptions:
    """Decode and validate; raises kube's 400 or 422."""
    opts = PodLogOptions(
        container=first(query, "container") or "",
        follow=flag(query, "follow"), previous=flag(query, "previous"), timestamps=flag(query, "timestamps"),
        since_seconds=_int(query, "sinceSeconds"), since_time=_time(query, "sinceTime"),
        tail_lines=_int(query, "tailLines"), limit_bytes=_int(query, "limitBytes"),
    )
    errs: list[apierrors.FieldError] = []
    if opts.tail_lines is not None and opts.tail_lines < 0:
        errs.append(apierrors.invalid("tailLines", opts.tail_lines, "must be greater than or equal to 0"))
    if opts.limit_bytes is not None and opts.limit_bytes < 1:
        errs.append(apierrors.invalid("limitBytes", opts.limit_bytes, "must be greater than 0"))
    if opts.since_seconds is not None and opts.since_time is not None:
        errs.append(apierrors.forbidden("", "at most one of `sinceTime` or `sinceSeconds` may be specified"))
    elif opts.since_seconds is not None and opts.since_seconds < 1:
        errs.append(apierrors.invalid("sinceSeconds", opts.since_seconds, "must be greater than 0"))
    if errs:
        raise apierrors.invalid_object("", "PodLogOptions", pod_name, errs)
    return opts
