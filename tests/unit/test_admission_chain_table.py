"""registry.admissionchain: the plugins a write runs are chosen once per (operation, group, resource,
subresource) from ``handles`` and the optional ``applies_to`` (issue 15: a ConfigMap's create
awaited every Pod-only plugin); the order is kube's, a plugin appended later joins, reinvocation and
the hand-back of warnings still work, and core-api's Pod-only plugins skip what they never change."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from coreapi.admission_priority import Priority
from coreapi.admission_serviceaccount import ServiceAccount
from coreapi.admission_tolerations import DefaultTolerationSeconds
from genericapi.apimachinery import admission as adm
from genericapi.apimachinery.user import UserInfo
from genericapi.registry.admissionchain import AdmissionChain, RequestAdmission, reinvocation, request_admission


class Recorder:
    def __init__(self, name: str, log: list[str], operations: tuple[str, ...] = (adm.CREATE, adm.UPDATE),
                 pods_only: bool = False, reinvoke_once: bool = False, warn: str = "") -> None:
        self.name, self.log, self.operations, self.warn = name, log, operations, warn
        self.reinvocable = reinvoke_once
        if pods_only:
            self.applies_to = lambda group, resource, sub: (group, resource) == ("", "pods") and not sub

    def handles(self, operation: str) -> bool:
        return operation in self.operations

    async def admit(self, attrs: adm.Attributes) -> None:
        state = reinvocation.get()
        self.log.append(self.name + ("*" if state is not None and state.is_reinvoke else ""))
        if self.reinvocable and state is not None and not state.is_reinvoke:
            state.should_reinvoke = True
        if self.warn:
            attrs.warnings.append(self.warn)

    async def validate(self, attrs: adm.Attributes) -> None:
        self.log.append("v:" + self.name)


def attrs(resource: str = "configmaps", operation: str = adm.CREATE, subresource: str = "",
          obj: dict[str, Any] | None = None) -> adm.Attributes:
    return adm.Attributes(operation, "", "v1", "Kind", resource, subresource, "ns", "n",
                          obj if obj is not None else {"metadata": {"name": "n"}}, None, UserInfo("u"))


def run(chain: AdmissionChain, a: adm.Attributes) -> None:
    async def both() -> None:
        await chain.admit(a)
        await chain.validate(a)
    asyncio.run(both())


def test_only_the_plugins_that_apply_run_in_order() -> None:
    log: list[str] = []
    chain = AdmissionChain([Recorder("any", log), Recorder("pods", log, pods_only=True),
                            Recorder("deletes", log, operations=(adm.DELETE,)), Recorder("last", log)],
                           [Recorder("check", log), Recorder("podcheck", log, pods_only=True)])
    run(chain, attrs("configmaps"))
    assert log == ["any", "last", "v:check"]
    log.clear()
    run(chain, attrs("pods"))
    assert log == ["any", "pods", "last", "v:check", "v:podcheck"]
    log.clear()
    run(chain, attrs("pods", subresource="status"))
    assert log == ["any", "last", "v:check"]
    log.clear()
    run(chain, attrs("pods", operation=adm.DELETE, obj={}))
    assert log == ["deletes"]


def test_a_plugin_appended_later_joins() -> None:
    log: list[str] = []
    chain = AdmissionChain([Recorder("first", log)])
    run(chain, attrs())
    chain.mutating.append(Recorder("added", log))
    chain.validating.append(Recorder("check", log))
    run(chain, attrs())
    assert log == ["first", "first", "added", "v:check"]
    chain.mutating = [Recorder("replaced", log)]
    log.clear()
    run(chain, attrs())
    assert log == ["replaced", "v:check"]


def test_reinvocation_and_warnings_still_reach_the_request() -> None:
    log: list[str] = []
    chain = AdmissionChain([Recorder("builtin", log), Recorder("webhook", log, reinvoke_once=True, warn="careful"),
                            Recorder("pods", log, pods_only=True)])
    scope = RequestAdmission()
    token = request_admission.set(scope)
    try:
        run(chain, attrs())
    finally:
        request_admission.reset(token)
    assert log == ["builtin", "webhook", "webhook*"]
    assert scope.warnings == ["careful"]


def test_an_empty_phase_still_hands_back_what_the_record_holds() -> None:
    chain = AdmissionChain([Recorder("pods", [], pods_only=True)])
    scope = RequestAdmission()
    a = attrs()
    a.warnings.append("from before")
    token = request_admission.set(scope)
    try:
        run(chain, a)
    finally:
        request_admission.reset(token)
    assert scope.warnings == ["from before"]


@pytest.mark.parametrize("plugin", [ServiceAccount(None), Priority(None), DefaultTolerationSeconds()])  # type: ignore[arg-type]
def test_core_api_pod_plugins_apply_to_pods_only(plugin: Any) -> None:
    assert plugin.applies_to("", "pods", "")
    assert not plugin.applies_to("", "pods", "status")
    assert not plugin.applies_to("", "configmaps", "")
    assert not plugin.applies_to("apps", "deployments", "")
    assert plugin.applies_to("scheduling.k8s.io", "priorityclasses", "") == isinstance(plugin, Priority)
