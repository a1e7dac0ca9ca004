"""kube's named health checks (k8s.io/apiserver/pkg/server/healthz) beyond the basic lines:
post-start hooks failing "not finished" until they ran, on all three endpoints; one check at
``/<kind>/<name>`` (names with slashes too) answering ``ok`` or ``internal server error: <why>``;
``?exclude=`` of a name that matches nothing warned about; kube's headers."""

from __future__ import annotations

from genericapi.server.health import HealthCheckError, HealthChecks
from starlette.requests import Request


def _request(path: str, query: str = "") -> Request:
    return Request({"type": "http", "method": "GET", "path": path, "query_string": query.encode(), "headers": []})


async def _etcd_down() -> bool:
    raise HealthCheckError("etcd client connection not yet established")


async def test_post_start_hooks_are_named_and_gate_every_endpoint() -> None:
    checks = HealthChecks()
    rbac = checks.post_start_hook("rbac/bootstrap-roles")
    for kind in ("healthz", "livez", "readyz"):
        status, body = await checks.render(kind, [], verbose=True)
        assert status == 500
        assert "[-]poststarthook/rbac/bootstrap-roles failed: reason withheld\n" in body
        assert body.endswith(f"{kind} check failed\n")
        assert await checks.single(kind, "poststarthook/rbac/bootstrap-roles") == (
            500, "internal server error: not finished\n")
    rbac.finish()
    status, body = await checks.render("readyz", [], verbose=True)
    assert (status, body) == (200, "[+]ping ok\n[+]log ok\n[+]poststarthook/rbac/bootstrap-roles ok\n"
                                   "[+]shutdown ok\nreadyz check passed\n")
    assert await checks.single("livez", "poststarthook/rbac/bootstrap-roles") == (200, "ok")
    assert checks.post_start_hook("rbac/bootstrap-roles") is rbac  # one check per name


async def test_single_checks_give_the_reason_and_unknown_names_are_none() -> None:
    checks = HealthChecks()
    checks.add("etcd", _etcd_down)
    assert await checks.single("readyz", "etcd") == (500, "internal server error: etcd client connection not "
                                                          "yet established\n")
    assert await checks.single("readyz", "ping") == (200, "ok")
    assert await checks.single("readyz", "nope") is None
    assert await checks.single("livez", "shutdown") is None  # readiness only
    checks.shutting_down = True
    assert await checks.single("readyz", "shutdown") == (500, "internal server error: process is shutting down\n")


async def test_exclude_of_an_unknown_name_is_warned_about() -> None:
    checks = HealthChecks()
    checks.add("etcd", _etcd_down)
    status, body = await checks.render("livez", ["etcd", "bogus", "alpha"], verbose=False)
    assert status == 200 and body == "ok"
    status, body = await checks.render("livez", ["etcd", "bogus", "alpha"], verbose=True)
    assert body == ('[+]ping ok\n[+]log ok\n[+]etcd excluded: ok\n'
                    'warn: some health checks cannot be excluded: no matches for "alpha", "bogus"\n'
                    'livez check passed\n')


async def test_answers_carry_kubes_headers() -> None:
    checks = HealthChecks()
    checks.add("etcd", _etcd_down, liveness=False)
    ready = await checks.readyz(_request("/readyz", "exclude=etcd"))
    assert (ready.status_code, bytes(ready.body)) == (200, b"ok")
    assert ready.headers["content-type"] == "text/plain; charset=utf-8"
    assert ready.headers["x-content-type-options"] == "nosniff"
    failed = await checks.readyz(_request("/readyz"))
    assert failed.status_code == 500 and failed.headers["x-content-type-options"] == "nosniff"
