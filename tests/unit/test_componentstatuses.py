"""componentstatuses' probes against real sockets: kube's HTTPS /healthz probe and its wording."""

from __future__ import annotations

import asyncio
import socket
import ssl
from datetime import UTC, datetime
from pathlib import Path

from coreapi import componentstatuses as cs
from genericapi.server.certs import ensure_certificates


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_nothing_listening_is_kubes_connection_refused() -> None:
    port = _closed_port()
    result = asyncio.run(cs.http_probe("127.0.0.1", port, "/healthz"))
    assert result == cs.ProbeResult(
        "False", f'Get "https://127.0.0.1:{port}/healthz": dial tcp 127.0.0.1:{port}: connect: connection refused')


async def _serve_and_probe(tmp: Path, status_line: str, body: bytes) -> cs.ProbeResult:
    paths = ensure_certificates(tmp)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(*paths.pair("apiserver"))
    seen: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(f"HTTP/1.1 {status_line}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ctx)
    port = server.sockets[0].getsockname()[1]
    try:
        result = await cs.http_probe("127.0.0.1", port, "/healthz")
    finally:
        server.close()
        await server.wait_closed()
    assert seen and seen[0].startswith(b"GET /healthz HTTP/1.1\r\n")
    return result


def test_a_component_that_answers_is_reported_truthfully(tmp_path: Path) -> None:
    assert asyncio.run(_serve_and_probe(tmp_path, "200 OK", b"ok")) == cs.ProbeResult("True", "ok")
    failed = asyncio.run(_serve_and_probe(tmp_path, "500 Internal Server Error", b"[-]etcd failed"))
    assert failed == cs.ProbeResult("False", "HTTP probe failed with statuscode: 500")
    moved = asyncio.run(_serve_and_probe(tmp_path, "302 Found", b"elsewhere"))
    assert moved == cs.ProbeResult("Unknown", "Probe terminated redirects, Response body: elsewhere")


def test_objects_and_table_cells() -> None:
    healthy = cs.component_status("etcd-0", cs.ProbeResult("True", "ok"))
    assert healthy == {"kind": "ComponentStatus", "apiVersion": "v1",
                       "metadata": {"name": "etcd-0", "creationTimestamp": None},
                       "conditions": [{"type": "Healthy", "status": "True", "message": "ok"}]}
    now = datetime.now(UTC)
    assert cs.PRINTER.cells(healthy, now) == ["etcd-0", "Healthy", "ok", ""]
    down = cs.component_status("etcd-0", cs.ProbeResult("False", error="context deadline exceeded"))
    assert cs.PRINTER.cells(down, now) == ["etcd-0", "Unhealthy", "", "context deadline exceeded"]
    assert cs.PRINTER.cells({"metadata": {"name": "x"}}, now) == ["x", "Unknown", "", ""]
    assert [c["name"] for c in cs.PRINTER.columns] == ["Name", "Status", "Message", "Error"]
