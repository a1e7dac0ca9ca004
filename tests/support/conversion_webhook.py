"""A test conversion webhook: its own process, HTTPS with a certificate from a test CA.

Converts a test CRD's objects between two versions: v1 ``spec.host`` + ``spec.port`` and v2
``spec.address: "host:port"`` (the group is whatever the objects carry). The request path picks
a behaviour, so one process serves every case the tests need:

- ``/convert``: a correct conversion
- ``/meta``: correct, but also adds a label and tampers with other metadata (generation, a
  stray field): kube keeps the label and puts the rest back
- ``/wrong-uid``, ``/wrong-count`` (no objects), ``/change-name``, ``/wrong-version`` (objects left
  at their version), ``/bad-label`` (an invalid label value), ``/no-response``, ``/v1beta1-response``
- ``/failure`` (``Failure`` with a message), ``/failure-nomessage``
- ``/slow`` (answers after 5 s), ``/error-500`` (plain text 500)

``GET /calls`` answers how many ConversionReviews each mode has answered and how many objects they
carried (``{"reviews": {mode: n}, "objects": {mode: n}}``): what tests count conversions with.

Run ``python conversion_webhook.py --cert C --key K`` (prints ``READY <port>``) or use
``WebhookProcess.start``. ``make_pki`` writes a CA and a serving certificate for given names.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import datetime
import ipaddress
import json
import os
import socket
import ssl
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# -- certificates ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Pki:
    ca_pem: bytes
    cert_file: str
    key_file: str

    @property
    def ca_bundle(self) -> str:
        """The CA as a CRD's ``caBundle`` field carries it (base64 of PEM)."""
        return base64.b64encode(self.ca_pem).decode()


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_pki(directory: Path, dns_names: list[str], ips: tuple[str, ...] = ("127.0.0.1",),
             ca_name: str = "conversion-webhook-test-ca") -> Pki:
    """A fresh CA and a serving certificate signed by it for ``dns_names`` and ``ips``."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(_name(ca_name)).issuer_name(_name(ca_name))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=2))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    cert = (x509.CertificateBuilder().subject_name(_name("conversion-webhook")).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .sign(ca_key, hashes.SHA256()))
    cert_file, key_file = directory / "tls.crt", directory / "tls.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    os.chmod(key_file, 0o600)
    return Pki(ca.public_bytes(serialization.Encoding.PEM), str(cert_file), str(key_file))


# -- conversion -----------------------------------------------------------------------------


def convert_object(obj: dict[str, Any], desired: str) -> dict[str, Any]:
    """v1 spec.host/spec.port <-> v2 spec.address; other fields kept."""
    out = {**obj, "spec": dict(obj.get("spec") or {})}
    current = str(obj.get("apiVersion", "")).rsplit("/", 1)[-1]
    target = desired.rsplit("/", 1)[-1]
    spec = out["spec"]
    if current == "v1" and target == "v2":
        host, port = spec.pop("host", None), spec.pop("port", None)
        if host is not None:
            spec["address"] = f"{host}:{port}" if port is not None else str(host)
    elif current == "v2" and target == "v1":
        address = spec.pop("address", None)
        if isinstance(address, str):
            host, _, port = address.rpartition(":")
            spec["host"] = host or port
            if host and port.isdigit():
                spec["port"] = int(port)
    out["apiVersion"] = desired
    return out


def answer(mode: str, review: dict[str, Any]) -> dict[str, Any]:
    """The ConversionReview a mode answers with."""
    request = review.get("request") or {}
    uid, desired = request.get("uid", ""), request.get("desiredAPIVersion", "")
    objects = list(request.get("objects") or [])
    converted = [convert_object(o, desired) for o in objects]
    status: dict[str, Any] = {"status": "Success"}
    if mode == "meta":
        for o in converted:
            meta = o.setdefault("metadata", {})
            meta["labels"] = {**(meta.get("labels") or {}), "converted-by": "webhook"}
            meta["generation"] = 42
            meta["garbage"] = "x"
    elif mode == "wrong-uid":
        uid = "not-" + uid
    elif mode == "wrong-count":
        converted = []
    elif mode == "change-name":
        for o in converted:
            o["metadata"] = {**o.get("metadata", {}), "name": o.get("metadata", {}).get("name", "") + "-renamed"}
    elif mode == "wrong-version":
        converted = objects
    elif mode == "bad-label":
        for o in converted:
            o["metadata"] = {**o.get("metadata", {}), "labels": {"bad": "-not valid-"}}
    elif mode == "failure":
        converted, status = [], {"status": "Failure", "message": "custom webhook conversion error"}
    elif mode == "failure-nomessage":
        converted, status = [], {"status": "Failure"}
    api_version = review.get("apiVersion", "apiextensions.k8s.io/v1")
    if mode == "v1beta1-response":
        api_version = "apiextensions.k8s.io/v1beta1"
    out: dict[str, Any] = {"apiVersion": api_version, "kind": "ConversionReview"}
    if mode != "no-response":
        out["response"] = {"uid": uid, "convertedObjects": converted, "result": status}
    return out


# -- server ---------------------------------------------------------------------------------


async def serve(cert: str, key: str, port: int) -> None:
    from aiohttp import web  # the server's own process only

    reviews: dict[str, int] = {}
    objects: dict[str, int] = {}

    async def calls(request: web.Request) -> web.StreamResponse:
        return web.json_response({"reviews": reviews, "objects": objects})

    async def handle(request: web.Request) -> web.StreamResponse:
        mode = request.path.strip("/") or "convert"
        reviews[mode] = reviews.get(mode, 0) + 1
        if mode == "slow":
            await asyncio.sleep(5)
        if mode == "error-500":
            return web.Response(status=500, text="boom", content_type="text/plain")
        review = await request.json()
        objects[mode] = objects.get(mode, 0) + len((review.get("request") or {}).get("objects") or [])
        return web.json_response(answer(mode, review))

    app = web.Application()
    app.router.add_route("GET", "/calls", calls)
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


@dataclass
class WebhookProcess:
    """The webhook running in its own process (``stop()`` ends it)."""

    process: subprocess.Popen[str]
    port: int
    pki: Pki

    @classmethod
    def start(cls, pki: Pki, port: int = 0) -> WebhookProcess:
        """Started on ``port`` (0: a free one); a stopped webhook comes back at its URL with its port."""
        proc = subprocess.Popen([sys.executable, __file__, "--cert", pki.cert_file, "--key", pki.key_file,
                                 "--port", str(port)], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the child prints READY <port> once listening (or dies)
        if not line.startswith("READY "):
            proc.kill()
            raise RuntimeError(f"conversion webhook did not start: {line!r}")
        return cls(proc, int(line.split()[1]), pki)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def calls(self) -> dict[str, dict[str, int]]:
        """The ConversionReviews answered so far, and the objects in them, by mode (``GET /calls``)."""
        ctx = ssl.create_default_context(cadata=self.pki.ca_pem.decode())
        with urllib.request.urlopen(f"{self.url}/calls", context=ctx, timeout=10) as r:
            counts: dict[str, dict[str, int]] = json.loads(r.read())
        return counts

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    asyncio.run(serve(args.cert, args.key, args.port))


if __name__ == "__main__":
    main()
