"""``componentstatuses`` (v1, deprecated): kube-apiserver's answers from live health probes.

kube 1.33 probes three components each time the resource is read: ``scheduler`` and
``controller-manager`` by HTTPS GET of ``/healthz`` on their default secure ports on
127.0.0.1 (10259 and 10257, certificate not verified), and ``etcd-0`` through its storage
client. Nothing is stored. kubechain runs neither a scheduler nor a controller-manager
process, so on a kubechain host those probes find nothing listening and are reported exactly
as kube reports them then (``Unhealthy``, Go's ``connection refused`` error text); whatever
does answer there is reported truthfully. ``etcd-0`` is the real health of our etcd.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.apimachinery.tables_common import Obj, Printer, column, name_column
from genericapi.registry.options import ListOptions, ListResult
from genericapi.registry.store import Store
from genericapi.registry.strategy import Strategy
from genericapi.storage.errors import StorageError
from genericapi.storage.etcd import EtcdClient

#: kube's componentstatus probeTimeOut.
PROBE_TIMEOUT = 20.0
#: ``ports.KubeControllerManagerPort`` and ``DefaultKubeSchedulerPort``.
SCHEDULER_PORT = 10259
CONTROLLER_MANAGER_PORT = 10257
DEPRECATION = "v1 ComponentStatus is deprecated in v1.19+"
#: The prober keeps this much of a response body (``maxRespBodyLength``).
MAX_BODY = 10 * 1024


@dataclass(frozen=True)
class ProbeResult:
    """``probe.Result`` with the message and error kube puts in the Healthy condition."""

    status: str  # "True" (Success), "False" (Failure), "Unknown"
    message: str = ""
    error: str = ""


Probe = Callable[[], Awaitable[ProbeResult]]


def _go_dial_error(host: str, port: int, err: OSError) -> str:
    """How Go's net/http words a failed dial (the part after ``Get "<url>": ``)."""
    if isinstance(err, ConnectionRefusedError):
        return f"dial tcp {host}:{port}: connect: connection refused"
    reason = (err.strerror or str(err)).lower()
    return f"dial tcp {host}:{port}: connect: {reason}"


async def http_probe(host: str, port: int, path: str, limit: float = PROBE_TIMEOUT) -> ProbeResult:
    """kube's ``HttpServer.DoServerCheck`` over HTTPS: 2xx is Success with the body as message,
    3xx a Warning (Unknown), others a Failure; a failed request is a Failure whose message is Go's
    client error."""
    url = f"https://{host}:{port}{path}"
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # InsecureSkipVerify, as kube's componentstatus probes
    try:
        async with asyncio.timeout(limit):
            reader, writer = await asyncio.open_connection(host, port, ssl=ctx)
            try:
                writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: kube-probe/1.33\r\n"
                             "Accept: */*\r\nConnection: close\r\n\r\n".encode())
                await writer.drain()
                raw = await reader.read(64 * 1024)
            finally:
                writer.close()
    except TimeoutError:
        return ProbeResult("False", f'Get "{url}": context deadline exceeded '
                                    "(Client.Timeout exceeded while awaiting headers)")
    except ssl.SSLError as err:
        return ProbeResult("False", f'Get "{url}": {err.reason or err}')
    except OSError as err:
        return ProbeResult("False", f'Get "{url}": {_go_dial_error(host, port, err)}')
    head, _, body = raw.partition(b"\r\n\r\n")
    parts = head.split(b" ", 2)
    code = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    text = body[:MAX_BODY].decode("utf-8", "replace")
    if 200 <= code < 300:
        return ProbeResult("True", text)
    if 300 <= code < 400:  # probe.Warning: neither Success nor Failure, so the condition is Unknown
        return ProbeResult("Unknown", f"Probe terminated redirects, Response body: {text}")
    return ProbeResult("False", f"HTTP probe failed with statuscode: {code}")


async def etcd_probe(client: EtcdClient, limit: float = PROBE_TIMEOUT) -> ProbeResult:
    """kube's ``EtcdServer.DoServerCheck``: a read through the storage client; ``ok`` or the error."""
    try:
        async with asyncio.timeout(limit):
            await client.current_revision()
    except TimeoutError:
        return ProbeResult("False", error="context deadline exceeded")
    except StorageError as err:
        return ProbeResult("False", error=str(err) or type(err).__name__)
    return ProbeResult("True", "ok")


def default_probes(client: EtcdClient) -> dict[str, Probe]:
    """kube 1.33's ``serversToValidate`` for one etcd (one storage backend: ``etcd-0``)."""
    return {
        "scheduler": lambda: http_probe("127.0.0.1", SCHEDULER_PORT, "/healthz"),
        "controller-manager": lambda: http_probe("127.0.0.1", CONTROLLER_MANAGER_PORT, "/healthz"),
        "etcd-0": lambda: etcd_probe(client),
    }


def component_status(name: str, result: ProbeResult) -> dict[str, Any]:
    """A v1 ComponentStatus as kube serializes it (empty message/error omitted)."""
    condition: dict[str, Any] = {"type": "Healthy", "status": result.status}
    if result.message:
        condition["message"] = result.message
    if result.error:
        condition["error"] = result.error
    return {"kind": "ComponentStatus", "apiVersion": "v1",
            "metadata": {"name": name, "creationTimestamp": None}, "conditions": [condition]}


def _cells(obj: Obj, _now: datetime) -> list[Any]:
    """kube's ``printComponentStatus``: the Healthy condition decides the status column."""
    status, message, error = "Unknown", "", ""
    for cond in obj.get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "Healthy":
            status = "Healthy" if cond.get("status") == "True" else "Unhealthy"
            message, error = str(cond.get("message") or ""), str(cond.get("error") or "")
            break
    return [(obj.get("metadata") or {}).get("name", ""), status, message, error]


PRINTER = Printer((
    name_column(),
    column("Status", "string", "Status of the component conditions"),
    column("Message", "string", "Message of the component conditions"),
    column("Error", "string", "Error of the component conditions"),
), _cells)


class ComponentStatusStrategy(Strategy):
    table_printer = PRINTER


class ComponentStatusStore(Store):
    """get/list run the probes; nothing is read from or written to etcd, nothing to watch."""

    def __init__(self, info: ResourceInfo, strategy: Strategy, client: EtcdClient, key_prefix: str,
                 probes: dict[str, Probe] | None = None) -> None:
        super().__init__(info, strategy, client, key_prefix)
        self.probes = probes if probes is not None else default_probes(client)
        self.deprecation_warning = DEPRECATION

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def get(self, namespace: str, name: str, resource_version: str = "") -> dict[str, Any]:
        probe = self.probes.get(name)
        if probe is None:
            # kube returns a plain Go error here: a 500 with no reason.
            raise apierrors.unknown_error(f"Component not found: {name}")
        return component_status(name, await probe())

    async def list(self, namespace: str, opts: ListOptions) -> ListResult:
        names = list(self.probes)
        results = await asyncio.gather(*(self.probes[n]() for n in names))
        items = [component_status(n, r) for n, r in zip(names, results, strict=True)]
        if opts.predicate is not None:
            items = [obj for obj in items if opts.predicate(obj)]
        return ListResult([(obj, self.codec.encode(obj)) for obj in items], 0)
