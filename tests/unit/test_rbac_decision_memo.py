"""The RBAC authorizer remembers decisions while its source's state (``generation``) stays the same:
the remembered answers are exactly the walked ones over random policies and requests, a new
generation answers from the changed roles and bindings, and within one generation a repeated request
does not walk the bindings again (counted)."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from genericapi.apimachinery.authorization import Attributes, Decision
from genericapi.apimachinery.rbac import RBACAuthorizer
from genericapi.apimachinery.user import UserInfo
from test_rbac_compiled import Source, _attributes, _binding, _reference, _role


class Versioned(Source):
    """A random policy whose ``generation`` a test moves as a watch cache's revision moves."""

    def __init__(self, rng: random.Random) -> None:
        super().__init__(rng)
        self.revision = 1
        self.walks = 0

    def generation(self) -> int:
        return self.revision

    def cluster_role_bindings(self) -> list[Any]:
        self.walks += 1
        return super().cluster_role_bindings()


def test_remembered_decisions_are_the_walked_ones() -> None:
    async def run() -> None:
        for seed in range(40):
            rng = random.Random(seed)
            source = Versioned(rng)
            rbac = RBACAuthorizer(source)
            asked = [_attributes(rng) for _ in range(40)]
            for _round in range(2):  # the second round answers from memory
                for attributes in asked:
                    assert await rbac.authorize(attributes) == _reference(rbac, attributes), (seed, attributes)
            # The policy changes and the generation moves: the next answers are the new state's.
            source.crbs = [_binding(rng, "crb-new", ""), *source.crbs[1:]]
            source.rbs["ns1"] = [*source.rbs["ns1"], _binding(rng, "rb-new", "ns1")]
            source.cluster_roles["cr0"] = _role(rng)
            source.revision += 1
            for attributes in asked:
                assert await rbac.authorize(attributes) == _reference(rbac, attributes), (seed, attributes)
    asyncio.run(run())


def test_a_repeated_request_is_not_walked_again_until_the_state_changes() -> None:
    async def run() -> None:
        source = Versioned(random.Random(0))
        source.cluster_roles = {"reader": {"rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]}}
        source.crbs = []
        source.rbs = {"ns1": [{"metadata": {"name": "rb", "namespace": "ns1"},
                               "roleRef": {"kind": "ClusterRole", "name": "reader"},
                               "subjects": [{"kind": "User", "name": "alice"}]}]}
        rbac = RBACAuthorizer(source)
        # groups given as a list (UserInfo built from headers may carry one) work as a tuple would
        alice = UserInfo("alice", ["system:authenticated"])  # type: ignore[arg-type]
        get_pod = Attributes(alice, "get", True, namespace="ns1", resource="pods", name="p", path="/api/v1/x")
        allowed = (Decision.ALLOW, 'RBAC: allowed by RoleBinding "rb/ns1" of ClusterRole "reader" to User "alice"')
        assert await rbac.authorize(get_pod) == allowed
        assert source.walks == 1
        for _ in range(5):
            assert await rbac.authorize(get_pod) == allowed
        assert source.walks == 1
        # Another user, verb, name or namespace is its own decision.
        assert (await rbac.authorize(Attributes(alice, "delete", True, namespace="ns1", resource="pods",
                                                name="p")))[0] is Decision.NO_OPINION
        assert (await rbac.authorize(Attributes(UserInfo("bob"), "get", True, namespace="ns1", resource="pods",
                                                name="p")))[0] is Decision.NO_OPINION
        assert source.walks == 3
        # The binding is removed: within the same generation the memory still answers (the source said
        # nothing changed); once the generation moves, the removal is seen.
        source.rbs = {"ns1": []}
        source.revision += 1
        assert await rbac.authorize(get_pod) == (Decision.NO_OPINION, "")
    asyncio.run(run())


def test_a_source_without_generation_is_walked_every_time() -> None:
    async def run() -> None:
        source = Source(random.Random(3))
        walks = 0
        crbs = source.crbs

        def counted() -> list[Any]:
            nonlocal walks
            walks += 1
            return crbs
        source.cluster_role_bindings = counted  # type: ignore[method-assign]
        rbac = RBACAuthorizer(source)
        attributes = Attributes(UserInfo("alice"), "get", True, namespace="ns1", resource="pods")
        for _ in range(3):
            await rbac.authorize(attributes)
        assert walks == 3
    asyncio.run(run())
