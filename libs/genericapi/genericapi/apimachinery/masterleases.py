"""The master leases: how each gateway tells core-api where the API server can be reached.

kube-apiserver's "lease" endpoint reconciler has every API server keep a key under
``/registry/masterleases/`` with a TTL (15 s, renewed every 10 s); the ``default/kubernetes``
Endpoints are rebuilt from the keys alive. kubechain's gateways are the API server clients
reach, so each gateway keeps one; core-api reads them. kube keys a lease by IP (all its servers
share one port); gateways of one ``kubechain up`` share 127.0.0.1 on different ports, so the key
is ``<ip>:<port>`` and the stored Endpoints carries the port as well as the address.
"""

from __future__ import annotations

from typing import Any

import orjson

#: kube's ``--master-endpoint-reconciler-ttl`` default and its renewal period.
LEASE_TTL_SECONDS = 15
RENEW_INTERVAL_SECONDS = 10.0


def leases_prefix(etcd_prefix: str) -> str:
    return f"{etcd_prefix.rstrip('/')}/masterleases/"


def lease_key(etcd_prefix: str, ip: str, port: int) -> bytes:
    return f"{leases_prefix(etcd_prefix)}{ip}:{port}".encode()


def lease_value(ip: str, port: int) -> bytes:
    """An Endpoints object naming the address, as kube's lease storage holds."""
    obj: dict[str, Any] = {
        "kind": "Endpoints", "apiVersion": "v1",
        "metadata": {"name": ip, "creationTimestamp": None},
        "subsets": [{"addresses": [{"ip": ip}], "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}],
    }
    return orjson.dumps(obj)


def parse_lease(value: bytes) -> tuple[str, int] | None:
    """The (ip, port) a lease names; ``None`` for a value that is not one."""
    try:
        obj = orjson.loads(value)
        subset = obj["subsets"][0]
        return str(subset["addresses"][0]["ip"]), int(subset["ports"][0]["port"])
    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError, ValueError):
        return None
