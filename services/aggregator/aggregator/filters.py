"""The gateway's handler chain: kube's ``DefaultBuildHandlerChain``, its steps and their ASGI forms.

kube-apiserver wraps its mux in filters, outermost first: request info, tracing and latency,
authentication, audit, impersonation, priority and fairness, authorization. The gateway keeps
that order, each concern one step here (``parse_info``, ``authenticate``, ``impersonate``,
``authorize``, the in-flight watermark) or in its own module (audit, flow control, tracing), so that
every step reads the one ``RequestInfo`` and the one user parsed here instead of re-deriving them.
The gateway runs the steps in one pass over one request (gatewaychain.py, ``build_handler_chain``);
each also has an ASGI form (``WithAuthentication``, ...) for apps that wrap one filter, and
``build_nested_chain`` nests them all as the reference the one pass is tested against. Every
request goes through the chain, the shell's paths (health, version, metrics, OpenAPI) included, as
kube authenticates before every handler.

Per-request facts live in the ASGI scope under ``kubechain.*`` keys; read them with
``request_info_of`` and ``user_of``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Protocol

from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery.authorization import Attributes, Authorizer, Decision, forbidden
from genericapi.apimachinery.requestinfo import RequestInfo, RequestInfoError, parse_request_info
from genericapi.apimachinery.user import UserInfo
from genericapi.server import metrics
from genericapi.server.tracing import ServerSpans, Tracing, trust_privileged
from starlette.types import ASGIApp, Receive, Scope, Send

from . import impersonation
from .audit import context as audit_context
from .auth import Authenticator

if TYPE_CHECKING:
    from .audit.filter import Auditor
    from .flowcontrol.filter import Seat

#: Paths every authenticated client (system:anonymous too) may read without an authorization check:
#: exactly the URLs of kube's system:public-info-viewer, which its bootstrap policy binds to
#: system:authenticated and system:unauthenticated, and they must answer before the authorizer's
#: caches have synced. Anything else is asked, named health checks (``/readyz/etcd``) and
#: ``/healthz/`` too: on kube only system:masters (or a binding for them) may read those.
PUBLIC_PATHS = frozenset({"/healthz", "/livez", "/readyz", "/version", "/version/"})

REQUEST_INFO = "kubechain.request_info"
USER = "kubechain.user"


def request_info_of(scope: Scope) -> RequestInfo | None:
    """The request in Kubernetes terms (None: a path kube cannot interpret)."""
    info: RequestInfo | None = scope.get(REQUEST_INFO)
    return info


def user_of(scope: Scope) -> UserInfo | None:
    """Who is asking, once authentication (and impersonation) has run."""
    user: UserInfo | None = scope.get(USER)
    return user


def is_public(path: str) -> bool:
    """One of PUBLIC_PATHS, as kube's RBAC matches a non-resource URL: exactly."""
    return path in PUBLIC_PATHS


