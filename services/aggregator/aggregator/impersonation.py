"""Impersonation (``kubectl --as``, ``--as-group``, ``--as-uid``): kube's ``WithImpersonation`` filter.

A request carrying ``Impersonate-User`` (and optionally ``-Group``, ``-Uid``, ``-Extra-<key>``)
is served as that user, if the authenticated user may ``impersonate`` each of them: ``users``
(or ``serviceaccounts`` in their namespace for ``system:serviceaccount:<ns>:<name>``), ``groups``,
``uids`` and ``userextras/<key>`` in ``authentication.k8s.io``. Refused: kube's 403 for the first
one not allowed; groups or a uid without a user: kube's 400. The impersonated user gets
``system:authenticated`` (and a service account its groups), as kube adds them.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import unquote

from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery import serviceaccount as satoken
from genericapi.apimachinery.authorization import Attributes, Authorizer, Decision, forbidden
from genericapi.apimachinery.user import UserInfo

USER, GROUP, UID, EXTRA = "impersonate-user", "impersonate-group", "impersonate-uid", "impersonate-extra-"


def requested(headers: Sequence[tuple[bytes, bytes]]) -> dict[str, list[str]]:
    """The Impersonate-* headers of a request, by lowercase name (extras keep their key)."""
    out: dict[str, list[str]] = {}
    for raw_name, raw_value in headers:
        name = raw_name.decode("latin-1").lower()
        if name.startswith("impersonate-"):
            out.setdefault(name, []).append(raw_value.decode("latin-1"))
    return out


async def impersonate(user: UserInfo, asked: dict[str, list[str]], authorizer: Authorizer | None) -> UserInfo:
    """The user to serve the request as; APIError (403 or 400) when not allowed."""
    names, groups, uids = asked.get(USER, []), asked.get(GROUP, []), asked.get(UID, [])
    extras = {unquote(k[len(EXTRA):]): v for k, v in asked.items() if k.startswith(EXTRA)}
    if not names:
        if groups or uids or extras:
            raise apierrors.bad_request(
                f"requested {_describe(groups, uids, extras)} without impersonating a user")
        return user
    if len(names) > 1 or len(uids) > 1:
        raise apierrors.bad_request("only one user and one uid may be impersonated")
    name = names[0]
    checks: list[Attributes] = []
    if name.startswith(satoken.USERNAME_PREFIX) and name.count(":") == 3:
        _, _, namespace, account = name.split(":")
        checks.append(Attributes(user, "impersonate", True, namespace=namespace, resource="serviceaccounts",
                                 name=account))
    else:
        checks.append(Attributes(user, "impersonate", True, resource="users", name=name))
    checks += [Attributes(user, "impersonate", True, resource="groups", name=g) for g in groups]
    checks += [Attributes(user, "impersonate", True, api_group="authentication.k8s.io", resource="uids",
                          name=u) for u in uids]
    checks += [Attributes(user, "impersonate", True, api_group="authentication.k8s.io", resource="userextras",
                          subresource=key, name=value) for key, values in extras.items() for value in values]
    if authorizer is not None:
        for attributes in checks:
            decision, reason = await authorizer.authorize(attributes)
            if decision is not Decision.ALLOW:
                raise forbidden(attributes, reason)
    all_groups = list(groups)
    if name.startswith(satoken.USERNAME_PREFIX) and name.count(":") == 3:
        all_groups += [g for g in satoken.groups_of(name.split(":")[2]) if g not in all_groups]
    if name != "system:anonymous" and "system:authenticated" not in all_groups:
        all_groups.append("system:authenticated")
    return UserInfo(name, tuple(all_groups), uids[0] if uids else "", extras)


def _describe(groups: list[str], uids: list[str], extras: dict[str, list[str]]) -> str:
    parts = [f"{{Group {g}}}" for g in groups] + [f"{{UID {u}}}" for u in uids]
    parts += [f"{{UserExtra {k}={v}}}" for k, values in extras.items() for v in values]
    return "[" + " ".join(parts) + "]"
