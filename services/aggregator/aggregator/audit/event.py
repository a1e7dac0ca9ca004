"""One ``audit.k8s.io/v1`` Event, as kube-apiserver writes it.

The request path only fills a small mutable record (``Event``) and hands the backends frozen copies
(``snapshot``); turning one into kube's JSON (``render``: field order, omitempty, MicroTime, the
``objectRef`` completed from the request body, ``responseStatus`` from a Status body, the logged
bodies without managedFields) happens in the backends' writer thread, off the event loop. Pure:
no HTTP framework types.
"""

from __future__ import annotations

import copy
import functools
import ipaddress
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
import yaml
from genericapi.apimachinery import deepjson, k8sproto
from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery.gofmt import go_quote
from genericapi.apimachinery.user import UserInfo

from .policy import LEVEL_RANK, REQUEST, REQUEST_RECEIVED, REQUEST_RESPONSE

API_VERSION = "audit.k8s.io/v1"
#: kube's maxUserAgentLength and the marker it appends when it cuts.
MAX_USER_AGENT = 1024
USER_AGENT_TRUNCATE_SUFFIX = "...TRUNCATED"
#: Requests kube's BasicLongRunningRequestCheck treats as long-running (ResponseStarted is logged).
LONG_RUNNING_VERBS = frozenset({"watch", "proxy"})
LONG_RUNNING_SUBRESOURCES = frozenset({"attach", "exec", "proxy", "log", "portforward"})


@dataclass(slots=True)
class Event:
    """The record one request fills in as it goes through the chain."""

    level: str
    audit_id: str
    request_uri: str
    verb: str
    user: UserInfo | None
    source_ips: list[str]
    user_agent: str
    #: (resource, namespace, name, apiGroup, apiVersion, subresource); None: a non-resource request.
    object_ref: tuple[str, str, str, str, str, str] | None
    received: float
    omit_managed_fields: bool = False
    stage: str = ""
    stage_time: float = 0.0
    impersonated_user: UserInfo | None = None
    #: metav1.Status fields kube records (status, message, reason, details, code).
    response_status: dict[str, Any] | None = None
    annotations: dict[str, str] = field(default_factory=dict)
    #: Raw bodies with their content types, decoded at render time (None: not logged).
    request_body: bytes | None = None
    request_type: str = ""
    response_body: bytes | None = None
    response_type: str = ""
    #: Complete objectRef from the request body (create/update), as kube's LogRequestObject does.
    complete_ref: bool = False
    #: Look for a metav1.Status in the response body (failures, deletes).
    status_from_body: bool = False

    def snapshot(self, stage: str) -> Event:
        """A frozen copy for the backends, at ``stage``, stamped now (RequestReceived: stamped with the
        time the request was received, as kube's processAuditEvent does)."""
        out = copy.copy(self)
        out.stage = stage
        out.stage_time = self.received if stage == REQUEST_RECEIVED else time.time()
        out.annotations = dict(self.annotations)
        if self.response_status is not None:
            out.response_status = dict(self.response_status)
        return out

    def final(self, stage: str) -> Event:
        """The event itself at its last stage (ResponseComplete, Panic, a failed authentication's
        ResponseStarted): nothing changes it afterwards, so the backends need no copy."""
        self.stage = stage
        self.stage_time = time.time()
        return self


def long_running(verb: str, subresource: str) -> bool:
    return verb in LONG_RUNNING_VERBS or subresource in LONG_RUNNING_SUBRESOURCES


def source_ips(headers: Sequence[tuple[bytes, bytes]], peer: str | None) -> list[str]:
    """kube's ``utilnet.SourceIPs``: X-Forwarded-For entries, X-Real-Ip if new, then the peer
    unless it already ends the chain."""
    forwarded = real = ""
    for k, v in headers:
        if k == b"x-forwarded-for" and not forwarded:
            forwarded = v.decode("latin-1")
        elif k == b"x-real-ip" and not real:
            real = v.decode("latin-1")
    ips: list[str] = []
    if forwarded:
        ips.extend(ip for ip in (_ip(p) for p in forwarded.split(",")) if ip is not None)
    if real:
        ip = _ip(real)
        if ip is not None and ip not in ips:
            ips.append(ip)
    remote = _ip(peer) if peer else None
    if remote is not None and (not ips or ips[-1] != remote):
        ips.append(remote)
    return ips