async def send_status(send: Send, err: apierrors.APIError) -> None:
    """Answer with the error's ``metav1.Status`` (and its headers: ``Retry-After``)."""
    body = err.body()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers.extend((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in err.headers.items())
    await send({"type": "http.response.start", "status": err.code, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


#: Requests' RequestInfo by (method, path, query): clients repeat the same requests (a controller's
#: GETs and watches, kubectl's discovery), and RequestInfo is frozen. Cleared when full.
_INFOS: dict[tuple[str, str, bytes], RequestInfo | None] = {}
INFO_CACHE_SIZE = 4096
#: Longest path and query kept (so the cache holds at most a few MB whatever the URLs).
INFO_KEY_BYTES = 512


def parse_info(scope: Scope) -> RequestInfo | None:
    """kube's WithRequestInfo: the path and query read once, at the first hop (None: a path kube
    cannot interpret), kept in the scope for everything after. A request seen before (same method,
    path and query) gets the RequestInfo it got then (issue 15: CPU per request)."""
    key = (scope["method"], scope["path"], scope.get("query_string", b""))
    try:
        info = _INFOS[key]
    except KeyError:
        try:
            info = parse_request_info(key[0], key[1], key[2].decode("latin-1"))
        except RequestInfoError:
            info = None
        if len(key[1]) + len(key[2]) <= INFO_KEY_BYTES:  # a long URL is parsed each time, never kept
            if len(_INFOS) >= INFO_CACHE_SIZE:
                _INFOS.clear()
            _INFOS[key] = info
    scope[REQUEST_INFO] = info
    return info


def authenticate(authenticator: Authenticator, scope: Scope) -> UserInfo | None:
    """kube's WithAuthentication: the user (kept in the scope) with kube's authentication metrics, or
    None: answer 401 (see ``WithAuthentication``)."""
    started = time.perf_counter()
    user = authenticator.authenticate(scope)
    if user is None:
        metrics.record_authentication("failure", time.perf_counter() - started)
        return None
    metrics.record_authentication("success", time.perf_counter() - started, user.name)
    scope[USER] = user
    return user


async def impersonate(scope: Scope, user: UserInfo, authorizer: Authorizer | None) -> UserInfo:
    """kube's WithImpersonation (impersonation.py): the user to serve the request as, kept in the
    scope; APIError (403, 400) when not allowed."""
    asked = impersonation.requested(scope["headers"])
    if asked:
        user = scope[USER] = await impersonation.impersonate(user, asked, authorizer)
    return user


async def authorize(authorizer: Authorizer, scope: Scope, info: RequestInfo | None,
                    user: UserInfo) -> apierrors.APIError | None:
    """kube's WithAuthorization: None when allowed, else the 403 to answer (in kube's words); the
    decision is in the audit event and kube's authorization metrics. The public paths are never asked."""
    if is_public(scope["path"]):
        return None
    attributes = authorization_attributes(scope, info, user)
    started = time.perf_counter()
    decision, reason = await authorizer.authorize(attributes)
    audit_context.add_authorization(scope, decision is Decision.ALLOW, reason)
    metrics.record_authorization(_DECISIONS[decision], time.perf_counter() - started)
    if decision is not Decision.ALLOW:
        return forbidden(attributes, reason)
    return None


class WithRequestInfo:
    """kube's WithRequestInfo as ASGI (``parse_info``)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            parse_info(scope)
        await self.app(scope, receive, send)


class WithAuthentication:
    """kube's WithAuthentication as ASGI (``authenticate``): a request the authenticator gives no
    user is a 401 on every path. That is a credential that does not authenticate (a bad bearer
    token on ``/version`` too), and with ``--anonymous-auth=false`` a request without credentials,
    health and version included (kube has no exception for them: its probes then need credentials).
    With anonymous authentication (the default) such a request is ``system:anonymous``, left to the
    authorizer."""

    def __init__(self, app: ASGIApp, authenticator: Authenticator) -> None:
        self.app = app
        self.authenticator = authenticator

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if authenticate(self.authenticator, scope) is None:
            await send_status(send, apierrors.unauthorized())
            return
        await self.app(scope, receive, send)


class WithImpersonation:
    """kube's WithImpersonation as ASGI (``impersonate``)."""

    def __init__(self, app: ASGIApp, authorizer: Authorizer | None) -> None:
        self.app = app
        self.authorizer = authorizer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            try:
                await impersonate(scope, scope[USER], self.authorizer)
            except apierrors.APIError as err:
                await send_status(send, err)
                return
        await self.app(scope, receive, send)


class WithAuthorization:
    """kube's WithAuthorization as ASGI (``authorize``)."""

    def __init__(self, app: ASGIApp, authorizer: Authorizer) -> None:
        self.app = app
        self.authorizer = authorizer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refused = await authorize(self.authorizer, scope, request_info_of(scope), scope[USER])
            if refused is not None:
                await send_status(send, refused)
                return
        await self.app(scope, receive, send)


#: kube's authorization_attempts_total result of each decision.
_DECISIONS = {Decision.ALLOW: "allowed", Decision.DENY: "denied", Decision.NO_OPINION: "no-opinion"}


class WithInflightWatermark:
    """The in-flight watermarks of kube's max-in-flight filter (``apiserver_current_inflight_requests``
    by ``request_kind``), where kube keeps them: around flow control, long-running requests not
    counted."""

    def __init__(self, app: ASGIApp, watermark: metrics.InflightWatermark | None = None) -> None:
        self.app = app
        self.watermark = watermark or metrics.InflightWatermark()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        info = request_info_of(scope) if scope["type"] == "http" else None
        if scope["type"] != "http" or (info is not None and long_running(info)):
            await self.app(scope, receive, send)
            return
        kind = self.watermark.kind(info, scope["method"])
        self.watermark.started(kind)
        try:
            await self.app(scope, receive, send)
        finally:
            self.watermark.finished(kind)


#: kube's BasicLongRunningRequestCheck: these verbs and subresources hold a request open.
_LONG_RUNNING_VERBS = frozenset({"watch", "proxy"})
_LONG_RUNNING_SUBRESOURCES = frozenset({"attach", "exec", "proxy", "log", "portforward"})


def long_running(info: RequestInfo) -> bool:
    """kube's BasicLongRunningRequestCheck (not counted in flight)."""
    return info.verb in _LONG_RUNNING_VERBS or (info.is_resource_request
                                                and info.subresource in _LONG_RUNNING_SUBRESOURCES)



def authorization_attributes(scope: Scope, info: RequestInfo | None, user: UserInfo) -> Attributes:
    """What the authorizer is asked, from the one RequestInfo (a path kube cannot read as a resource
    is asked as a non-resource request)."""
    if info is None or not info.is_resource_request:
        verb = info.verb if info is not None else scope["method"].lower()
        return Attributes(user, verb, False, path=scope["path"])
    return Attributes(user, info.verb, True, namespace=info.namespace, api_group=info.api_group,
                      api_version=info.api_version, resource=info.resource, subresource=info.subresource,
                      name=info.name, path=scope["path"])


class FlowFilter(Protocol):
    """APF's filter (flowcontrol/filter.py): as ASGI, and its one step for the one-pass chain."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None: ...

    async def admit(self, scope: Scope, info: RequestInfo | None, user: UserInfo, send: Send) -> Seat | None: ...


class FlowControl(Protocol):
    """API Priority and Fairness (flowcontrol/wiring.py): its filter and its debug dumps at the mux."""

    def around_mux(self, mux: ASGIApp) -> ASGIApp: ...

    def filter(self, handler: ASGIApp) -> FlowFilter: ...


def build_handler_chain(mux: ASGIApp, authenticator: Authenticator, authorizer: Authorizer | None,
                        flow_control: FlowControl | None = None, tracing: Tracing | None = None,
                        auditor: Auditor | None = None, api: ASGIApp | None = None) -> ASGIApp:
    """The gateway's chain around ``mux``: one pass over one request (gatewaychain.py) in kube's order
    (None: AlwaysAllow, no authorization step at all; no flow control: APF off; no tracing: no span).
    ``api``: what the mux hands resource paths to, called straight for them."""
    from .gatewaychain import OnePassChain  # here: it imports this module

    return OnePassChain(mux, authenticator, authorizer, flow_control, tracing, auditor, api)


def build_nested_chain(mux: ASGIApp, authenticator: Authenticator, authorizer: Authorizer | None,
                       flow_control: FlowControl | None = None, tracing: Tracing | None = None,
                       auditor: Auditor | None = None) -> ASGIApp:
    """The same chain as nested ASGI filters, innermost first as kube builds it: the one-pass chain's
    reference (tests compare the two answer for answer)."""
    from .audit.filter import WithAudit, WithAuditInit  # here: audit.filter imports this module

    handler: ASGIApp = mux
    if flow_control is not None:
        handler = flow_control.around_mux(handler)  # /debug/api_priority_and_fairness/*, authorized
    if authorizer is not None:
        handler = WithAuthorization(handler, authorizer)
    if flow_control is not None:
        handler = flow_control.filter(handler)  # kube: inside impersonation, outside authorization
    handler = WithInflightWatermark(handler)
    handler = WithImpersonation(handler, authorizer)
    if auditor is not None:
        handler = WithAudit(handler, auditor)  # kube: inside authentication, outside impersonation
    if tracing is not None:
        # kube's WithTracing sits right inside authentication: whether the caller's traceparent is
        # continued depends on who the caller is. No configuration: no tracing filter at all.
        handler = ServerSpans(handler, tracing, trust_privileged(user_of), request_info_of)
    handler = WithAuthentication(handler, authenticator)
    handler = WithAuditInit(handler, auditor)  # Audit-ID on every response; failed authentication audited
    return WithRequestInfo(handler)
