"""Which of a client's own tests need a kubelet: the rule, read off the test's source.

kubechain is an API server with no nodes: nothing runs containers, so nothing reports a Pod Ready, serves
its logs or exec, forwards its ports, or (with no workload controllers either) turns a Deployment or
StatefulSet into available replicas. A client test that relies on any of that cannot pass against any
API server alone, and is left out. Everything else a client's suite does (create, get, list, watch,
patch, label, delete, discovery, auth, CRDs, field and label selectors, proxy, cordon, taint) is API
behaviour and stays in.

The rule is mechanical, so that nobody hand-picks passing tests: a test needs a kubelet when its body, or
the body of any fixture it uses (transitively, as pytest resolved them), calls one of ``KUBELET_CALLS``
outside a ``with pytest.raises(...)`` block, waits (``.wait(...)``) on a status that only a kubelet
or a workload controller writes (``KUBELET_STATUS``), or watches an object from its own resourceVersion
(``obj.watch()``) for a change that only the scheduler or kubelet makes. Calls inside ``pytest.raises`` are the client
refusing before it sends anything (``ConfigMap.exec`` raises NotImplementedError, ``PersistentVolume``
has no port-forward), so they do not count.

Tests that merely need Pods or a Node to *exist* (a kind cluster has them) are not matched by the rule;
the kr8s plugin creates equivalent objects instead (see ``kind_objects.py``).
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable, Iterable
from typing import Any

# Method name -> why calling it needs a kubelet (or the controllers that turn specs into running pods).
KUBELET_CALLS: dict[str, str] = {
    # Pod.ready(): the kubelet writes the Ready condition; Deployment/StatefulSet.ready(): the workload
    # controllers count pods the kubelet reports ready; Service.ready(): waits for ready endpoints.
    "ready": "waits for a Ready status that only a kubelet (and the controllers counting its pods) writes",
    # Service.ready_pods(): the pods behind a Service that the kubelet reports Ready.
    "ready_pods": "lists the Service's pods that a kubelet reports Ready",
    # pods/exec: the API server upgrades the connection and proxies it to the node's kubelet.
    "exec": "runs a command in a container (pods/exec is proxied to the kubelet)",
    # pods/log: the API server streams the container log from the kubelet.
    "logs": "reads a container's log (pods/log is proxied to the kubelet)",
    # pods/portforward: a SPDY/WebSocket tunnel to a container port through the kubelet.
    "portforward": "forwards to a container port (pods/portforward is proxied to the kubelet)",
}

# ``obj.watch()`` (no arguments): kr8s's APIObject.watch streams the object's changes *after* its own
# resourceVersion, as kube-apiserver does for a watch from a given resourceVersion. Right after the test's
# own write nothing has changed; in kind the scheduler binds a new Pod and the kubelet reports its status,
# which are the events these tests wait for.
OBJECT_WATCH_REASON = "waits for a change made after the test's own write (the scheduler and kubelet make it)"

# Status a ``.wait(...)`` may wait for that only a kubelet or a workload controller writes.
KUBELET_STATUS: tuple[str, ...] = ("Ready", "Initialized", ".status.phase", "availableReplicas")
WAIT_REASON = "waits for Pod conditions, phase or available replicas that only a kubelet and controllers set"


def _is_pytest_raises(item: ast.withitem) -> bool:
    call = item.context_expr
    if not isinstance(call, ast.Call):
        return False
    func = call.func
    return isinstance(func, ast.Attribute) and func.attr == "raises" and \
        isinstance(func.value, ast.Name) and func.value.id == "pytest"


def _strings(nodes: Iterable[ast.AST]) -> list[str]:
    return [n.value for top in nodes for n in ast.walk(top) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


class _Finder(ast.NodeVisitor):
    """Collects the kubelet-needing calls of one function body (nested functions included)."""

    def __init__(self) -> None:
        self.raises_depth = 0
        self.found: list[str] = []

    def _visit_with(self, node: ast.With | ast.AsyncWith) -> None:
        expecting = any(_is_pytest_raises(i) for i in node.items)
        for i in node.items:
            self.visit(i)
        self.raises_depth += expecting
        for stmt in node.body:
            self.visit(stmt)
        self.raises_depth -= expecting

    visit_With = _visit_with
    visit_AsyncWith = _visit_with

    def _check(self, method: str, args: list[ast.expr]) -> None:
        if method in KUBELET_CALLS:
            self.found.append(f".{method}(): {KUBELET_CALLS[method]}")
        elif method == "watch" and not args:
            self.found.append(f".watch(): {OBJECT_WATCH_REASON}")
        elif method == "wait" and any(token in s for s in _strings(args) for token in KUBELET_STATUS):
            self.found.append(f".wait(): {WAIT_REASON}")

    def visit_Call(self, node: ast.Call) -> None:
        if self.raises_depth == 0:
            args = [*node.args, *(k.value for k in node.keywords)]
            if isinstance(node.func, ast.Attribute):
                self._check(node.func.attr, args)
            # A bound method handed to a runner with its arguments: tg.start_soon(pod.wait, "condition=Ready").
            for i, arg in enumerate(node.args):
                if isinstance(arg, ast.Attribute):
                    self._check(arg.attr, node.args[i + 1:])
        self.generic_visit(node)


def kubelet_needs_in_source(source: str) -> list[str]:
    """The reasons (one per offending call) that the function in ``source`` needs a kubelet."""
    finder = _Finder()
    finder.visit(ast.parse(textwrap.dedent(source)))
    return finder.found


def kubelet_needs(func: Callable[..., Any]) -> list[str]:
    """As ``kubelet_needs_in_source`` for a live function (a test or a fixture's function)."""
    try:
        source = inspect.getsource(inspect.unwrap(func))
    except (OSError, TypeError):
        return []
    return kubelet_needs_in_source(source)
