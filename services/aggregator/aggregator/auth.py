"""Authentication at the gateway: client certificates (CN = user, O = groups) and static
bearer tokens (``--token-auth-file``, kube-apiserver's CSV format). The result travels to the
backends as ``X-Remote-User`` / ``X-Remote-Group`` / ``X-Remote-Extra-*``.
"""

from __future__ import annotations

import csv
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any

from genericapi.server.tls import peer_identity


@dataclass(frozen=True)
class UserInfo:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: dict[str, list[str]] = field(default_factory=dict)

    def headers(self) -> list[tuple[str, str]]:
        out = [("X-Remote-User", self.name)]
        out.extend(("X-Remote-Group", g) for g in self.groups)
        if self.uid:
            out.append(("X-Remote-Uid", self.uid))
        for key, values in self.extra.items():
            out.extend((f"X-Remote-Extra-{key}", v) for v in values)
        return out


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
