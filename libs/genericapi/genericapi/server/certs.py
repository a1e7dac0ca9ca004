"""Self-signed credentials for a chain that was given none (``MaybeDefaultWithSelfSignedCerts``).

One CA signs: the gateway's serving certificate, the backends' serving certificate, the
gateway's proxy client certificate (backends accept only it) and an admin client certificate
in ``system:masters`` for the kubeconfig. etcd has a CA of its own (``etcd-ca.crt``, kubeadm's
``etcd/ca.crt``; flat names, as Secret keys must be): it signs etcd's serving and peer certificate
and the API servers' etcd client certificate, so no certificate the API's CA issues to a user
opens etcd. Files are written once and reused on later starts.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=365)
SERVING_NAMES = ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                 "kubernetes.default.svc.cluster.local")
SERVING_IPS = ("127.0.0.1", "::1", "10.0.0.1")


@dataclass(frozen=True)
class CertPaths:
    dir: Path

    def file(self, name: str) -> str:
        return str(self.dir / name)

    @property
    def ca(self) -> str:
        return self.file("ca.crt")

    @property
    def ca_key(self) -> str:
        return self.file("ca.key")

    def pair(self, name: str) -> tuple[str, str]:
        return self.file(f"{name}.crt"), self.file(f"{name}.key")

    @property
    def etcd_ca(self) -> str:
        """The CA etcd trusts for clients and peers (kubeadm's ``etcd/ca.crt``)."""
        return self.file("etcd-ca.crt")

    @property
    def etcd_server(self) -> tuple[str, str]:
        """etcd's serving certificate, also its peer certificate (server and client usages)."""
        return self.pair("etcd-server")

    @property
    def etcd_client(self) -> tuple[str, str]:
        """The API servers' etcd client certificate (kubeadm's ``apiserver-etcd-client``)."""
        return self.pair("apiserver-etcd-client")

    @property
    def sa_key(self) -> str:
        """The service account token signing key (kubeadm's ``sa.key``)."""
        return self.file("sa.key")

    @property
    def sa_pub(self) -> str:
        """Its public half, which whoever checks tokens reads (``sa.pub``)."""
        return self.file("sa.pub")


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write(path: str, data: bytes, private: bool = False) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    if private:
        os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _name(cn: str, orgs: tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


def _general_names(values: Sequence[str]) -> list[x509.GeneralName]:
    """Host names and IP addresses as subject alternative names (an IP literal becomes an IP entry)."""
    out: list[x509.GeneralName] = []
    for value in (v.strip() for v in values):
        if not value:
            continue
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(value)))
        except ValueError:
            out.append(x509.DNSName(value))
    return out


def _new_ca(crt: str, key_path: str, cn: str, now: datetime.datetime) -> None:
    ca_key = _key()
    ca_name = _name(cn)
    ca_cert = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now).not_valid_after(now + 10 * _VALIDITY)
               .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                            content_commitment=False, key_encipherment=False,
                                            data_encipherment=False, key_agreement=False,
                                            encipher_only=False, decipher_only=False), critical=True)
               .sign(ca_key, hashes.SHA256()))
    _write(key_path, _pem_key(ca_key), private=True)
    _write(crt, ca_cert.public_bytes(serialization.Encoding.PEM))


def ensure_certificates(directory: str | Path, extra_sans: Sequence[str] = ()) -> CertPaths:
    """Create any missing credential in ``directory``; existing files are kept.

    ``extra_sans`` (host names or IP addresses) are added to the serving certificates when they are
    issued, for links reached by other names than the defaults (compose service names, cluster DNS).
    The CA key is read only when something must be issued, so a directory holding every
    credential but the CA key (as a gateway's mounted Secret) is used as it is.
    """
    paths = CertPaths(Path(directory))
    paths.dir.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    if not os.path.exists(paths.ca):
        _new_ca(paths.ca, paths.ca_key, "kubechain-ca", now)
    extra_names = _general_names(extra_sans)

    def issue(name: str, subject: x509.Name, server: bool, client: bool, ca: str = "") -> None:
        crt, key_path = paths.pair(name)
        if os.path.exists(crt) and os.path.exists(key_path):
            return
        ca_crt = paths.file(f"{ca}ca.crt")
        ca_key = paths.file(f"{ca}ca.key")
        if ca and not os.path.exists(ca_crt):  # etcd's CA, made when first needed
            _new_ca(ca_crt, ca_key, "kubechain-etcd-ca", now)
        if not os.path.exists(ca_key):
            raise FileNotFoundError(f"{crt} is missing and the CA key {ca_key} that would issue it is not there")
        ca_key_loaded = serialization.load_pem_private_key(Path(ca_key).read_bytes(), None)
        ca_cert_loaded = x509.load_pem_x509_certificate(Path(ca_crt).read_bytes())
        assert isinstance(ca_key_loaded, ec.EllipticCurvePrivateKey)
        key = _key()
        usages = []
        if server:
            usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
        if client:
            usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(ca_cert_loaded.subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now).not_valid_after(now + _VALIDITY)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage(usages), critical=False))
        if server:
            sans: list[x509.GeneralName] = [x509.DNSName(n) for n in SERVING_NAMES]
            sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in SERVING_IPS]
            sans += [n for n in extra_names if n not in sans]
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(ca_key_loaded, hashes.SHA256())
        _write(key_path, _pem_key(key), private=True)
        _write(crt, cert.public_bytes(serialization.Encoding.PEM))

    issue("apiserver", _name("kube-apiserver"), server=True, client=False)
    issue("backend", _name("kubechain-backend"), server=True, client=False)
    issue("front-proxy-client", _name("front-proxy-client"), server=False, client=True)
    issue("admin", _name("kubernetes-admin", ("system:masters",)), server=False, client=True)
    issue("etcd-server", _name("kubechain-etcd"), server=True, client=True, ca="etcd-")
    issue("apiserver-etcd-client", _name("kube-apiserver-etcd-client"), server=False, client=True, ca="etcd-")
    if not os.path.exists(paths.sa_key):
        sa_key = _key()
        _write(paths.sa_pub, sa_key.public_key().public_bytes(serialization.Encoding.PEM,
                                                              serialization.PublicFormat.SubjectPublicKeyInfo))
        _write(paths.sa_key, _pem_key(sa_key), private=True)
    return paths


def issue_client_certificate(directory: str | Path, user: str, groups: Sequence[str] = (),
                             days: int = 365) -> tuple[bytes, bytes]:
    """A client certificate (CN = user, O = groups) and its key, signed by the CA in ``directory``:
    what ``kubeadm kubeconfig user`` issues. PEM bytes; nothing is written."""
    paths = CertPaths(Path(directory))
    ca_key = serialization.load_pem_private_key(Path(paths.ca_key).read_bytes(), None)
    ca_cert = x509.load_pem_x509_certificate(Path(paths.ca).read_bytes())
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = _key()
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    cert = (x509.CertificateBuilder().subject_name(_name(user, tuple(groups))).issuer_name(ca_cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)
