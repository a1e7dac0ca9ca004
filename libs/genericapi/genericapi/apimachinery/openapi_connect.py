"""OpenAPI operations of connect subresources (``pods/exec``, ``pods/log``, ``*/proxy``), as
kube-apiserver's installer lists them.

A connect subresource's operations are ``connect<Group><Version><Method><Scope><Kind><Sub>``
(``connectCoreV1PostNamespacedPodExec``), one per HTTP method it takes, with the options kind's
fields as query parameters, ``*/*`` in and out and a string response; a proxy also has a
``.../proxy/{path}`` twin (``...ProxyWithPath``). ``pods/log`` is a getter with options:
``readCoreV1NamespacedPodLog``, producing text. Parameter descriptions are ours, kept short.
"""

from __future__ import annotations

from genericapi.apimachinery.openapi_paths import GVK, Operation, Param, PathSpec, Response

_UNAUTHORIZED = Response("401", "Unauthorized", None)
_STRING_OK = (Response("200", "OK", None, string=True), _UNAUTHORIZED)
_STREAM_METHODS = ("get", "post")
_PROXY_METHODS = ("delete", "get", "head", "options", "patch", "post", "put")
#: What ``pods/log`` produces (kube's LogREST adds text/plain to the defaults).
LOG_MEDIA_TYPES = ("text/plain", "application/json", "application/yaml", "application/vnd.kubernetes.protobuf")


def _q(name: str, type_: str, description: str) -> Param:
    return Param(name, "query", type_, description)


_CONTAINER = _q("container", "string", "The container to use; defaults to the only container if there is one.")
_STDIO = (
    _q("stderr", "boolean", "Redirect the standard error stream of the container."),
    _q("stdin", "boolean", "Redirect the standard input stream of the container."),
    _q("stdout", "boolean", "Redirect the standard output stream of the container."),
    _q("tty", "boolean", "Allocate a terminal; stdin must be true too."),
)


def _proxy_path(target: str) -> Param:
    return _q("path", "string", f"Path is the URL path to use for the current proxy request to {target}.")


#: Query parameters of each options kind.
OPTIONS_PARAMS: dict[str, tuple[Param, ...]] = {
    "PodAttachOptions": (_CONTAINER, *_STDIO),
    "PodExecOptions": (_q("command", "string", "The remote command to run (an argv array, not run in a shell)."),
                       _CONTAINER, *_STDIO),
    "PodPortForwardOptions": (_q("ports", "integer", "Ports to forward (as many as wanted)."),),
    "PodProxyOptions": (_proxy_path("pod"),),
    "NodeProxyOptions": (_proxy_path("node"),),
    "ServiceProxyOptions": (_proxy_path("service"),),
}

LOG_PARAMS: tuple[Param, ...] = (
    _q("container", "string", "The container whose logs to stream; defaults to the only container."),
    _q("follow", "boolean", "Follow the log stream of the pod."),
    _q("insecureSkipTLSVerifyBackend", "boolean", "Do not verify the serving certificate of the kubelet."),
    _q("limitBytes", "integer", "Stop after this many bytes of log."),
    _q("previous", "boolean", "The logs of the previous, terminated container."),
    _q("sinceSeconds", "integer", "Only logs newer than this many seconds."),
    _q("stream", "string", "Which stream to return: All, Stdout or Stderr."),
    _q("tailLines", "integer", "Only this many lines from the end of the log."),
    _q("timestamps", "boolean", "Prefix every line with an RFC3339 timestamp."),
)


def connect_paths(item: str, subresource: str, options_kind: str, kind: str, scope: str, infix: str, tag: str,
                  object_params: tuple[Param, ...], proxy: bool, group: str, version: str) -> list[PathSpec]:
    """The paths of one connect subresource: ``<item>/<subresource>`` (and ``/{path}`` for a proxy).

    ``object_params``: the path's own parameters besides ``name`` (the namespace, if any).
    """
    gvk = GVK(group, version, options_kind)
    name = Param("name", "path", "string", f"name of the {options_kind}", required=True)
    label = subresource.capitalize()
    methods = _PROXY_METHODS if proxy else _STREAM_METHODS

    def ops(suffix: str) -> tuple[Operation, ...]:
        return tuple(
            Operation(method=m, operation_id=f"connect{infix}{m.capitalize()}{scope}{kind}{label}{suffix}",
                      description=f"connect {m.upper()} requests to {subresource} of {kind}", tag=tag,
                      responses=_STRING_OK, action="connect", gvk=gvk, produces=("*/*",))
            for m in methods)

    params = (name, *object_params, *OPTIONS_PARAMS.get(options_kind, ()))
    out = [PathSpec(f"{item}/{subresource}", params, ops(""))]
    if proxy:
        path = Param("path", "path", "string", "path to the resource", required=True)
        out.append(PathSpec(f"{item}/{subresource}/{{path}}", (*params, path), ops("WithPath")))
    return out


def log_path(item: str, kind: str, scope: str, infix: str, tag: str, object_params: tuple[Param, ...],
             pretty: Param, group: str, version: str) -> PathSpec:
    """``GET <pod>/log``: ``read<Group><Version><Scope>PodLog``."""
    name = Param("name", "path", "string", f"name of the {kind}", required=True)
    operation = Operation(method="get", operation_id=f"read{infix}{scope}{kind}Log",
                          description=f"read log of the specified {kind}", tag=tag, responses=_STRING_OK,
                          action="get", gvk=GVK(group, version, kind), produces=LOG_MEDIA_TYPES)
    return PathSpec(f"{item}/log", (name, *object_params, pretty, *LOG_PARAMS), (operation,))
