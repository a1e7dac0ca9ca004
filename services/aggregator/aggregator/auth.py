"""Authentication at the gateway: client certificates (CN = user, O = groups) and static
bearer tokens (``--token-auth-file``, kube-apiserver's CSV format). The result travels to the
backends as ``X-Remote-User`` / ``X-Remote-Group`` / ``X-Remote-Extra-*``.
"""

from __future__ import annotations

import csv
from collections.abc import MutableMapping
from typing import Any

from genericapi.apimachinery.user import UserInfo
from genericapi.server.tls import peer_identity

__all__ = ["Authenticator", "UserInfo", "load_token_file"]


def load_token_file(path: str) -> dict[str, UserInfo]:
    tokens: dict[str, UserInfo] = {}
    if not path:
        return tokens
    with open(path, newline="") as f:
        for row in csv.reader(f):
            if len(row) < 3 or not row[0] or row[0].startswith("#"):
                continue
            groups = tuple(g for g in (row[3].split(",") if len(row) > 3 else []) if g)
            tokens[row[0]] = UserInfo(row[1], groups, row[2])
    return tokens


class Authenticator:
    def __init__(self, tokens: dict[str, UserInfo]) -> None:
        self.tokens = tokens

    def authenticate(self, scope: MutableMapping[str, Any]) -> UserInfo | None:
        identity = peer_identity(scope)
        if identity is not None and identity[0]:
            cn, orgs = identity
            return UserInfo(cn, (*orgs, "system:authenticated"))
        for k, v in scope.get("headers", ()):
            if k == b"authorization":
                text = v.decode("latin-1")
                if text[:7].lower() == "bearer ":
                    user = self.tokens.get(text[7:].strip())
                    if user is not None:
                        return UserInfo(user.name, (*user.groups, "system:authenticated"), user.uid)
        return None
