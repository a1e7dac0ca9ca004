"""Catalog facts of the connect subresources (``pods/log``, ``pods/exec``, ``*/proxy``, ...).

Discovery reports them with the kinds and verbs below (kube 1.33's ``/api/v1``): the options
kind a connect subresource decodes its query into, ``create``/``get`` for the streaming ones,
every write verb for the proxies. ``pods/log`` is a getter of kind Pod. The rows of ``pods``,
``nodes`` and ``services`` (``catalog_core``) include these names; ``coreapi.connect`` serves them.
"""

from __future__ import annotations

from genericapi.apimachinery.resources import SubresourceSpec

_STREAM = ("create", "get")
_PROXY = ("create", "delete", "get", "patch", "update")

POD_CONNECT_SPECS: tuple[SubresourceSpec, ...] = (
    SubresourceSpec("attach", _STREAM, kind="PodAttachOptions"),
    SubresourceSpec("exec", _STREAM, kind="PodExecOptions"),
    SubresourceSpec("log", ("get",), kind="Pod"),
    SubresourceSpec("portforward", _STREAM, kind="PodPortForwardOptions"),
    SubresourceSpec("proxy", _PROXY, kind="PodProxyOptions"),
)
NODE_CONNECT_SPECS: tuple[SubresourceSpec, ...] = (SubresourceSpec("proxy", _PROXY, kind="NodeProxyOptions"),)
SERVICE_CONNECT_SPECS: tuple[SubresourceSpec, ...] = (
    SubresourceSpec("proxy", _PROXY, kind="ServiceProxyOptions"),)

POD_CONNECT_SUBRESOURCES: tuple[str, ...] = tuple(s.name for s in POD_CONNECT_SPECS)
