"""The CSR signing controller: approved CertificateSigningRequests get a certificate from the cluster
CA, as kube-controller-manager's csrsigning controller (``--cluster-signing-cert-file`` /
``--cluster-signing-key-file``) signs for kube's four built-in signers.

A request is signed when it is Approved, not Failed, has no certificate yet and names one of
``kubernetes.io/kube-apiserver-client``, ``kubernetes.io/kube-apiserver-client-kubelet``,
``kubernetes.io/kubelet-serving`` or ``kubernetes.io/legacy-unknown``. Each signer's rules
(usages, ``system:nodes``, ``system:node:`` names, SANs) are kube's; a request that breaks them
gets a ``Failed`` condition (reason ``SignerValidationFailure``, kube's message) instead. The
certificate carries the request's subject and SANs and the requested usages, is valid from five
minutes ago (kube's backdate) for ``spec.expirationSeconds`` (at least 10 minutes, at most
``--cluster-signing-duration``, a year by default; long-lived ones end five minutes early, as
kube's ``PermissiveSigningPolicy``) and never past the CA's own expiry. Signing is
``cryptography``'s ``CertificateBuilder``; only the policy is ours.
"""

from __future__ import annotations

import base64
import copy
import re
import secrets
from collections.abc import Hashable
from datetime import UTC, datetime, timedelta
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, ObjectIdentifier
from genericapi.apimachinery.errors import APIError
from genericapi.controllers import ClientSet, Controller, Informer
from genericapi.registry.meta import now_rfc3339

from ..csr import APPROVED, FAILED, CSRError, conditions, organizations, parse_request

KUBE_APISERVER_CLIENT = "kubernetes.io/kube-apiserver-client"
KUBELET_CLIENT = "kubernetes.io/kube-apiserver-client-kubelet"
KUBELET_SERVING = "kubernetes.io/kubelet-serving"
LEGACY_UNKNOWN = "kubernetes.io/legacy-unknown"
SIGNERS = (KUBE_APISERVER_CLIENT, KUBELET_CLIENT, KUBELET_SERVING, LEGACY_UNKNOWN)
DEFAULT_DURATION = timedelta(hours=8760)
BACKDATE = timedelta(minutes=5)
SHORT = timedelta(hours=8)
MIN_DURATION = timedelta(minutes=10)

_KEY_USAGES = {"signing": "digital_signature", "digital signature": "digital_signature",
               "content commitment": "content_commitment", "key encipherment": "key_encipherment",
               "key agreement": "key_agreement", "data encipherment": "data_encipherment",
               "cert sign": "key_cert_sign", "crl sign": "crl_sign", "encipher only": "encipher_only",
               "decipher only": "decipher_only"}
_EXT_USAGES = {"any": ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE, "server auth": ExtendedKeyUsageOID.SERVER_AUTH,
               "client auth": ExtendedKeyUsageOID.CLIENT_AUTH, "code signing": ExtendedKeyUsageOID.CODE_SIGNING,
               "email protection": ExtendedKeyUsageOID.EMAIL_PROTECTION,
               "s/mime": ExtendedKeyUsageOID.EMAIL_PROTECTION,
               "ipsec end system": ObjectIdentifier("1.3.6.1.5.5.7.3.5"),
               "ipsec tunnel": ObjectIdentifier("1.3.6.1.5.5.7.3.6"),
               "ipsec user": ObjectIdentifier("1.3.6.1.5.5.7.3.7"),
               "timestamping": ExtendedKeyUsageOID.TIME_STAMPING, "ocsp signing": ExtendedKeyUsageOID.OCSP_SIGNING,
               "microsoft sgc": ObjectIdentifier("1.3.6.1.4.1.311.10.3.3"),
               "netscape sgc": ObjectIdentifier("2.16.840.1.113730.4.1")}
#: The usage sets kube accepts for kubelet certificates (with key encipherment for RSA keys, or without).
_KUBELET_CLIENT_USAGES = ({"digital signature", "key encipherment", "client auth"},
                          {"digital signature", "client auth"})
_KUBELET_SERVING_USAGES = ({"digital signature", "key encipherment", "server auth"},
                           {"digital signature", "server auth"})


