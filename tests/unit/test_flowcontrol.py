"""API Priority and Fairness, the pure parts: classification (kube's rule matching and precedence),
shuffle sharding, seat math and the fair queues (genericapi.apimachinery.flowcontrol and the
gateway's queueset/controller)."""

from __future__ import annotations

import asyncio

import pytest
from aggregator.flowcontrol import debug
from aggregator.flowcontrol.controller import Controller
from aggregator.flowcontrol.queueset import QueueSet, QueuingConfig, Rejected
from aggregator.flowcontrol.retryafter import _Level
from genericapi.apimachinery.flowcontrol import bootstrap
from genericapi.apimachinery.flowcontrol.allocation import Item, allocate, max_seats, nominal_limits
from genericapi.apimachinery.flowcontrol.matching import matches_flow_schema, non_resource_url_matches
from genericapi.apimachinery.flowcontrol.shufflesharding import Dealer, hash_flow_id, required_entropy_bits
from genericapi.apimachinery.requestinfo import parse_request_info
from genericapi.apimachinery.user import UserInfo

ALICE = UserInfo("alice", ("system:authenticated",))
ADMIN = UserInfo("admin", ("system:masters", "system:authenticated"))
NODE = UserInfo("system:node:n1", ("system:nodes", "system:authenticated"))
KCM = UserInfo("system:kube-controller-manager", ("system:authenticated",))
KS_SA = UserInfo("system:serviceaccount:kube-system:deployment-controller",
                 ("system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"))
APP_SA = UserInfo("system:serviceaccount:apps:builder", ("system:serviceaccounts", "system:authenticated"))
ANON = UserInfo("system:anonymous", ("system:unauthenticated",))


def bootstrapped() -> Controller:
    ctl = Controller(None, 600)
    fss = bootstrap.mandatory_flow_schemas() + bootstrap.suggested_flow_schemas()
    pls = bootstrap.mandatory_priority_levels() + bootstrap.suggested_priority_levels()
    for i, o in enumerate(fss + pls):
        o["metadata"]["uid"] = f"uid-{i}"
    ctl.digest(fss, pls)
    return ctl


def info(method: str, path: str, query: str = ""):
    return parse_request_info(method, path, query)


@pytest.mark.parametrize(("user", "method", "path", "query", "schema"), [
    (ADMIN, "GET", "/api/v1/pods", "", "exempt"),
    (ALICE, "GET", "/api/v1/namespaces/default/pods", "", "global-default"),
    (ALICE, "GET", "/healthz", "", "probes"),
    (ANON, "GET", "/readyz", "", "probes"),
    (ANON, "GET", "/version", "", "global-default"),
    (ALICE, "POST", "/healthz", "", "global-default"),  # probes: get only
    (NODE, "PUT", "/api/v1/nodes/n1/status", "", "system-node-high"),
    (NODE, "GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1", "", "system-node-high"),
    (NODE, "GET", "/api/v1/namespaces/default/pods", "", "system-nodes"),
    (KCM, "PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kcm", "", "system-leader-election"),
    (KCM, "GET", "/api/v1/namespaces/default/endpoints/web", "", "endpoint-controller"),
    (KCM, "LIST", "/api/v1/pods", "", "kube-controller-manager"),
    (KS_SA, "PUT", "/api/v1/namespaces/kube-system/configmaps/lock", "", "workload-leader-election"),
    (KS_SA, "GET", "/apis/apps/v1/deployments", "", "kube-system-service-accounts"),
    (APP_SA, "GET", "/api/v1/namespaces/apps/pods", "", "service-accounts"),
])
def test_bootstrap_classification(user, method, path, query, schema) -> None:
    ctl = bootstrapped()
    c = ctl.classify(user, info("GET" if method == "LIST" else method, path, query))
    assert c.flow_schema_name == schema


