"""The one-shot certificate job of the container deployments (docker-compose.yml, deploy/).

``kubechain up`` makes its credentials itself; a deployment whose services run in separate
containers or pods needs them made once, before any service starts, and shared. This job:

- creates whatever is missing in ``--dir`` (CA, gateway and backend serving certificates with the
  extra ``--san`` names the links are reached by, the gateway's proxy client certificate, the admin
  client certificate, etcd's CA, serving/peer and API client certificates, the service-account
  signing key pair); existing files are kept, so a second start changes nothing;
- optionally (``--encryption-config PATH``) an EncryptionConfiguration encrypting Secrets with a
  fresh aescbc key, made once and kept (what ``kubechain up`` makes in its data dir);
- optionally hands the files to the services' user (``--owner UID:GID``, compose volumes);
- optionally writes an admin kubeconfig (``--kubeconfig PATH --server URL``), owned by whoever owns
  the folder it is written to (a host folder mounted into the container);
- optionally (``--secrets-namespace NS``, inside a Kubernetes pod) keeps the credentials in
  Secrets: ``<prefix>-ca`` (CA certificate and key, only this job reads it), ``<prefix>-pki``
  (every certificate and key but the CA key, mounted by the services) and ``<prefix>-kubeconfig``.
  Existing Secrets are read first and never replaced, so a rerun issues nothing new.

Run as ``python -m kubechain_cli.certs``.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import ssl
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml
from genericapi.server import encryptionconfig
from genericapi.server.certs import CertPaths, ensure_certificates

#: The credential pairs ensure_certificates issues (``<name>.crt`` / ``<name>.key``).
PAIRS = ("apiserver", "backend", "front-proxy-client", "admin", "etcd-server", "apiserver-etcd-client")
#: The encryption at rest configuration file kept with the credentials (``--encryption-config``).
ENCRYPTION_CONFIG = "encryption-config.yaml"
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def kubeconfig_text(server: str, paths: CertPaths) -> str:
    """An admin kubeconfig for ``server`` with the CA and admin credentials inlined."""
    def b64(path: str) -> str:
        return base64.b64encode(Path(path).read_bytes()).decode()

    crt, key = paths.pair("admin")
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "kubechain",
        "clusters": [{"name": "kubechain", "cluster": {"server": server, "certificate-authority-data": b64(paths.ca)}}],
        "users": [{"name": "kubechain-admin", "user": {"client-certificate-data": b64(crt),
                                                      "client-key-data": b64(key)}}],
        "contexts": [{"name": "kubechain", "context": {"cluster": "kubechain", "user": "kubechain-admin",
                                                       "namespace": "default"}}],
    }
    return yaml.safe_dump(config, sort_keys=False)


def secret_files(paths: CertPaths) -> dict[str, list[str]]:
    """File names per Secret suffix: the CA pair apart from what the services mount."""
    services = ["ca.crt", "etcd-ca.crt", *(f"{n}.{ext}" for n in PAIRS for ext in ("crt", "key")),
                "sa.key", "sa.pub", ENCRYPTION_CONFIG]
    return {"ca": ["ca.crt", "ca.key", "etcd-ca.crt", "etcd-ca.key"], "pki": services}


@dataclass
class SecretStore:
    """Secrets of one namespace through the Kubernetes API (the pod's service account)."""

    api: str
    namespace: str
    context: ssl.SSLContext
    token: str = ""

    @classmethod
    def in_cluster(cls, namespace: str) -> SecretStore:
        host, port = os.environ.get("KUBERNETES_SERVICE_HOST", ""), os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        if not host:
            raise RuntimeError("--secrets-namespace needs to run in a pod (KUBERNETES_SERVICE_HOST is not set)")
        if ":" in host:
            host = f"[{host}]"
        context = ssl.create_default_context(cafile=str(SERVICE_ACCOUNT_DIR / "ca.crt"))
        token = (SERVICE_ACCOUNT_DIR / "token").read_text().strip()
        return cls(f"https://{host}:{port}", namespace, context, token)

    def _request(self, method: str, path: str, body: dict[str, object] | None = None) -> tuple[int, dict[str, object]]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.api + path, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, context=self.context, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read() or b"{}")

    def get(self, name: str) -> dict[str, bytes] | None:
        status, obj = self._request("GET", f"/api/v1/namespaces/{self.namespace}/secrets/{name}")
        if status == 404:
            return None
        if status != 200:
            raise RuntimeError(f"reading Secret {self.namespace}/{name}: HTTP {status}: {obj.get('message', obj)}")
        data = obj.get("data") or {}
        assert isinstance(data, dict)
        return {k: base64.b64decode(v) for k, v in data.items()}

    def create(self, name: str, files: dict[str, bytes], labels: dict[str, str]) -> bool:
        """Create the Secret; False when another run created it first (it is kept as it is)."""
        body: dict[str, object] = {
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": self.namespace, "labels": labels},
            "data": {k: base64.b64encode(v).decode() for k, v in files.items()},
        }
        status, obj = self._request("POST", f"/api/v1/namespaces/{self.namespace}/secrets", body)
        if status == 409:
            return False
        if status != 201:
            raise RuntimeError(f"creating Secret {self.namespace}/{name}: HTTP {status}: {obj.get('message', obj)}")
        return True