def parse_go_duration(text: str) -> timedelta:
    """A Go ``time.Duration`` flag value (``8760h0m0s``, ``90m``, ``1h30m``); ValueError otherwise."""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", text)
    if not text or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"invalid duration {text!r}")
    total = timedelta(seconds=sum(float(n) * units[u] for n, u in parts))
    if total <= timedelta(0):
        raise ValueError(f"duration {text!r} must be positive")
    return total


class SignerRefused(ValueError):
    """The request breaks its signer's rules (kube's message)."""


def _sans(req: x509.CertificateSigningRequest) -> x509.SubjectAlternativeName | None:
    try:
        return req.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return None


def _common_name(req: x509.CertificateSigningRequest) -> str:
    names = req.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)
    return str(names[0].value) if names else ""


def _node_rules(req: x509.CertificateSigningRequest, usages: list[str], serving: bool) -> None:
    if organizations(req) != ["system:nodes"]:
        raise SignerRefused("subject organization is not system:nodes")
    sans = _sans(req)
    dns = sans.get_values_for_type(x509.DNSName) if sans else []
    ips = sans.get_values_for_type(x509.IPAddress) if sans else []
    emails = sans.get_values_for_type(x509.RFC822Name) if sans else []
    uris = sans.get_values_for_type(x509.UniformResourceIdentifier) if sans else []
    if serving:
        if not dns and not ips:
            raise SignerRefused("DNS or IP subjectAltName is required")
    else:
        if dns:
            raise SignerRefused("DNS subjectAltNames are not allowed")
        if emails:
            raise SignerRefused("Email subjectAltNames are not allowed")
        if ips:
            raise SignerRefused("IP subjectAltNames are not allowed")
    if serving and emails:
        raise SignerRefused("Email subjectAltNames are not allowed")
    if uris:
        raise SignerRefused("URI subjectAltNames are not allowed")
    allowed = _KUBELET_SERVING_USAGES if serving else _KUBELET_CLIENT_USAGES
    if set(usages) not in allowed:
        raise SignerRefused(f"usages did not match [{' '.join(sorted(allowed[0]))}]")
    if not _common_name(req).startswith("system:node:"):
        raise SignerRefused("subject common name does not begin with system:node:")


def check_signer_rules(signer: str, req: x509.CertificateSigningRequest, usages: list[str]) -> None:
    """kube's per-signer ``isRequestForSignerFn``; SignerRefused when the signer may not sign it."""
    if signer == KUBE_APISERVER_CLIENT:
        for usage in usages:
            if usage not in ("digital signature", "key encipherment", "client auth"):
                raise SignerRefused(f"invalid usage for client certificate: {usage}")
        if "client auth" not in usages:
            raise SignerRefused("missing required usage for client certificate: client auth")
    elif signer == KUBELET_CLIENT:
        _node_rules(req, usages, serving=False)
    elif signer == KUBELET_SERVING:
        _node_rules(req, usages, serving=True)


