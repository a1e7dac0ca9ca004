"""creates/s with one no-op validating admission webhook ÷ creates/s with none (issue 13: target >= 0.6).

``bench.py`` calls ``bench_webhook`` on its running chain: the webhook is a separate process (HTTPS
with a throwaway CA, answering every AdmissionReview ``allowed`` at once), registered for
ConfigMap creates in one namespace by a ValidatingWebhookConfiguration; the creates without it
are timed before and after and averaged. ``python webhook_bench.py --serve CERT KEY`` runs the
webhook alone (prints ``READY <port>``).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import datetime
import ipaddress
import json
import socket
import ssl
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

NAME = "bench-noop-webhook"


def _certificates(directory: Path) -> tuple[bytes, str, str]:
    """A CA and a serving certificate for 127.0.0.1: (CA PEM, cert file, key file)."""
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    later = now + datetime.timedelta(days=1)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bench-webhook-ca")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now).not_valid_after(later)
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, NAME)]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(later)
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    cert_file, key_file = directory / "tls.crt", directory / "tls.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return ca.public_bytes(serialization.Encoding.PEM), str(cert_file), str(key_file)


async def serve(cert: str, key: str) -> None:
    from aiohttp import web

    calls = 0

    async def review(request: web.Request) -> web.Response:
        nonlocal calls
        calls += 1
        body = json.loads(await request.read())
        return web.json_response({"apiVersion": body.get("apiVersion"), "kind": "AdmissionReview",
                                  "response": {"uid": body["request"]["uid"], "allowed": True}})

    async def count(_request: web.Request) -> web.Response:
        return web.json_response({"calls": calls})

    app = web.Application()
    app.router.add_post("/validate", review)
    app.router.add_get("/count", count)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    await web.SockSite(runner, sock, ssl_context=ctx).start()
    print(f"READY {sock.getsockname()[1]}", flush=True)
    await asyncio.Event().wait()


async def bench_webhook(session: aiohttp.ClientSession, gateway: str, n: int,
                        run_concurrently: Callable[[int, Any], Awaitable[float]],
                        configmap: Callable[[str, int], dict[str, Any]]) -> dict[str, float]:
    ns = "bench-webhook"
    async with session.post(gateway + "/api/v1/namespaces",
                            json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}) as r:
        assert r.status == 201, await r.text()
    url = gateway + f"/api/v1/namespaces/{ns}/configmaps"
    configs = gateway + "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
    rounds = iter(range(3))

    async def timed() -> float:
        k = next(rounds)

        async def create(i: int) -> None:
            async with session.post(url, json=configmap(f"w{k}-{i:06d}", 200)) as r:
                assert r.status == 201, await r.text()
        return await run_concurrently(n, create)

    with tempfile.TemporaryDirectory(prefix="bench-webhook-") as tmp:
        ca, cert, key = _certificates(Path(tmp))
        proc = await asyncio.create_subprocess_exec(sys.executable, __file__, "--serve", cert, key,
                                                    stdout=asyncio.subprocess.PIPE)
        try:
            assert proc.stdout is not None
            ready = (await proc.stdout.readline()).decode()
            assert ready.startswith("READY "), ready
            hook = f"https://127.0.0.1:{int(ready.split()[1])}"
            ctx = ssl.create_default_context(cadata=ca.decode())
            none_before = await timed()
            config = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                      "metadata": {"name": NAME}, "webhooks": [{
                          "name": "noop.bench.kubechain.io", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                          "clientConfig": {"url": hook + "/validate", "caBundle": base64.b64encode(ca).decode()},
                          "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                                     "resources": ["configmaps"]}],
                          "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}}]}
            async with session.post(configs, json=config) as r:
                assert r.status == 201, await r.text()
            async with aiohttp.ClientSession() as plain:
                for _ in range(300):  # until the webhook is called (watch caches)
                    async with session.post(url + "?dryRun=All", json=configmap("probe", 10)) as r:
                        assert r.status == 201, await r.text()
                    async with plain.get(hook + "/count", ssl=ctx) as r:
                        if (await r.json())["calls"]:
                            break
                    await asyncio.sleep(0.05)
                else:
                    raise AssertionError("the bench webhook was never called")
                with_hook = await timed()
                async with plain.get(hook + "/count", ssl=ctx) as r:
                    calls = (await r.json())["calls"]
            async with session.delete(f"{configs}/{NAME}") as r:
                assert r.status == 200, await r.text()
            await asyncio.sleep(1)  # the configuration leaves the watch caches
            none_after = await timed()
        finally:
            proc.terminate()
            await proc.wait()
    none_s = (none_before + none_after) / 2
    return {"creates_per_s_none": n / none_s, "creates_per_s_webhook": n / with_hook, "ratio": none_s / with_hook,
            "none_before_per_s": n / none_before, "none_after_per_s": n / none_after, "webhook_calls": calls}


def line(w: dict[str, float]) -> str:
    return (f"creates/s with one no-op validating webhook {w['creates_per_s_webhook']:.0f} / none "
            f"{w['creates_per_s_none']:.0f} = {w['ratio']:.2f}  (target >= 0.6)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--serve", nargs=2, metavar=("CERT", "KEY"), required=True)
    args = parser.parse_args()
    asyncio.run(serve(*args.serve))
