"""A small aggregated API server for tests: ``wardle.example.com/v1alpha1`` ``flunders``, in memory.

Run as its own process (``python tests/support/sample_apiserver.py --port N --cert-dir DIR
--requestheader-ca CA``). It serves HTTPS with a certificate from its own test CA (written to
``DIR/ca.crt``, the APIService's caBundle) valid for ``<service>.<namespace>.svc``, ``localhost`` and
127.0.0.1, and trusts ``X-Remote-User`` / ``-Group`` / ``-Extra-*`` only from a client certificate
signed by ``--requestheader-ca`` with an allowed common name (the gateway's proxy client), as
kube's sample-apiserver does; anyone else is ``system:anonymous`` and gets 401 on the API.

It serves OpenAPI as an aggregated server does (``sample_openapi``): ``/openapi/v2`` with an ETag
(``If-None-Match`` answered 304), the ``/openapi/v3`` index and the hashed group-version document.
``--version`` picks the version it serves (default ``v1alpha1``); ``--openapi invalid`` makes both
OpenAPI endpoints answer 200 with a body that is not JSON (a broken backend for the gateway tests).

What tests can observe: a created flunder carries annotations naming the user that created it
(``wardle.example.com/created-by``) and every ``X-Remote-User`` header value the request carried
(``wardle.example.com/remote-user-headers``, a JSON list), so a forged header would show there.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import ipaddress
import itertools
import json
import ssl
import uuid
from pathlib import Path
from typing import Any

import uvicorn
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from genericapi.server.tls import ClientCertProtocol, peer_identity
from starlette.types import Receive, Scope, Send

from support.sample_openapi import GROUP, Documents

CREATED_BY = "wardle.example.com/created-by"
REMOTE_USER_HEADERS = "wardle.example.com/remote-user-headers"
#: What ``--openapi invalid`` serves: a 200 whose body is cut-off JSON.
BROKEN_OPENAPI = b'{"swagger": "2.0", "paths": {'


def resource_list(gv: str) -> dict[str, Any]:
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
            "resources": [{"name": "flunders", "singularName": "flunder", "namespaced": True, "kind": "Flunder",
                           "verbs": ["create", "delete", "get", "list"], "shortNames": ["fl"]}]}


def group_doc(version: str) -> dict[str, Any]:
    gv = {"groupVersion": f"{GROUP}/{version}", "version": version}
    return {"kind": "APIGroup", "apiVersion": "v1", "name": GROUP, "versions": [gv], "preferredVersion": gv}


# -- credentials ------------------------------------------------------------------------------
def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def write_credentials(directory: Path, service: str, namespace: str) -> tuple[Path, Path, Path]:
    """A test CA and a serving certificate it signs: (ca.crt, tls.crt, tls.key)."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "wardle-test-ca")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now)
          .not_valid_after(now + datetime.timedelta(days=2))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = [x509.DNSName(n) for n in (f"{service}.{namespace}.svc", "localhost")]
    names.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{service}.{namespace}.svc")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = (directory / "ca.crt", directory / "tls.crt", directory / "tls.key")
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(_pem_key(key))
    return paths


