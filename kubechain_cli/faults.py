"""Fault rules from Python: add, list and clear the gateway's injected faults (for tests).

The gateway (services/aggregator, ``faults.py``) injects failures at ``/debug/kubechain/faults``
for members of ``system:masters``. ``FaultClient`` talks to that path with the credentials of a
kubeconfig (the admin kubeconfig ``kubechain up`` writes), read by the official ``kubernetes``
client's loader so every kubeconfig form works (embedded or file certificates, tokens, exec
plugins). Rules live in each gateway process: give ``servers`` (every gateway's URL, e.g.
``Chain.server_urls``) to send each change to all replicas; otherwise the kubeconfig's server.

The rule builders (``conflict``, ``too_many_requests``, ``watch_close``, ...) spell the JSON
rules with Python keywords::

    faults = FaultClient("~/.kube/kubechain")
    faults.add(conflict(verbs=["update"], resources=["configmaps"], first_n=1))
    faults.add(watch_close(after_events=3, resources=["pods"]), latency(0.2, users=["system:serviceaccount:x:y"]))
    faults.clear()
"""

from __future__ import annotations

import http.client
import json
import os
import ssl
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "ADMIN_PATH", "FaultAPIError", "FaultClient", "conflict", "internal_error", "latency", "rule",
    "service_unavailable", "too_many_requests", "watch_close", "watch_expired",
]

ADMIN_PATH = "/debug/kubechain/faults"

#: Python keyword -> the rule's JSON field.
_MATCH_KEYS = {
    "name": "name", "verbs": "verbs", "api_groups": "apiGroups", "resources": "resources",
    "resource_names": "resourceNames", "namespaces": "namespaces", "users": "users", "groups": "groups",
    "probability": "probability", "first_n": "firstN", "every_nth": "everyNth",
}


class FaultAPIError(RuntimeError):
    """The gateway refused a change: ``status`` is the HTTP code, ``body`` its metav1.Status."""

    def __init__(self, server: str, status: int, body: Any) -> None:
        message = body.get("message", "") if isinstance(body, dict) else str(body)
        super().__init__(f"{server}{ADMIN_PATH}: {status}: {message}")
        self.server = server
        self.status = status
        self.body = body


def rule(effect: Mapping[str, Any], **match: Any) -> dict[str, Any]:
    """A rule's JSON: ``effect`` plus match and rate keywords (``verbs``, ``api_groups``, ``resources``,
    ``resource_names``, ``namespaces``, ``users``, ``groups``, ``probability``, ``first_n``,
    ``every_nth``, ``name``); None values are left out."""
    out: dict[str, Any] = {}
    for key, value in match.items():
        if key not in _MATCH_KEYS:
            raise TypeError(f"unknown fault rule keyword {key!r} (known: {', '.join(_MATCH_KEYS)})")
        if value is not None:
            out[_MATCH_KEYS[key]] = list(value) if isinstance(value, (list, tuple, set, frozenset)) else value
    out["effect"] = dict(effect)
    return out


def too_many_requests(retry_after_seconds: int = 1, message: str | None = None, **match: Any) -> dict[str, Any]:
    effect: dict[str, Any] = {"type": "TooManyRequests", "retryAfterSeconds": retry_after_seconds}
    if message is not None:
        effect["message"] = message
    return rule(effect, **match)


def internal_error(message: str | None = None, **match: Any) -> dict[str, Any]:
    return rule({"type": "InternalError", **({"message": message} if message is not None else {})}, **match)


def service_unavailable(message: str | None = None, **match: Any) -> dict[str, Any]:
    return rule({"type": "ServiceUnavailable", **({"message": message} if message is not None else {})}, **match)


def conflict(**match: Any) -> dict[str, Any]:
    return rule({"type": "Conflict"}, **match)


def watch_expired(**match: Any) -> dict[str, Any]:
    return rule({"type": "WatchExpired"}, **match)


def watch_close(after_events: int | None = None, after_seconds: float | None = None, **match: Any) -> dict[str, Any]:
    effect: dict[str, Any] = {"type": "WatchClose"}
    if after_events is not None:
        effect["afterEvents"] = after_events
    if after_seconds is not None:
        effect["afterSeconds"] = after_seconds
    return rule(effect, **match)


