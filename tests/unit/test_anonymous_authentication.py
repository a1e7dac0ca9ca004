"""kube's anonymous authentication and bearer-header reading at the gateway, without a chain.

``Authenticator(anonymous=True)`` (``--anonymous-auth``, kube's default): no credentials is
``system:anonymous`` in ``system:unauthenticated``; a bearer token nobody accepts stays a failure.
The Authorization header is read as kube's bearertoken authenticator reads it. ``WithAuthentication``
answers kube's 401 on every path for a request without a user (with anonymous off: health too),
and the paths read without authorization are exactly system:public-info-viewer's URLs.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from aggregator.auth import Authenticator, UserInfo, bearer_token
from aggregator.filters import USER, WithAuthentication, is_public
from genericapi.apimachinery.user import ANONYMOUS_USER

ALICE = UserInfo("alice", ("devs",), "uid-1")


def _scope(path: str = "/api", authorization: str | None = None, peercert: dict[str, Any] | None = None,
           ) -> dict[str, Any]:
    scope: dict[str, Any] = {"type": "http", "method": "GET", "path": path, "query_string": b"",
                             "headers": [(b"accept", b"application/json")]}
    if authorization is not None:
        scope["headers"].append((b"authorization", authorization.encode("latin-1")))
    if peercert is not None:
        scope["extensions"] = {"tls": {"peercert": peercert}}
    return scope


@pytest.mark.parametrize(("header", "token"), [
    ("Bearer abc", "abc"), ("bearer abc", "abc"), ("BEARER abc", "abc"), ("  Bearer abc  ", "abc"),
    ("Bearer abc def", "abc"),  # kube: SplitN(auth, " ", 3)[1]
    ("Bearer  abc", ""),  # the space before the token: an empty token, no credential
    ("Bearer", ""), ("Bearer ", ""), ("Basic YWxpY2U6c2VjcmV0", ""), ("abc", ""), ("Bearerabc", ""), ("", ""),
])
def test_bearer_token_as_kube_reads_it(header: str, token: str) -> None:
    assert bearer_token([(b"authorization", header.encode())]) == token


def test_only_the_first_authorization_header_counts() -> None:
    headers = [(b"authorization", b"Basic eA=="), (b"authorization", b"Bearer abc")]
    assert bearer_token(headers) == ""
    assert bearer_token([(b"x-remote-user", b"admin")]) == ""


@pytest.fixture
def anonymous() -> Authenticator:
    return Authenticator({"tok-alice": ALICE}, anonymous=True)


@pytest.mark.parametrize("header", [None, "Basic dG9rLWFsaWNlOg==", "Bearer", "Bearer ", "Bearer  tok-alice"])
def test_no_credential_is_anonymous(anonymous: Authenticator, header: str | None) -> None:
    assert anonymous.authenticate(_scope(authorization=header)) == ANONYMOUS_USER
    assert ANONYMOUS_USER == UserInfo("system:anonymous", ("system:unauthenticated",))


def test_a_certificate_without_a_common_name_is_no_credential(anonymous: Authenticator) -> None:
    cert = {"subject": ((("organizationName", "system:masters"),),)}
    assert anonymous.authenticate(_scope(peercert=cert)) == ANONYMOUS_USER


@pytest.mark.parametrize("header", ["Bearer wrong", "Bearer a.b.c", "bearer abcdef.0123456789abcdef"])
def test_a_token_nobody_accepts_is_not_anonymous(anonymous: Authenticator, header: str) -> None:
    assert anonymous.authenticate(_scope(authorization=header)) is None


def test_tokens_still_authenticate(anonymous: Authenticator) -> None:
    assert anonymous.authenticate(_scope(authorization="Bearer tok-alice")) == \
        UserInfo("alice", ("devs", "system:authenticated"), "uid-1")


def test_anonymous_off_leaves_no_credentials_unauthenticated() -> None:
    assert Authenticator({}).authenticate(_scope()) is None


def _call(authenticator: Authenticator, scope: dict[str, Any]) -> tuple[int, dict[str, Any], UserInfo | None]:
    seen: dict[str, UserInfo | None] = {}
    sent: list[dict[str, Any]] = []

    async def app(scope: Any, _receive: Any, send: Any) -> None:
        seen["user"] = scope[USER]
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(WithAuthentication(app, authenticator)(scope, receive, send))
    return sent[0]["status"], json.loads(sent[1]["body"]), seen.get("user")


@pytest.mark.parametrize("path", ["/healthz", "/livez", "/readyz", "/version", "/api/v1/namespaces"])
def test_anonymous_off_is_a_401_on_every_path(path: str) -> None:
    status, body, user = _call(Authenticator({}), _scope(path))
    assert (status, user) == (401, None)
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": "Unauthorized", "reason": "Unauthorized", "code": 401}


def test_anonymous_on_passes_system_anonymous_on(anonymous: Authenticator) -> None:
    assert _call(anonymous, _scope("/api/v1/namespaces"))[::2] == (200, ANONYMOUS_USER)
    assert _call(anonymous, _scope("/version", "Bearer wrong"))[0] == 401


@pytest.mark.parametrize(("path", "public"), [
    ("/healthz", True), ("/livez", True), ("/readyz", True), ("/version", True), ("/version/", True),
    ("/healthz/", False), ("/readyz/etcd", False), ("/livez/ping", False), ("/metrics", False), ("/api", False),
])
def test_public_paths_are_public_info_viewers_urls(path: str, public: bool) -> None:
    assert is_public(path) is public