def test_precedence_then_name_and_added_schema() -> None:
    ctl = bootstrapped()
    fss = bootstrap.mandatory_flow_schemas() + bootstrap.suggested_flow_schemas()
    pls = bootstrap.mandatory_priority_levels() + bootstrap.suggested_priority_levels()

    def mine(name: str, precedence: int, level: str) -> dict:
        return {"metadata": {"name": name, "uid": name}, "spec": {
            "priorityLevelConfiguration": {"name": level}, "matchingPrecedence": precedence,
            "distinguisherMethod": {"type": "ByNamespace"},
            "rules": [{"subjects": [{"kind": "User", "user": {"name": "alice"}}],
                       "resourceRules": [{"verbs": ["list", "get"], "apiGroups": [""], "resources": ["configmaps"],
                                          "namespaces": ["team-a"]}]}]}}
    ctl.digest([*fss, mine("zz-alice", 500, "workload-low"), mine("aa-alice", 500, "workload-high")], pls)
    c = ctl.classify(ALICE, info("GET", "/api/v1/namespaces/team-a/configmaps"))
    assert (c.flow_schema_name, c.level.name, c.distinguisher) == ("aa-alice", "workload-high", "team-a")
    # Not its namespace, nor cluster scope (clusterScope unset): global-default.
    assert ctl.classify(ALICE, info("GET", "/api/v1/namespaces/team-b/configmaps")).flow_schema_name == "global-default"
    assert ctl.classify(ALICE, info("GET", "/api/v1/configmaps")).flow_schema_name == "global-default"
    # A schema naming a missing level is Dangling and skipped.
    ctl.digest([*fss, mine("aa-alice", 500, "nope")], pls)
    assert ctl.dangling == {"aa-alice": "nope"}
    assert ctl.classify(ALICE, info("GET", "/api/v1/namespaces/team-a/configmaps")).flow_schema_name == "global-default"


def test_subject_kinds_and_wildcards() -> None:
    def fs(subject: dict, resources=("*",)) -> dict:
        return {"metadata": {"name": "x"}, "spec": {"rules": [{"subjects": [subject], "resourceRules": [
            {"verbs": ["*"], "apiGroups": ["*"], "resources": list(resources), "clusterScope": True,
             "namespaces": ["*"]}]}]}}
    pods = info("GET", "/api/v1/namespaces/apps/pods/p/log")
    assert matches_flow_schema(fs({"kind": "User", "user": {"name": "*"}}), ALICE, pods)
    assert matches_flow_schema(fs({"kind": "Group", "group": {"name": "system:authenticated"}}), ALICE, pods)
    assert not matches_flow_schema(fs({"kind": "Group", "group": {"name": "system:masters"}}), ALICE, pods)
    sa_any = {"kind": "ServiceAccount", "serviceAccount": {"namespace": "apps", "name": "*"}}
    assert matches_flow_schema(fs(sa_any), APP_SA, pods)
    assert not matches_flow_schema(fs({"kind": "ServiceAccount", "serviceAccount": {"namespace": "app", "name": "*"}}),
                                   APP_SA, pods)  # namespace "app" is not a prefix match of "apps"
    assert matches_flow_schema(fs({"kind": "ServiceAccount", "serviceAccount": {"namespace": "apps",
                                                                                  "name": "builder"}}), APP_SA, pods)
    # resource/subresource are matched joined.
    assert matches_flow_schema(fs({"kind": "User", "user": {"name": "alice"}}, ("pods/log",)), ALICE, pods)
    assert not matches_flow_schema(fs({"kind": "User", "user": {"name": "alice"}}, ("pods",)), ALICE, pods)


def test_non_resource_urls() -> None:
    assert non_resource_url_matches(["/healthz"], "/healthz")
    # kube's matchPolicyRuleNonResourceURL treats every rule as a prefix of the path's segments.
    assert non_resource_url_matches(["/healthz"], "/healthz/etcd")
    assert not non_resource_url_matches(["/healthz"], "/healthzz")
    assert non_resource_url_matches(["/healthz/*"], "/healthz/etcd")
    assert not non_resource_url_matches(["/healthz/*"], "/healthz")
    assert non_resource_url_matches(["*"], "/anything")


