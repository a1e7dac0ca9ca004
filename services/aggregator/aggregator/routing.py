"""The gateway's routing table: which chain member serves which group-version.

The table is immutable and replaced whole when members' discovery changes, so a request sees
one consistent table. Known group-versions go straight to the member serving them; anything
else goes to the first member, which delegates down the chain (last one answers 404).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class RoutingTable:
    members: tuple[tuple[str, ...], ...]  # per chain member, the URLs of its replicas
    by_group_version: dict[tuple[str, str], int] = field(default_factory=dict)

    def upstreams(self, path: str) -> list[str]:
        return list(self.members[self.member_index(path)]) if self.members else []

    def member_index(self, path: str) -> int:
        """The chain member serving ``path`` (0, the first, for anything not known)."""
        if path.startswith("/openapi/v3/"):
            path = path[len("/openapi/v3"):]  # a group-version's OpenAPI document: its member's
        parts = path.split("/", 5)
        gv: tuple[str, str] | None = None
        if len(parts) > 2 and parts[1] == "api":
            gv = ("", parts[2])
        elif len(parts) > 3 and parts[1] == "apis":
            gv = (parts[2], parts[3])
        return self.by_group_version.get(gv, 0) if gv else 0