class CertificateAuthority:
    """The cluster CA's certificate and key, and kube's signing policy."""

    def __init__(self, cert_pem: bytes, key_pem: bytes, duration: timedelta = DEFAULT_DURATION) -> None:
        self.cert = x509.load_pem_x509_certificate(cert_pem)
        key = serialization.load_pem_private_key(key_pem, None)
        if not isinstance(key, (ec.EllipticCurvePrivateKey, rsa.RSAPrivateKey, ed25519.Ed25519PrivateKey)):
            raise ValueError("the cluster signing key must be an EC, RSA or Ed25519 private key")
        self.key = key
        self.duration = duration

    def lifetime(self, expiration_seconds: int | None) -> timedelta:
        if expiration_seconds is None:
            return self.duration
        return min(max(timedelta(seconds=expiration_seconds), MIN_DURATION), self.duration)

    def sign(self, req: x509.CertificateSigningRequest, usages: list[str], expiration_seconds: int | None,
             now: datetime | None = None) -> bytes:
        now = now or datetime.now(UTC)
        ttl = self.lifetime(expiration_seconds)
        not_after = now + ttl if ttl < SHORT else now + ttl - BACKDATE
        ca_end = self.cert.not_valid_after_utc
        if not now < ca_end:
            raise SignerRefused(f"refusing to sign a certificate that expired in the past: NotAfter={ca_end}")
        not_after = min(not_after, ca_end)
        flags = {name: False for name in ("digital_signature", "content_commitment", "key_encipherment",
                                          "data_encipherment", "key_agreement", "key_cert_sign", "crl_sign",
                                          "encipher_only", "decipher_only")}
        for usage in usages:
            if usage in _KEY_USAGES:
                flags[_KEY_USAGES[usage]] = True
        if not flags["key_agreement"]:
            flags["encipher_only"] = flags["decipher_only"] = False
        builder = (x509.CertificateBuilder().subject_name(req.subject).issuer_name(self.cert.subject)
                   .public_key(req.public_key()).serial_number(secrets.randbits(127) | 1)
                   .not_valid_before(now - BACKDATE).not_valid_after(not_after)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True))
        if any(flags.values()):
            builder = builder.add_extension(x509.KeyUsage(**flags), critical=True)
        extended = list(dict.fromkeys(_EXT_USAGES[u] for u in usages if u in _EXT_USAGES))
        if extended:
            builder = builder.add_extension(x509.ExtendedKeyUsage(extended), critical=False)
        try:
            ski = self.cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
            builder = builder.add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski),
                                            critical=False)
        except x509.ExtensionNotFound:
            pass
        sans = _sans(req)
        if sans is not None and len(sans):
            builder = builder.add_extension(sans, critical=False)
        algorithm = None if isinstance(self.key, ed25519.Ed25519PrivateKey) else hashes.SHA256()
        cert = builder.sign(self.key, algorithm)
        return cert.public_bytes(serialization.Encoding.PEM)


class CSRSigningController(Controller):
    name = "csrsigning"

    def __init__(self, clients: ClientSet, authority: CertificateAuthority) -> None:
        super().__init__()
        self.authority = authority
        self.client = clients.client("certificates.k8s.io", "certificatesigningrequests")
        self.requests = Informer(self.client)
        self.informers.append(self.requests)
        self.requests.add_handler(self._event)

    def _event(self, etype: str, obj: dict[str, Any], _old: dict[str, Any] | None) -> None:
        if etype != "DELETED":
            self.queue.add(obj["metadata"]["name"])

    async def on_synced(self) -> None:
        for obj in self.requests.items():
            self._event("ADDED", obj, None)

    async def reconcile(self, key: Hashable) -> None:
        csr = self.requests.get("", str(key))
        if csr is None:
            return
        spec, status = csr.get("spec") or {}, csr.get("status") or {}
        if status.get("certificate") or spec.get("signerName") not in SIGNERS:
            return
        kinds = {c.get("type") for c in conditions(csr) if c.get("status", "True") == "True"}
        if APPROVED not in kinds or FAILED in kinds:
            return
        usages = [str(u) for u in spec.get("usages") or []]
        seconds = spec.get("expirationSeconds")
        try:
            req = parse_request(base64.b64decode(spec.get("request") or ""))
            check_signer_rules(str(spec["signerName"]), req, usages)
            pem = self.authority.sign(req, usages, seconds if isinstance(seconds, int) else None)
        except (CSRError, SignerRefused, ValueError) as err:
            await self._fail(csr, str(err))
            return
        fixed = copy.deepcopy(csr)
        fixed.setdefault("status", {})["certificate"] = base64.b64encode(pem).decode()
        await self._update_status(fixed)

    async def _fail(self, csr: dict[str, Any], message: str) -> None:
        fixed = copy.deepcopy(csr)
        now = now_rfc3339()
        fixed.setdefault("status", {}).setdefault("conditions", []).append(
            {"type": FAILED, "status": "True", "reason": "SignerValidationFailure", "message": message,
             "lastUpdateTime": now, "lastTransitionTime": now})
        await self._update_status(fixed)

    async def _update_status(self, csr: dict[str, Any]) -> None:
        try:
            await self.client.update("", csr["metadata"]["name"], csr, subresource="status")  # 409: retried
        except APIError as err:
            if err.code != 404:
                raise