def test_dealer_hands_are_distinct_and_stable() -> None:
    dealer = Dealer(128, 6)
    for flow in ("alice", "bob", "system:node:n1", ""):
        hand = dealer.deal(hash_flow_id("global-default", flow))
        assert len(set(hand)) == 6 and all(0 <= c < 128 for c in hand)
        assert hand == dealer.deal(hash_flow_id("global-default", flow))
    assert dealer.deal(hash_flow_id("global-default", "alice")) != dealer.deal(hash_flow_id("global-default", "bob"))
    # The arithmetic of kube's Deal: remainders 5 (mod 8), 2 (mod 7) -> cards 5 then 2.
    assert Dealer(8, 2).deal(5 + 8 * 2) == [5, 2]
    assert Dealer(8, 2).deal(5 + 8 * 6) == [5, 7]  # 6 >= 5 skips the dealt card
    assert required_entropy_bits(128, 6) == 42
    with pytest.raises(ValueError, match="greater than deckSize"):
        Dealer(4, 5)
    with pytest.raises(ValueError, match="entropy"):
        Dealer(10_000_000, 8)


def test_nominal_seats_of_kube_defaults() -> None:
    specs = {o["metadata"]["name"]: o["spec"] for o in
             bootstrap.mandatory_priority_levels() + bootstrap.suggested_priority_levels()}
    limits = nominal_limits(600, specs)
    assert {n: lim.nominal for n, lim in limits.items()} == {
        "catch-all": 13, "exempt": 0, "system": 74, "node-high": 98, "leader-election": 25, "workload-high": 98,
        "workload-low": 245, "global-default": 49}
    assert (limits["workload-low"].lower, limits["workload-low"].upper) == (245 - 221, 245 + 600)  # Go rounds 220.5 up
    assert (limits["global-default"].lower, limits["leader-election"].lower) == (24, 25)
    assert max_seats(49, 6) == 8 and max_seats(13, 6) == 2 and max_seats(3, 6) == 1


def test_allocation_is_fair_between_bounds() -> None:
    allocs, p = allocate(100, [Item(10, 5, 50), Item(10, 5, 50)])
    assert allocs == pytest.approx([50, 50])
    allocs, p = allocate(100, [Item(90, 10, 95), Item(10, 5, 20)])
    assert sum(allocs) == pytest.approx(100) and allocs[1] == pytest.approx(10 * p) and allocs[0] <= 95
    assert allocate(10, [Item(1, 8, 9), Item(1, 8, 9)])[0] == [8, 8]  # bounds win


def test_borrowing_moves_idle_seats_to_busy_level() -> None:
    ctl = bootstrapped()
    start = {n: s.current for n, s in ctl.levels.items()}
    nominal_sum = sum(s.limits.nominal for s in ctl.levels.values())  # 602: each level's share is rounded up
    assert abs(sum(start.values()) - nominal_sum) <= 4  # then each current limit is rounded
    busy = ctl.levels["global-default"]
    busy.queues._demand_now = busy.limits.upper
    busy.queues.demand_high = busy.limits.upper
    ctl.update_borrowing()
    assert busy.current > start["global-default"]
    assert ctl.levels["workload-low"].current >= ctl.levels["workload-low"].limits.lower


async def test_queueset_rejects_queues_and_times_out() -> None:
    qs = QueueSet(QueuingConfig("pl", 4, 2, 2), 1)
    first = qs.start(hash_flow_id("fs", "a"), 1, "fs", "a", None)
    assert first.future is None or first.future.done()
    waiting = [qs.start(hash_flow_id("fs", "a"), 1, "fs", "a", None) for _ in range(4)]  # 2 queues x 2
    with pytest.raises(Rejected) as err:
        qs.start(hash_flow_id("fs", "a"), 1, "fs", "a", None)
    assert err.value.reason == "queue-full"
    qs.finish(first)
    await asyncio.sleep(0)
    assert waiting[0].future is not None and waiting[0].future.done()
    with pytest.raises(Rejected) as err:
        await qs.wait(waiting[1], 0.01)
    assert err.value.reason == "time-out" and qs.timed_out == 1 and qs.waiting == 2
    reject = QueueSet(QueuingConfig("catch-all", 0), 1)
    reject.start(0, 1, "catch-all", "", None)
    with pytest.raises(Rejected, match="concurrency-limit"):
        reject.start(0, 1, "catch-all", "", None)