def latency(seconds: float | tuple[float, float], **match: Any) -> dict[str, Any]:
    """A fixed delay, or ``(min, max)`` for one drawn uniformly per request."""
    if isinstance(seconds, tuple):
        low, high = seconds
        return rule({"type": "Latency", "minSeconds": low, "maxSeconds": high}, **match)
    return rule({"type": "Latency", "seconds": seconds}, **match)


class FaultClient:
    """The admin path of one or more gateways, with a kubeconfig's credentials."""

    def __init__(self, kubeconfig: str | os.PathLike[str] | None = None, *, context: str | None = None,
                 servers: Sequence[str] = (), timeout: float = 30.0) -> None:
        try:
            from kubernetes import config as kubeconfig_loader
            from kubernetes.client import Configuration
        except ImportError as err:  # the test extra installs it
            raise RuntimeError("kubechain_cli.faults reads kubeconfigs with the `kubernetes` package: "
                               "pip install 'kubechain[test]' or kubernetes") from err
        configuration = Configuration()
        path = os.path.expanduser(os.fspath(kubeconfig)) if kubeconfig is not None else None
        kubeconfig_loader.load_kube_config(config_file=path, context=context, client_configuration=configuration,
                                           persist_config=False)
        self._configuration = configuration
        self.servers = [s.rstrip("/") for s in servers] or [configuration.host.rstrip("/")]
        self._timeout = timeout
        self._ssl = self._ssl_context(configuration)

    @staticmethod
    def _ssl_context(configuration: Any) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=configuration.ssl_ca_cert or None)
        if not configuration.verify_ssl:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if configuration.cert_file:
            ctx.load_cert_chain(configuration.cert_file, configuration.key_file or None)
        return ctx

    def _auth_headers(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        settings: Mapping[str, Any] = self._configuration.auth_settings()
        for setting in settings.values():
            if setting.get("in") == "header" and setting.get("value"):
                headers[setting["key"]] = setting["value"]
        return headers

    def _request(self, server: str, method: str, path: str, body: Any = None) -> Any:
        parts = urllib.parse.urlsplit(server)
        conn_type = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        kwargs: dict[str, Any] = {"timeout": self._timeout}
        if parts.scheme == "https":
            kwargs["context"] = self._ssl
        conn = conn_type(parts.hostname or "localhost", parts.port, **kwargs)
        headers = {"Accept": "application/json", **self._auth_headers()}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            conn.request(method, parts.path.rstrip("/") + path, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
        finally:
            conn.close()
        try:
            decoded = json.loads(raw) if raw else None
        except ValueError:
            decoded = raw.decode("utf-8", "replace")
        if resp.status >= 300:
            raise FaultAPIError(server, resp.status, decoded)
        return decoded

    def _each(self, method: str, path: str, body: Any = None) -> Any:
        """Send to every gateway; the first one's answer."""
        answers = [self._request(server, method, path, body) for server in self.servers]
        return answers[0]

    def add(self, *rules: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Append rules (as built by ``rule`` and friends); the rules as the gateway stored them.
        Without a ``name`` each gateway names a rule itself; name rules that you will remove one by
        one when there are several gateways."""
        return list(self._each("POST", ADMIN_PATH, [dict(r) for r in rules])["rules"])

    def set(self, rules: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Replace every rule."""
        return list(self._each("PUT", ADMIN_PATH, [dict(r) for r in rules])["rules"])

    def rules(self, server: str | None = None) -> list[dict[str, Any]]:
        """The rules of one gateway (the first by default), each with ``status.matched``/``injected``."""
        return list(self._request(server or self.servers[0], "GET", ADMIN_PATH)["rules"])

    def get(self, name: str, server: str | None = None) -> dict[str, Any]:
        return dict(self._request(server or self.servers[0], "GET", f"{ADMIN_PATH}/{urllib.parse.quote(name)}"))

    def remove(self, name: str) -> dict[str, Any]:
        return dict(self._each("DELETE", f"{ADMIN_PATH}/{urllib.parse.quote(name)}"))

    def clear(self) -> list[dict[str, Any]]:
        """Remove every rule; the removed rules (of the first gateway) with their counters."""
        return list(self._each("DELETE", ADMIN_PATH)["rules"])

    def injected(self, name: str) -> int:
        """How many requests the named rule has failed, summed over the gateways."""
        return sum(int(self.get(name, server)["status"]["injected"]) for server in self.servers)
