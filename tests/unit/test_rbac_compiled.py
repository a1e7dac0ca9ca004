"""The RBAC authorizer's compiled path (subject indexes, rule sets, the reason worded on allow) answers
exactly what walking every bound rule with ``rule_allows`` answers: random bindings, roles, users and
requests, decisions and reasons compared; a changed listing (new objects) is seen at once."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from genericapi.apimachinery.authorization import Attributes, Decision
from genericapi.apimachinery.rbac import RBACAuthorizer, rule_allows
from genericapi.apimachinery.user import UserInfo
from support.rbac_source import DictSource

VERBS = ["get", "list", "create", "delete", "*"]
GROUPS = ["", "apps", "*"]
RESOURCES = ["pods", "configmaps", "pods/log", "*/scale", "deployments/scale", "*"]
NAMES = ["a", "b"]
URLS = ["/healthz", "/api/*", "*", "/version"]
USERS = ["alice", "bob", "system:serviceaccount:ns1:robot", "system:serviceaccount:ns2:robot"]
GROUP_NAMES = ["devs", "ops", "system:authenticated"]


class Source(DictSource):
    def __init__(self, rng: random.Random) -> None:
        super().__init__()
        self.cluster_roles = {f"cr{i}": _role(rng) for i in range(6)}
        self.roles = {("ns1", f"r{i}"): _role(rng) for i in range(3)}
        self.crbs = [_binding(rng, f"crb{i}", "") for i in range(12)]
        self.rbs = {"ns1": [_binding(rng, f"rb{i}", "ns1") for i in range(6)]}


def _some(rng: random.Random, values: list[str]) -> list[str]:
    return rng.sample(values, rng.randint(1, 2))


def _role(rng: random.Random) -> dict[str, Any]:
    rules = []
    for _ in range(rng.randint(0, 3)):
        if rng.random() < 0.3:
            rules.append({"verbs": _some(rng, VERBS), "nonResourceURLs": _some(rng, URLS)})
        else:
            rule = {"verbs": _some(rng, VERBS), "apiGroups": _some(rng, GROUPS), "resources": _some(rng, RESOURCES)}
            if rng.random() < 0.3:
                rule["resourceNames"] = _some(rng, NAMES)
            rules.append(rule)
    return {"rules": rules}


def _binding(rng: random.Random, name: str, namespace: str) -> dict[str, Any]:
    subjects = []
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(["User", "Group", "ServiceAccount"])
        if kind == "User":
            subjects.append({"kind": kind, "name": rng.choice(USERS)})
        elif kind == "Group":
            subjects.append({"kind": kind, "name": rng.choice(GROUP_NAMES)})
        else:
            subject = {"kind": kind, "name": "robot"}
            if rng.random() < 0.5:
                subject["namespace"] = rng.choice(["ns1", "ns2"])
            subjects.append(subject)
    kind = rng.choice(["ClusterRole", "ClusterRole", "Role", "Nope"])
    role = rng.choice(["cr0", "cr1", "cr2", "cr3", "cr4", "cr5", "missing"]) if kind != "Role" \
        else rng.choice(["r0", "r1", "r2", "missing"])
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"metadata": meta, "roleRef": {"kind": kind, "name": role}, "subjects": subjects}


def _reference(rbac: RBACAuthorizer, attributes: Attributes) -> tuple[Decision, str]:
    """What the authorizer answered before compilation: every bound rule in order."""
    errors: list[str] = []
    for where, rule, error in rbac._rules(attributes.user, attributes.namespace):
        if rule is None:
            errors.append(error)
        elif rule_allows(attributes, rule):
            return Decision.ALLOW, f"RBAC: allowed by {where}"
    return Decision.NO_OPINION, f"RBAC: {', '.join(errors)}" if errors else ""


def _attributes(rng: random.Random) -> Attributes:
    user = UserInfo(rng.choice(USERS), tuple(rng.sample(GROUP_NAMES, rng.randint(0, 2))))
    if rng.random() < 0.3:
        return Attributes(user, rng.choice(VERBS[:-1]), False, path=rng.choice(["/healthz", "/api/v1", "/metrics"]))
    resource = rng.choice(["pods", "configmaps", "deployments"])
    return Attributes(user, rng.choice(VERBS[:-1]), True, namespace=rng.choice(["", "ns1", "ns2"]),
                      api_group=rng.choice(["", "apps"]), api_version="v1", resource=resource,
                      subresource=rng.choice(["", "", "log", "scale"]), name=rng.choice(["", "a", "c"]),
                      path="/x")


def test_compiled_answers_as_walking_every_rule() -> None:
    async def run() -> None:
        for seed in range(60):
            rng = random.Random(seed)
            source = Source(rng)
            rbac = RBACAuthorizer(source)
            for _ in range(60):
                attributes = _attributes(rng)
                assert await rbac.authorize(attributes) == _reference(rbac, attributes), (seed, attributes)
            # A listing that changes (a binding replaced, one added) is seen at the next request.
            source.crbs = [_binding(rng, "crb-new", ""), *source.crbs[1:]]
            source.rbs["ns1"] = [*source.rbs["ns1"], _binding(rng, "rb-new", "ns1")]
            source.cluster_roles["cr0"] = _role(rng)
            for _ in range(30):
                attributes = _attributes(rng)
                assert await rbac.authorize(attributes) == _reference(rbac, attributes), (seed, attributes)
    asyncio.run(run())