async def test_fair_queuing_serves_flows_alternately() -> None:
    """A flow with ten waiting requests does not delay another flow's one request behind all ten."""
    qs = QueueSet(QueuingConfig("pl", 64, 1, 50), 1)
    running = qs.start(hash_flow_id("fs", "heavy"), 1, "fs", "heavy", "h0")
    heavy = [qs.start(hash_flow_id("fs", "heavy"), 1, "fs", "heavy", f"h{i}") for i in range(1, 11)]
    light = qs.start(hash_flow_id("fs", "light"), 1, "fs", "light", "l")
    assert heavy[0].queue is not light.queue
    order = []
    current = running
    for _ in range(11):
        await asyncio.sleep(0.01)  # each request takes real time: that is what its flow is charged in R
        qs.finish(current)
        current = next(r for r in [*heavy, light] if r.future is not None and r.future.done() and r.details
                       not in order)
        order.append(current.details)
    assert order.index("l") <= 1


class _CheckedQueueSet(QueueSet):
    """Checks each dispatch against kube's scan of every queue from the round-robin index."""

    checked = 0

    def _dispatch_one(self) -> bool:
        best, best_finish, robin, n = None, float("inf"), self._robin, len(self.queues)
        for _ in range(n):
            robin = (robin + 1) % n
            queue = self.queues[robin]
            if queue.waiting and queue.next_dispatch_r + queue.waiting[0].work < best_finish:
                best, best_finish = queue, queue.next_dispatch_r + queue.waiting[0].work
        head = best.waiting[0] if best is not None else None
        dispatched = super()._dispatch_one()
        if dispatched:
            assert best is not None and head not in best.waiting and self._robin == best.index
            self.checked += 1
        return dispatched


async def test_dispatch_picks_the_queue_kubes_full_scan_picks() -> None:
    """Only queues with waiting requests are looked at; the pick (least virtual finish time, ties in
    round-robin order) is the one kube's scan of all queues makes, over a random run."""
    import random

    rnd = random.Random(17)
    qs = _CheckedQueueSet(QueuingConfig("pl", 16, 3, 50), 3)
    started = []

    def executing() -> list:
        return [r for r in started if r.future is None or r.future.done()]

    for step in range(600):
        now = executing()
        if now and (rnd.random() < 0.45 or len(started) > 40):
            req = now[rnd.randrange(len(now))]
            started.remove(req)
            qs.finish(req)
        else:
            flow = f"f{rnd.randrange(6)}"
            started.append(qs.start(hash_flow_id("fs", flow), 1, "fs", flow, step))
        if step % 50 == 0:
            await asyncio.sleep(0.001)  # virtual time moves
    while started:
        req = executing()[0]
        started.remove(req)
        qs.finish(req)
    assert qs.checked > 100 and qs.waiting == 0 and qs.executing == 0


def test_retry_after_grows_under_drops_and_shrinks_after() -> None:
    level = _Level()
    for second in range(100, 104):
        for _ in range(10):
            level.record(second)
    assert level.retry_after >= 2
    for second in range(200, 240, 5):
        level.record(second)
    assert level.retry_after == 1


def test_dump_layout_is_kubes_tabwriter() -> None:
    ctl = bootstrapped()
    text = debug.dump_priority_levels(ctl)
    lines = text.splitlines()
    assert lines[0].startswith("PriorityLevelName, ActiveQueues, IsIdle, IsQuiescing, ")
    assert lines[0].endswith("CancelledRequests")
    assert lines[1].startswith("catch-all,         0,            true,   false,       0,")
    assert len(lines) == 1 + 8
    assert debug.tabwriter([["a,", "b"], ["longer-cell,", "c"]]) == "a,           b\nlonger-cell, c\n"
