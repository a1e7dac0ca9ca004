"""A test admission webhook: its own process, HTTPS with a certificate from a test CA.

One process answers every case the admission tests need; the request path picks the behaviour,
``/<mode>/<key>=<value>/...`` (URL-quoted values: kube refuses query strings in webhook URLs),
and every AdmissionReview received is recorded:

- ``/allow``: allowed
- ``/deny/message=M/code=C/reason=R``: refused with that Status (any part may be left out)
- ``/label/key=K/value=V``: allowed with a JSONPatch that sets a label (mutating)
- ``/patch/ops=<urlsafe base64 JSON patch>``: allowed with that patch
- ``/warn/text=T``: allowed with a warning and an audit annotation ``checked: yes``
- ``/sleep/seconds=S``: allowed after S seconds
- ``/deny-label/key=K``: refused when the object carries label K, else allowed
- ``/error-500`` (plain text 500), ``/junk`` (not JSON), ``/wrong-uid``, ``/wrong-version``
  (an admission.k8s.io/v1beta1 answer), ``/no-response``
- ``GET /requests`` (``?clear=1`` empties the record): ``[{"mode": ..., "query": ..., "review": ...,
  "http_version": "1.1" or "2"}, ...]``

``AdmissionWebhook.start(pki)`` runs it (``make_pki`` in conversion_webhook writes the CA and
certificate); ``python admission_webhook.py --cert C --key K`` prints ``READY <port>``. By default it
is aiohttp's server, HTTP/1.1 only (no ALPN); ``http2=True`` (``--http2``) serves the same answers
with hypercorn, which offers ``h2`` and ``http/1.1`` by ALPN as Go webhook servers do.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import socket
import ssl
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from support.conversion_webhook import Pki


def _labels(obj: Any) -> dict[str, str]:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    labels = meta.get("labels") if isinstance(meta, dict) else None
    return labels if isinstance(labels, dict) else {}


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def answer(mode: str, query: dict[str, str], review: dict[str, Any]) -> dict[str, Any] | None:
    """The AdmissionReview to send back for ``review`` (None: no usable answer)."""
    request = review.get("request") or {}
    response: dict[str, Any] = {"uid": request.get("uid", ""), "allowed": True}
    obj = request.get("object")
    if mode == "deny":
        status: dict[str, Any] = {}
        for key in ("message", "reason"):
            if key in query:
                status[key] = query[key]
        if "code" in query:
            status["code"] = int(query["code"])
        response["allowed"] = False
        response["status"] = status
    elif mode == "deny-label":
        if query.get("key", "") in _labels(obj) or query.get("key", "") in _labels(request.get("oldObject")):
            response["allowed"] = False
            response["status"] = {"message": f"label {query.get('key')} is not allowed"}
    elif mode == "label":
        key, value = query.get("key", "webhook"), query.get("value", "was-here")
        if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict) and "labels" in obj["metadata"]:
            ops = [{"op": "add", "path": f"/metadata/labels/{_escape(key)}", "value": value}]
        else:
            ops = [{"op": "add", "path": "/metadata/labels", "value": {key: value}}]
        if _labels(obj).get(key) == value:
            ops = []  # nothing to change: an empty patch
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(ops).encode()).decode()
    elif mode == "patch":
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(base64.urlsafe_b64decode(query["ops"])).decode()
    elif mode == "warn":
        response["warnings"] = [query.get("text", "be careful")]
        response["auditAnnotations"] = {"checked": "yes"}
    elif mode == "wrong-uid":
        response["uid"] = "not-the-uid"
    elif mode == "no-response":
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}
    api_version = "admission.k8s.io/v1beta1" if mode == "wrong-version" else review.get("apiVersion")
    return {"apiVersion": api_version, "kind": "AdmissionReview", "response": response}


async def serve(cert: str, key: str, port: int) -> None:
    from aiohttp import web  # the server's own process only

    record: list[dict[str, Any]] = []

    async def requests(request: web.Request) -> web.StreamResponse:
        out = web.json_response(record)
        if request.query.get("clear"):
            record.clear()
        return out

    async def handle(request: web.Request) -> web.StreamResponse:
        mode, *params = request.path.strip("/").split("/")
        query = dict(p.partition("=")[::2] for p in params)
        mode = mode or "allow"
        body = await request.read()
        try:
            review = json.loads(body)
        except ValueError:
            review = {"undecodable": body.decode("utf-8", "replace")}
        record.append({"mode": mode, "query": query, "review": review,
                       "http_version": f"{request.version.major}.{request.version.minor}"})
        if mode == "sleep":
            await asyncio.sleep(float(query.get("seconds", "5")))
        if mode == "error-500":
            return web.Response(status=500, text="boom", content_type="text/plain")
        if mode == "junk":
            return web.Response(status=200, text="this is not json", content_type="application/json")
        return web.json_response(answer(mode, query, review))

    app = web.Application()
    app.router.add_route("GET", "/requests", requests)
    app.router.add_route("POST", "/{tail:.*}", handle)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    await web.SockSite(runner, sock, ssl_context=ctx).start()
    print(f"READY {sock.getsockname()[1]}", flush=True)
    await asyncio.Event().wait()


async def serve_http2(cert: str, key: str, port: int) -> None:
    """The same answers from hypercorn, which speaks HTTP/2 to a client that picks ``h2`` by ALPN."""
    from hypercorn.asyncio import serve as hypercorn_serve  # the server's own process only
    from hypercorn.config import Config

    record: list[dict[str, Any]] = []

    async def respond(send: Any, status: int, body: bytes, content_type: str) -> None:
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", content_type.encode()),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        path, method = scope["path"], scope["method"]
        if method == "GET" and path == "/requests":
            out = json.dumps(record).encode()
            if b"clear" in scope.get("query_string", b""):
                record.clear()
            await respond(send, 200, out, "application/json")
            return
        mode, *params = path.strip("/").split("/")
        query = dict(p.partition("=")[::2] for p in params)
        mode = mode or "allow"
        try:
            review = json.loads(body)
        except ValueError:
            review = {"undecodable": body.decode("utf-8", "replace")}
        record.append({"mode": mode, "query": query, "review": review, "http_version": scope["http_version"]})
        if mode == "sleep":
            await asyncio.sleep(float(query.get("seconds", "5")))
        if mode == "error-500":
            await respond(send, 500, b"boom", "text/plain; charset=utf-8")
        elif mode == "junk":
            await respond(send, 200, b"this is not json", "application/json")
        else:
            await respond(send, 200, json.dumps(answer(mode, query, review)).encode(), "application/json")

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    config = Config()
    config.bind = [f"fd://{sock.fileno()}"]
    config.certfile, config.keyfile = cert, key
    config.alpn_protocols = ["h2", "http/1.1"]
    config.accesslog = config.errorlog = None
    loop = asyncio.get_running_loop()

    def quiet_cancellations(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        # hypercorn's connection tasks end cancelled when the process is stopped: not an error
        if not isinstance(context.get("exception"), asyncio.CancelledError):
            loop.default_exception_handler(context)

    loop.set_exception_handler(quiet_cancellations)
    print(f"READY {sock.getsockname()[1]}", flush=True)
    await hypercorn_serve(app, config)  # type: ignore[arg-type]


@dataclass
class AdmissionWebhook:
    """The webhook running in its own process (``stop()`` ends it)."""

    process: subprocess.Popen[str]
    port: int
    pki: Pki

    @classmethod
    def start(cls, pki: Pki, port: int = 0, http2: bool = False) -> AdmissionWebhook:
        proc = subprocess.Popen([sys.executable, __file__, "--cert", pki.cert_file, "--key", pki.key_file,
                                 "--port", str(port), *(["--http2"] if http2 else [])],
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        line = proc.stdout.readline()  # READY <port> once listening (or nothing if it died)
        if not line.startswith("READY "):
            proc.kill()
            raise RuntimeError(f"admission webhook did not start: {line!r}")
        return cls(proc, int(line.split()[1]), pki)

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def requests(self, clear: bool = False) -> list[dict[str, Any]]:
        ctx = ssl.create_default_context(cadata=self.pki.ca_pem.decode())
        url = self.url("/requests" + ("?clear=1" if clear else ""))
        with urllib.request.urlopen(url, context=ctx, timeout=10) as resp:
            out: list[dict[str, Any]] = json.loads(resp.read())
        return out

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()


@contextmanager
def serving(pki: Pki, http2: bool = False) -> Iterator[AdmissionWebhook]:
    """A test webhook for the length of a ``with`` block (a fixture's body): HTTP/1.1, or h2 by ALPN."""
    hook = AdmissionWebhook.start(pki, http2=http2)
    try:
        yield hook
    finally:
        hook.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--http2", action="store_true", help="hypercorn: h2 and http/1.1 by ALPN")
    args = parser.parse_args(argv)
    asyncio.run((serve_http2 if args.http2 else serve)(args.cert, args.key, args.port))


if __name__ == "__main__":
    main()