def sync_secrets(store: SecretStore, prefix: str, directory: Path, sans: Sequence[str], server: str) -> list[str]:
    """Load existing Secrets into ``directory``, issue what is missing, create the missing Secrets.
    Returns the names of the Secrets created."""
    directory.mkdir(parents=True, exist_ok=True)
    existing: dict[str, dict[str, bytes] | None] = {}
    for suffix in ("ca", "pki", "kubeconfig"):
        existing[suffix] = found = store.get(f"{prefix}-{suffix}")
        for file_name, content in (found or {}).items():
            if suffix != "kubeconfig" and "/" not in file_name:
                (directory / file_name).write_bytes(content)
                os.chmod(directory / file_name, 0o600 if file_name.endswith(".key") else 0o644)
    paths = ensure_certificates(directory, sans)
    encryptionconfig.write_default(directory / ENCRYPTION_CONFIG)
    labels = {"app.kubernetes.io/name": "kubechain", "app.kubernetes.io/component": "certificates"}
    created = []
    for suffix, names in secret_files(paths).items():
        if existing[suffix] is not None or not all((directory / n).exists() for n in names):
            continue
        if store.create(f"{prefix}-{suffix}", {n: (directory / n).read_bytes() for n in names}, labels):
            created.append(f"{prefix}-{suffix}")
    if existing["kubeconfig"] is None and server:
        if store.create(f"{prefix}-kubeconfig", {"kubeconfig": kubeconfig_text(server, paths).encode()}, labels):
            created.append(f"{prefix}-kubeconfig")
    return created


def _parse_owner(value: str) -> tuple[int, int]:
    user, _, group = value.partition(":")
    try:
        return int(user), int(group or user)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid owner {value!r}: expected UID[:GID] as numbers") from None


def write_kubeconfig(path: Path, server: str, paths: CertPaths) -> None:
    """Write the kubeconfig (mode 0600), owned by the owner of its folder when we can give it away."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(kubeconfig_text(server, paths))
    os.chmod(tmp, 0o600)
    folder = path.parent.stat()
    if os.geteuid() == 0:
        os.chown(tmp, folder.st_uid, folder.st_gid)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m kubechain_cli.certs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", required=True, type=Path, help="where the credentials are kept")
    parser.add_argument("--san", action="append", default=[],
                        help="an extra host name or IP address of the serving certificates (repeat)")
    parser.add_argument("--owner", type=_parse_owner, default=None, help="UID[:GID] the files are given to")
    parser.add_argument("--kubeconfig", type=Path, default=None, help="write an admin kubeconfig here")
    parser.add_argument("--server", default="https://127.0.0.1:6443", help="the API URL the kubeconfig names")
    parser.add_argument("--secrets-namespace", default="", help="keep the credentials in Secrets of this namespace")
    parser.add_argument("--secret-prefix", default="kubechain", help="name prefix of those Secrets")
    parser.add_argument("--encryption-config", type=Path, default=None,
                        help="write an EncryptionConfiguration encrypting Secrets with a new aescbc key here "
                             "(kept when it exists)")
    args = parser.parse_args(argv)
    sans = [s for value in args.san for s in value.split(",") if s.strip()]
    if args.secrets_namespace:
        try:
            created = sync_secrets(SecretStore.in_cluster(args.secrets_namespace), args.secret_prefix,
                                   args.dir, sans, args.server)
        except (RuntimeError, OSError) as err:
            print(f"certificates: {err}", file=sys.stderr)
            raise SystemExit(1) from None
        print(f"certificates: created Secrets {', '.join(created)}" if created else "certificates: Secrets exist")
        return
    had_ca = (args.dir / "ca.crt").exists()
    paths = ensure_certificates(args.dir, sans)
    if args.encryption_config is not None:
        encryptionconfig.write_default(args.encryption_config)
    if args.owner is not None:
        for entry in [args.dir, *args.dir.iterdir()]:
            os.chown(entry, *args.owner)
    if args.kubeconfig is not None:
        write_kubeconfig(args.kubeconfig, args.server, paths)
    print(f"certificates: {'kept the existing' if had_ca else 'created a new'} CA in {args.dir}")


if __name__ == "__main__":
    main()