@functools.lru_cache(maxsize=4096)
def _ip(text: str) -> str | None:
    """An address in Go's canonical form (None: not an address); the same few peers ask again and
    again, so the answers are kept."""
    try:
        return str(ipaddress.ip_address(text.strip()))
    except ValueError:
        return None


def user_agent(headers: Sequence[tuple[bytes, bytes]]) -> str:
    for k, v in headers:
        if k == b"user-agent":
            ua = v.decode("latin-1")
            return ua[:MAX_USER_AGENT] + USER_AGENT_TRUNCATE_SUFFIX if len(ua) > MAX_USER_AGENT else ua
    return ""


# -- rendering (in the writer thread) -----------------------------------------------------------------

def micro_time(ts: float) -> str:
    """metav1.MicroTime: UTC, six fraction digits (the seconds' text is kept: events come in runs)."""
    seconds = int(ts)
    micros = round((ts - seconds) * 1e6)
    if micros >= 1_000_000:
        seconds, micros = seconds + 1, micros - 1_000_000
    return f"{_second_text(seconds)}.{micros:06d}Z"


@functools.lru_cache(maxsize=8)
def _second_text(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")


def user_dict(user: UserInfo) -> dict[str, Any]:
    """``authentication.k8s.io/v1`` UserInfo (every field omitempty)."""
    out: dict[str, Any] = {}
    if user.name:
        out["username"] = user.name
    if user.uid:
        out["uid"] = user.uid
    if user.groups:
        out["groups"] = list(user.groups)
    if user.extra:
        out["extra"] = user.extra
    return out


def render(ev: Event) -> dict[str, Any]:
    """The Event as kube's JSON encoder writes it (field order of ``audit.k8s.io/v1`` Event)."""
    request_obj = _decode(ev.request_body, ev.request_type) if ev.request_body else None
    ref = ev.object_ref
    out: dict[str, Any] = {"kind": "Event", "apiVersion": API_VERSION, "level": ev.level, "auditID": ev.audit_id,
                           "stage": ev.stage, "requestURI": ev.request_uri, "verb": ev.verb,
                           "user": user_dict(ev.user) if ev.user is not None else {}}
    if ev.impersonated_user is not None:
        out["impersonatedUser"] = user_dict(ev.impersonated_user)
    if ev.source_ips:
        out["sourceIPs"] = ev.source_ips
    if ev.user_agent:
        out["userAgent"] = ev.user_agent
    if ref is not None:
        out["objectRef"] = _object_ref(ref, request_obj if ev.complete_ref else None)
    status = ev.response_status
    if status is not None:
        if ev.status_from_body and ev.response_body:
            status = _status_from_body(ev.response_body, ev.response_type) or status
        out["responseStatus"] = _status_dict(status)
    rank = LEVEL_RANK[ev.level]
    if rank >= LEVEL_RANK[REQUEST] and request_obj is not None:
        out["requestObject"] = _strip(request_obj) if ev.omit_managed_fields else request_obj
    if rank >= LEVEL_RANK[REQUEST_RESPONSE] and ev.response_body:
        response_obj = _decode(ev.response_body, ev.response_type)
        if response_obj is not None:
            out["responseObject"] = _strip(response_obj) if ev.omit_managed_fields else response_obj
    out["requestReceivedTimestamp"] = micro_time(ev.received)
    out["stageTimestamp"] = micro_time(ev.stage_time)
    if ev.annotations:
        out["annotations"] = ev.annotations
    return out


def _object_ref(ref: tuple[str, str, str, str, str, str], body: Any) -> dict[str, str]:
    resource, namespace, name, group, version, subresource = ref
    uid = resource_version = ""
    if isinstance(body, dict) and isinstance(body.get("metadata"), dict):
        meta = body["metadata"]
        namespace = namespace or _str(meta.get("namespace"))
        name = name or _str(meta.get("name"))
        uid = _str(meta.get("uid"))
        resource_version = _str(meta.get("resourceVersion"))
    out = {"resource": resource, "namespace": namespace, "name": name, "uid": uid, "apiGroup": group,
           "apiVersion": version, "resourceVersion": resource_version, "subresource": subresource}
    return {k: v for k, v in out.items() if v}


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _status_dict(status: dict[str, Any]) -> dict[str, Any]:
    """The bounded copy kube keeps of a Status: metadata (always), status, message, reason, details, code."""
    out: dict[str, Any] = {"metadata": {}}
    for key in ("status", "message", "reason", "details"):
        if status.get(key):
            out[key] = status[key]
    if status.get("code"):
        out["code"] = status["code"]
    return out


def _status_from_body(body: bytes, ctype: str) -> dict[str, Any] | None:
    if b'"Status"' not in body:
        return None
    doc = _decode(body, ctype)
    if isinstance(doc, dict) and doc.get("kind") == "Status":
        return doc
    return None


def _decode(body: bytes, ctype: str) -> Any:
    """A JSON, YAML or Kubernetes protobuf body as its JSON value (kube logs every object as JSON);
    None for anything else (text, broken bodies)."""
    media = ctype.split(";", 1)[0].strip().lower()
    try:
        if "json" in media or (not media and body[:1] in (b"{", b"[")):
            return deepjson.loads(body)
        if "yaml" in media:
            return yaml.safe_load(body)
        if media == k8sproto.CONTENT_TYPE:
            return k8sproto.decode_protobuf_body(body)
    except (orjson.JSONDecodeError, yaml.YAMLError, UnicodeDecodeError, apierrors.APIError):
        return None
    return None


def _strip(obj: Any) -> Any:
    """kube's copyWithoutManagedFields: an object's (or each list item's) metadata.managedFields go."""
    if not isinstance(obj, dict):
        return obj
    out = dict(obj)
    meta = out.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        out["metadata"] = {k: v for k, v in meta.items() if k != "managedFields"}
    items = out.get("items")
    if isinstance(items, list):
        out["items"] = [_strip(i) for i in items]
    return out


def legacy_line(doc: dict[str, Any]) -> str:
    """kube's ``--audit-log-format=legacy`` line (``audit.EventString``) of a rendered event."""
    user = doc.get("user") or {}
    username, groups = "<none>", "<none>"
    if user.get("username"):
        username = user["username"]
        if user.get("groups"):
            groups = ",".join(go_quote(g) for g in user["groups"])
    as_user, as_groups = "<self>", "<lookup>"
    imp = doc.get("impersonatedUser")
    if imp is not None:
        as_user = imp.get("username", "")
        if imp.get("groups") is not None:
            as_groups = ",".join(go_quote(g) for g in imp["groups"])
    namespace = (doc.get("objectRef") or {}).get("namespace") or "<none>"
    status = doc.get("responseStatus")
    response = str(status.get("code", 0)) if status is not None else "<deferred>"
    ip = (doc.get("sourceIPs") or ["<unknown>"])[0]
    seconds, _, fraction = doc["requestReceivedTimestamp"][:-1].partition(".")
    fraction = fraction.rstrip("0")  # Go's RFC3339Nano drops trailing zeros
    received = f"{seconds}.{fraction}Z" if fraction else f"{seconds}Z"
    return (f"{received} AUDIT: id={go_quote(doc['auditID'])} stage={go_quote(doc['stage'])} ip={go_quote(ip)} "
            f"method={go_quote(doc['verb'])} user={go_quote(username)} groups={go_quote(groups)} "
            f"as={go_quote(as_user)} asgroups={go_quote(as_groups)} user-agent={go_quote(doc.get('userAgent', ''))} "
            f"namespace={go_quote(namespace)} uri={go_quote(doc['requestURI'])} response=\"{response}\"")
