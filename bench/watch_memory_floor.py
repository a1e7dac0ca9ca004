"""The floor under the gateway's memory per open watch (issue 15): the same TLS set-up as the
gateway (uvloop, the chain's certificates, client certificates optional) with N open streaming
answers, in a server process of its own, each variant measured as VmRSS growth per connection.

  tcp      uvloop plain TCP server, a bare asyncio.Protocol answering a chunked head and one chunk
  tls      the same over TLS (tls-nocert: no client certificate asked; tls-notickets: no session tickets)
  uvicorn  uvicorn with the gateway's HTTP protocol (tls.ClientCertProtocol) and an ASGI app that
           sends the head and one chunk, then waits for the disconnect (one task, as a watch's
           least)
  tasks2   as uvicorn, the app waiting as proxy._stream does (a pump task and a disconnect task)

    .venv/bin/python bench/watch_memory_floor.py --connections 300 [--variants tls,uvicorn,tasks2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import ssl
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import aiohttp
from genericapi.server.certs import ensure_certificates


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def server_main(variant: str, pki: str, port: int) -> None:
    import uvloop
    paths = ensure_certificates(pki)
    cert, key = paths.pair("apiserver")
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
    chunk = b"%x\r\n%s\r\n" % (len(b'{"type":"ADDED"}\n'), b'{"type":"ADDED"}\n')

    if variant.startswith(("tls", "tcp")):
        class Stream(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                self.transport = transport

            def data_received(self, data: bytes) -> None:
                self.transport.write(head + chunk)  # type: ignore[attr-defined]

        async def main() -> None:
            ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=paths.ca)
            ctx.load_cert_chain(cert, key)
            ctx.verify_mode = ssl.CERT_NONE if "nocert" in variant else ssl.CERT_OPTIONAL
            if "notickets" in variant:
                ctx.num_tickets = 0
            server = await asyncio.get_running_loop().create_server(Stream, "127.0.0.1", port,
                                                                    ssl=None if variant == "tcp" else ctx)
            print("ready", flush=True)
            await server.serve_forever()
        uvloop.run(main())
        return

    import uvicorn
    from genericapi.server.tls import ClientCertProtocol

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b'{"type":"ADDED"}\n', "more_body": True})
        if variant == "uvicorn":
            while (await receive())["type"] != "http.disconnect":
                pass
            return

        async def pump() -> None:
            await asyncio.Event().wait()

        async def disconnected() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
        tasks = {asyncio.create_task(pump()), asyncio.create_task(disconnected())}
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for t in tasks:
            t.cancel()

    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off", loop="none",
                            http=ClientCertProtocol, access_log=False, ssl_certfile=cert, ssl_keyfile=key,
                            ssl_ca_certs=paths.ca, ssl_cert_reqs=ssl.CERT_OPTIONAL)

    async def main_uv() -> None:
        server = uvicorn.Server(config)
        task = asyncio.create_task(server.serve())
        while not server.started:  # noqa: ASYNC110 (uvicorn offers no event for it)
            await asyncio.sleep(0.05)
        print("ready", flush=True)
        await task
    uvloop.run(main_uv())


async def measure(variant: str, pki: str, connections: int) -> float:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(  # noqa: ASYNC220 (started once, before measuring)
        [sys.executable, __file__, "--serve", variant, "--pki", pki, "--port", str(port)], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"ready"
        paths = ensure_certificates(pki)
        ctx = ssl.create_default_context(cafile=paths.ca)
        ctx.load_cert_chain(*paths.pair("admin"))
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx, limit=0),
                                        timeout=aiohttp.ClientTimeout(total=None, sock_read=None))
        url = f"{'http' if variant == 'tcp' else 'https'}://127.0.0.1:{port}/api/v1/watch"
        responses: list[aiohttp.ClientResponse] = []

        async def open_one() -> None:
            r = await session.get(url)
            await r.content.readline()
            responses.append(r)
        for _ in range(2):  # warm-up
            await open_one()
        for r in responses:
            r.close()
        responses.clear()
        await asyncio.sleep(1)
        before = rss_kib(proc.pid)
        for i in range(0, connections, 50):
            await asyncio.gather(*(open_one() for _ in range(min(50, connections - i))))
        await asyncio.sleep(2)
        after = rss_kib(proc.pid)
        for r in responses:
            r.close()
        await session.close()
        return (after - before) / connections
    finally:
        proc.terminate()
        proc.wait(10)


async def main_async(args: argparse.Namespace) -> None:
    pki = tempfile.mkdtemp(prefix="wmfloor-")
    ensure_certificates(pki)
    print(f"{args.connections} connections, load {os.getloadavg()[0]:.1f}")
    for variant in args.variants.split(","):
        print(f"  {variant}: {await measure(variant, pki, args.connections):.1f} KiB per connection", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connections", type=int, default=300)
    parser.add_argument("--variants", default="tcp,tls,tls-nocert,uvicorn,tasks2")
    parser.add_argument("--serve")
    parser.add_argument("--pki")
    parser.add_argument("--port", type=int)
    args = parser.parse_args()
    if args.serve:
        server_main(args.serve, args.pki, args.port)
        return
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
