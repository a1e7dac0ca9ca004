"""kube's CEL authorizer library (``k8s.io/apiserver/pkg/cel/library/authz.go``) over the project's authorizer.

Admission expressions may ask whether the requesting user could do something else:
``authorizer.group('apps').resource('deployments').namespace('ns').check('create').allowed()``,
``authorizer.path('/healthz').check('get')``, ``authorizer.serviceAccount('ns', 'sa')...`` and
``authorizer.requestResource.check('approve')``. The interpreter has no object types, so each
builder is a map tagged with a private key and every builder function takes it as its receiver.

The project's authorizers are async, but RBAC over watch caches and AlwaysAllow never suspend, and
CEL evaluation is synchronous: ``check`` drives the coroutine to completion without an event loop
and reports an authorizer that would block as an errored decision (``Decision.errored()``).
"""

from __future__ import annotations

import threading
from collections.abc import Coroutine
from typing import Any

from genericapi.apimachinery.authorization import Attributes as AuthzAttributes
from genericapi.apimachinery.authorization import Authorizer, Decision
from genericapi.apimachinery.user import UserInfo

from .library import CELFunctionError

_TAG = "__kubechain_authz__"
_current = threading.local()  # (authorizer, user) of the evaluation running on this thread


def bind(authorizer: Authorizer | None, user: UserInfo) -> None:
    """Set who ``check`` asks about for evaluations on this thread (synchronous, so never shared)."""
    _current.value = (authorizer, user)


def authorizer_value(request_resource: dict[str, str] | None = None) -> dict[str, Any]:
    """The ``authorizer`` variable: an Authorizer for the requesting user, with ``requestResource``
    (a ResourceCheck of the request's group/resource/subresource/namespace/name) when given."""
    value: dict[str, Any] = {_TAG: "Authorizer"}
    if request_resource is not None:
        value["requestResource"] = {_TAG: "ResourceCheck", **request_resource}
    return value


def _kind(value: Any) -> str:
    return str(value.get(_TAG, "")) if isinstance(value, dict) else ""


def _need(value: Any, kind: str, fn: str) -> dict[str, Any]:
    if _kind(value) != kind:
        raise CELFunctionError(f"no such overload: {fn}")
    return value  # type: ignore[no-any-return]


def _str(value: Any, fn: str) -> str:
    if not isinstance(value, str):
        raise CELFunctionError(f"no such overload: {fn}")
    return value


def group(recv: Any, name: Any) -> dict[str, Any]:
    base = _need(recv, "Authorizer", "group")
    return {_TAG: "GroupCheck", "group": _str(name, "group"), "sa": base.get("sa")}


def path(recv: Any, value: Any) -> dict[str, Any]:
    base = _need(recv, "Authorizer", "path")
    return {_TAG: "PathCheck", "path": _str(value, "path"), "sa": base.get("sa")}


def service_account(recv: Any, namespace: Any, name: Any) -> dict[str, Any]:
    _need(recv, "Authorizer", "serviceAccount")
    return {_TAG: "Authorizer", "sa": [_str(namespace, "serviceAccount"), _str(name, "serviceAccount")]}


def resource(recv: Any, name: Any) -> dict[str, Any]:
    base = _need(recv, "GroupCheck", "resource")
    return {_TAG: "ResourceCheck", "group": base["group"], "resource": _str(name, "resource"), "sa": base.get("sa")}


def _with(recv: Any, key: str, value: Any, fn: str) -> dict[str, Any]:
    base = _need(recv, "ResourceCheck", fn)
    return {**base, key: _str(value, fn)}


def subresource(recv: Any, value: Any) -> dict[str, Any]:
    return _with(recv, "subresource", value, "subresource")


def namespace(recv: Any, value: Any) -> dict[str, Any]:
    return _with(recv, "namespace", value, "namespace")


def name(recv: Any, value: Any) -> dict[str, Any]:
    return _with(recv, "name", value, "name")


def field_selector(recv: Any, value: Any) -> dict[str, Any]:
    return _with(recv, "fieldSelector", value, "fieldSelector")


def label_selector(recv: Any, value: Any) -> dict[str, Any]:
    return _with(recv, "labelSelector", value, "labelSelector")


def _run(coro: Coroutine[Any, Any, tuple[Decision, str]]) -> tuple[Decision, str]:
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("the authorizer cannot answer during CEL evaluation")


def _user(sa: Any, user: UserInfo) -> UserInfo:
    if not sa:
        return user
    ns, sa_name = sa
    return UserInfo(f"system:serviceaccount:{ns}:{sa_name}", ("system:serviceaccounts", f"system:serviceaccounts:{ns}"))


def check(recv: Any, verb: Any) -> dict[str, Any]:
    kind = _kind(recv)
    if kind not in ("PathCheck", "ResourceCheck"):
        raise CELFunctionError("no such overload: check")
    verb = _str(verb, "check")
    authorizer, user = getattr(_current, "value", (None, UserInfo("")))
    user = _user(recv.get("sa"), user)
    if kind == "PathCheck":
        attrs = AuthzAttributes(user=user, verb=verb, resource_request=False, path=str(recv["path"]))
    else:
        attrs = AuthzAttributes(user=user, verb=verb, resource_request=True,
                                namespace=str(recv.get("namespace", "")), api_group=str(recv.get("group", "")),
                                resource=str(recv.get("resource", "")), subresource=str(recv.get("subresource", "")),
                                name=str(recv.get("name", "")))
    if authorizer is None:  # no authorizer reachable: kube's AlwaysAllow
        return {_TAG: "Decision", "decision": "allow", "reason": "", "error": ""}
    try:
        decision, reason = _run(authorizer.authorize(attrs))
    except Exception as e:
        return {_TAG: "Decision", "decision": "deny", "reason": "", "error": str(e)}
    word = {Decision.ALLOW: "allow", Decision.DENY: "deny"}.get(decision, "noOpinion")
    return {_TAG: "Decision", "decision": word, "reason": reason, "error": ""}


def allowed(recv: Any) -> bool:
    return _need(recv, "Decision", "allowed")["decision"] == "allow"


def reason(recv: Any) -> str:
    return str(_need(recv, "Decision", "reason")["reason"])


def errored(recv: Any) -> bool:
    return bool(_need(recv, "Decision", "errored")["error"])


def error(recv: Any) -> str:
    return str(_need(recv, "Decision", "error")["error"])


FUNCTIONS: dict[str, Any] = {
    "group": group, "path": path, "serviceAccount": service_account, "resource": resource,
    "subresource": subresource, "namespace": namespace, "name": name, "fieldSelector": field_selector,
    "labelSelector": label_selector, "check": check, "allowed": allowed, "reason": reason,
    "errored": errored, "error": error,
}