# -- the API ----------------------------------------------------------------------------------
class Wardle:
    def __init__(self, allowed_names: frozenset[str], version: str = "v1alpha1", openapi: str = "valid") -> None:
        self.allowed = allowed_names
        self.version = version
        self.gv = f"{GROUP}/{version}"
        self.openapi = Documents.build(version)
        self.broken_openapi = openapi == "invalid"
        self.flunders: dict[tuple[str, str], dict[str, Any]] = {}
        self.revision = itertools.count(1)

    def _user(self, scope: Scope) -> str:
        identity = peer_identity(scope)
        if identity is None or identity[0] not in self.allowed:
            return "system:anonymous"
        names = [v.decode("latin-1") for k, v in scope["headers"] if k.lower() == b"x-remote-user"]
        return names[-1] if names else "system:anonymous"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            msg = await receive()
            body += msg.get("body", b"")
            if not msg.get("more_body"):
                break
        raw = self.serve_openapi(scope)
        if raw is None:
            status, doc = self.serve(scope, body)
            raw = status, json.dumps(doc).encode(), []
        status, data, extra = raw
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
                                *extra]})
        await send({"type": "http.response.body", "body": data})

    def serve_openapi(self, scope: Scope) -> tuple[int, bytes, list[tuple[bytes, bytes]]] | None:
        """``/openapi/v2``, ``/openapi/v3`` and the v3 group-version document; None for other paths."""
        path = scope["path"].rstrip("/")
        docs = self.openapi
        if path not in ("/openapi/v2", "/openapi/v3", f"/openapi/v3/{docs.v3_key}") or scope["method"] != "GET":
            return None
        if self.broken_openapi:
            return 200, BROKEN_OPENAPI, []
        if path == "/openapi/v3":
            return 200, docs.v3_index, []
        data, etag = (docs.v2, docs.v2_etag) if path == "/openapi/v2" else (docs.v3, f'"{docs.v3_hash}"')
        if any(k.lower() == b"if-none-match" and v.decode("latin-1") == etag for k, v in scope["headers"]):
            return 304, b"", [(b"etag", etag.encode())]
        return 200, data, [(b"etag", etag.encode())]

    def serve(self, scope: Scope, body: bytes) -> tuple[int, Any]:
        path = scope["path"].rstrip("/")
        method = scope["method"]
        if path in ("/healthz", "/readyz", "/livez"):
            return 200, "ok"
        user = self._user(scope)
        if user == "system:anonymous":
            return 401, _status(401, "Unauthorized", "Unauthorized")
        gv = self.gv
        if path == "/apis":
            return 200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [group_doc(self.version)]}
        if path == f"/apis/{GROUP}":
            return 200, group_doc(self.version)
        if path == f"/apis/{gv}":
            return 200, resource_list(gv)
        parts = path.split("/")[4:]  # after /apis/<group>/<version>
        if not path.startswith(f"/apis/{gv}/") or not parts:
            return 404, _status(404, "NotFound", "the server could not find the requested resource")
        namespace = ""
        if parts[0] == "namespaces" and len(parts) >= 3:
            namespace, parts = parts[1], parts[2:]
        if parts[0] != "flunders" or len(parts) > 2:
            return 404, _status(404, "NotFound", "the server could not find the requested resource")
        name = parts[1] if len(parts) > 1 else ""
        if not name and method == "GET":
            items = [o for (ns, _n), o in sorted(self.flunders.items()) if not namespace or ns == namespace]
            return 200, {"kind": "FlunderList", "apiVersion": gv, "metadata": {"resourceVersion": "1"},
                         "items": items}
        if not name and method == "POST" and namespace:
            return self._create(scope, namespace, body, user)
        obj = self.flunders.get((namespace, name))
        if obj is None:
            return 404, _status(404, "NotFound", f'flunders.{GROUP} "{name}" not found', name)
        if method == "GET":
            return 200, obj
        if method == "DELETE":
            del self.flunders[(namespace, name)]
            return 200, obj
        return 405, _status(405, "MethodNotAllowed", "the server does not allow this method")

    def _create(self, scope: Scope, namespace: str, body: bytes, user: str) -> tuple[int, Any]:
        obj = json.loads(body)
        meta = obj.setdefault("metadata", {})
        name = meta.get("name", "")
        if (namespace, name) in self.flunders:
            return 409, _status(409, "AlreadyExists", f'flunders.{GROUP} "{name}" already exists', name)
        seen = [v.decode("latin-1") for k, v in scope["headers"] if k.lower() == b"x-remote-user"]
        meta.update(namespace=namespace, uid=str(uuid.uuid4()), resourceVersion=str(next(self.revision)),
                    creationTimestamp=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
        meta.setdefault("annotations", {}).update({CREATED_BY: user, REMOTE_USER_HEADERS: json.dumps(seen)})
        obj.update(apiVersion=self.gv, kind="Flunder")
        self.flunders[(namespace, name)] = obj
        return 201, obj


def _status(code: int, reason: str, message: str, name: str = "") -> dict[str, Any]:
    details = {"name": name, "group": GROUP, "kind": "flunders"} if name else None
    out: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                           "message": message, "reason": reason, "code": code}
    if details:
        out["details"] = details
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cert-dir", required=True, help="where the test CA and serving cert are written")
    parser.add_argument("--service", default="api")
    parser.add_argument("--namespace", default="wardle")
    parser.add_argument("--requestheader-ca", required=True, help="CA of the gateway's proxy client certificate")
    parser.add_argument("--requestheader-allowed-names", default="front-proxy-client")
    parser.add_argument("--version", default="v1alpha1", help="the version of wardle.example.com served")
    parser.add_argument("--openapi", choices=("valid", "invalid"), default="valid",
                        help="invalid: /openapi/v2 and /openapi/v3 answer 200 with a body that is not JSON")
    args = parser.parse_args()
    cert_dir = Path(args.cert_dir)
    if not (cert_dir / "tls.crt").exists():
        write_credentials(cert_dir, args.service, args.namespace)
    app = Wardle(frozenset(n for n in args.requestheader_allowed_names.split(",") if n), args.version, args.openapi)
    config = uvicorn.Config(app, host="127.0.0.1", port=args.port, log_level="warning", lifespan="off",
                            ssl_certfile=str(cert_dir / "tls.crt"), ssl_keyfile=str(cert_dir / "tls.key"),
                            ssl_ca_certs=args.requestheader_ca, ssl_cert_reqs=ssl.CERT_OPTIONAL,
                            http=ClientCertProtocol)
    asyncio.run(uvicorn.Server(config).serve())


if __name__ == "__main__":
    main()
