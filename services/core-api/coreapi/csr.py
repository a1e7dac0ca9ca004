"""CertificateSigningRequests (``certificates.k8s.io/v1``) as kube-apiserver stores them.

kube's registry strategies and validation: on create the status is cleared and ``spec.username``,
``uid``, ``groups`` and ``extra`` are the requesting user's; ``spec`` never changes afterwards. The
main resource changes only metadata; ``/approval`` only ``status.conditions`` (Approved, Denied,
...); ``/status`` conditions and ``status.certificate`` but not Approved/Denied. Validation: the
request is a PEM ``CERTIFICATE REQUEST`` with a valid signature, usages are given, known and not
repeated, the signer name is ``<domain>/<path>`` (never ``kubernetes.io/legacy-unknown`` in v1),
``expirationSeconds`` is at least 600; conditions have a type, Approved/Denied/Failed only status
True, no duplicates, Approved and Denied exclusive, none removed; a certificate is PEM
certificates and, once set, never changes. kube's admission plugins: CertificateApproval
(``approve`` on ``signers``), CertificateSigning (``sign``) and CertificateSubjectRestriction
(no ``system:masters`` through ``kubernetes.io/kube-apiserver-client``).
"""

from __future__ import annotations

import base64
import binascii
import copy
import re
from typing import Any

from cryptography import x509
from cryptography.x509.oid import NameOID
from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery.authorization import Attributes, Authorizer, Decision
from genericapi.apimachinery.errors import FieldError
from genericapi.apimachinery.gofmt import GoRendered
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.apimachinery.schemas import SchemaCatalog
from genericapi.apimachinery.user import current_user
from genericapi.registry.meta import now_rfc3339
from genericapi.registry.store import Store
from genericapi.storage.etcd import EtcdClient

from .kinds.groups import CertificateSigningRequestStrategy

GROUP = "certificates.k8s.io"
CSR_KEY = (GROUP, "certificatesigningrequests")
KIND = "CertificateSigningRequest"
LEGACY_UNKNOWN = "kubernetes.io/legacy-unknown"
KUBE_APISERVER_CLIENT = "kubernetes.io/kube-apiserver-client"
APPROVED, DENIED, FAILED = "Approved", "Denied", "Failed"
VALID_USAGES = sorted((
    "signing", "digital signature", "content commitment", "key encipherment", "key agreement",
    "data encipherment", "cert sign", "crl sign", "encipher only", "decipher only", "any", "server auth",
    "client auth", "code signing", "email protection", "s/mime", "ipsec end system", "ipsec tunnel",
    "ipsec user", "timestamping", "ocsp signing", "microsoft sgc", "netscape sgc"))
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


class CSRError(ValueError):
    pass


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _bytes(value: Any) -> bytes:
    if not isinstance(value, str):
        return b""
    try:
        return base64.b64decode(value, validate=True)
    except binascii.Error:
        return b""


def go_bytes(data: bytes) -> GoRendered:
    """Go's ``%#v`` of a ``[]byte`` (how kube prints an invalid request)."""
    return GoRendered("[]byte{" + ", ".join(f"0x{b:x}" for b in data) + "}")


def parse_request(pem: bytes) -> x509.CertificateSigningRequest:
    """kube's ``ParseCSR`` and signature check; CSRError with kube's text."""
    match = re.search(rb"-----BEGIN ([A-Z0-9 ]+)-----\r?\n(.*?)-----END \1-----", pem, re.S)
    if match is None or match.group(1) != b"CERTIFICATE REQUEST":
        raise CSRError("PEM block type must be CERTIFICATE REQUEST")
    try:
        csr = x509.load_pem_x509_csr(match.group(0))
    except ValueError as err:
        raise CSRError(f"x509: malformed certificate request: {err}") from None
    if not csr.is_signature_valid:
        raise CSRError("x509: ECDSA verification failure")
    return csr


def organizations(csr: x509.CertificateSigningRequest) -> list[str]:
    return [str(a.value) for a in csr.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]


def _certificate_error(pem: bytes) -> str | None:
    if not pem:
        return None
    blocks = re.findall(rb"-----BEGIN ([A-Z0-9 ]+)-----\r?\n(.*?)-----END \1-----", pem, re.S)
    if not blocks:
        return "must contain at least one CERTIFICATE PEM block"
    for kind, body in blocks:
        if kind != b"CERTIFICATE":
            return f'only CERTIFICATE PEM blocks are allowed, found "{kind.decode()}"'
        if b":" in body.split(b"\n", 1)[0]:
            return "no PEM block headers are permitted"
        try:
            x509.load_pem_x509_certificate(b"-----BEGIN CERTIFICATE-----\n" + body + b"-----END CERTIFICATE-----\n")
        except ValueError as err:
            return f"x509: malformed certificate: {err}"
    return None


def conditions(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in (_dict(obj.get("status")).get("conditions") or []) if isinstance(c, dict)]


def has_condition(obj: dict[str, Any], kind: str) -> bool:
    return any(c.get("type") == kind for c in conditions(obj))


def validate(obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[FieldError]:
    """kube's ``validateCertificateSigningRequest`` (with the leniencies for stored data)."""
    errs: list[FieldError] = []
    spec = _dict(obj.get("spec"))
    old_spec = _dict(old.get("spec")) if old is not None else {}
    request = _bytes(spec.get("request"))
    try:
        parse_request(request)
    except CSRError as err:
        errs.append(apierrors.invalid("spec.request", go_bytes(request), str(err)))
    usages = spec.get("usages") or []
    if not usages:
        errs.append(apierrors.required("spec.usages"))
    lenient_usages = old is not None and any(u not in VALID_USAGES for u in old_spec.get("usages") or [])
    seen: set[str] = set()
    for i, usage in enumerate(usages):
        if not lenient_usages and usage not in VALID_USAGES:
            errs.append(apierrors.not_supported(f"spec.usages[{i}]", usage, VALID_USAGES))
        if usage in seen and not (old is not None and len(set(old_spec.get("usages") or [])) <
                                  len(old_spec.get("usages") or [])):
            errs.append(apierrors.duplicate(f"spec.usages[{i}]", usage))
        seen.add(str(usage))
    signer = spec.get("signerName") or ""
    if signer == LEGACY_UNKNOWN and not (old is not None and old_spec.get("signerName") == LEGACY_UNKNOWN):
        errs.append(apierrors.invalid("spec.signerName", signer,
                                      "the legacy signerName is not allowed via this API version"))
    else:
        errs += _signer_name_errors(str(signer))
    seconds = spec.get("expirationSeconds")
    if isinstance(seconds, int) and seconds < 600:
        errs.append(apierrors.invalid("spec.expirationSeconds", seconds,
                                      "may not specify a duration less than 600 seconds (10 minutes)"))
    errs += _condition_errors(obj, old)
    certificate = _bytes(_dict(obj.get("status")).get("certificate"))
    old_certificate = _bytes(_dict(old.get("status")).get("certificate")) if old is not None else None
    if certificate != old_certificate:
        problem = _certificate_error(certificate)
        if problem:
            errs.append(apierrors.invalid("status.certificate", "<certificate data>", problem))
    return errs


def _signer_name_errors(signer: str) -> list[FieldError]:
    path = "spec.signerName"
    if not signer:
        return [apierrors.required(path)]
    parts = signer.split("/")
    if len(parts) < 2:
        return [apierrors.invalid(path, signer, "must be a fully qualified domain and path of the form "
                                                "'example.com/signer-name'")]
    domain, rest = parts[0], "/".join(parts[1:])
    errs = []
    if len(domain) > 253 or not _DNS_SUBDOMAIN.fullmatch(domain):
        errs.append(apierrors.invalid(path, signer, "a lowercase RFC 1123 subdomain must consist of lower case "
                                                    "alphanumeric characters, '-' or '.', and must start and end "
                                                    "with an alphanumeric character"))
    if not rest or len(rest) > 63 + 253:
        errs.append(apierrors.invalid(path, signer, "validating path: must not be empty"))
    return errs


def _condition_errors(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    errs: list[FieldError] = []
    old_conditions = conditions(old) if old is not None else []
    both_before = old is not None and has_condition(old, APPROVED) and has_condition(old, DENIED)
    dup_before = len({c.get("type") for c in old_conditions}) < len(old_conditions)
    seen: set[str] = set()
    approved = denied = False
    for i, c in enumerate(conditions(obj)):
        path = f"status.conditions[{i}]"
        kind, status = c.get("type") or "", c.get("status") or ""
        if not kind and not any(not o.get("type") for o in old_conditions):
            errs.append(apierrors.required(f"{path}.type"))
        allowed = ["True"] if kind in (APPROVED, DENIED, FAILED) else ["False", "True", "Unknown"]
        if not status:
            errs.append(apierrors.required(f"{path}.status"))
        elif status not in allowed:
            errs.append(apierrors.not_supported(f"{path}.status", status, allowed))
        if not both_before:
            if kind == APPROVED:
                approved = True
                if denied:
                    errs.append(apierrors.invalid(f"{path}.type", kind,
                                                  "Approved and Denied conditions are mutually exclusive"))
            elif kind == DENIED:
                denied = True
                if approved:
                    errs.append(apierrors.invalid(f"{path}.type", kind,
                                                  "Approved and Denied conditions are mutually exclusive"))
        if not dup_before and kind in seen:
            errs.append(apierrors.duplicate(f"{path}.type", kind))
        seen.add(kind)
    return errs


def transition_errors(new: dict[str, Any], old: dict[str, Any], subresource: str) -> list[FieldError]:
    """kube's ``validateCertificateSigningRequestUpdate`` rules on what an update may change."""
    errs: list[FieldError] = []
    for kind in (APPROVED, DENIED, FAILED):
        if len([c for c in conditions(new) if c.get("type") == kind]) < \
                len([c for c in conditions(old) if c.get("type") == kind]):
            errs.append(apierrors.forbidden("status.conditions",
                                            f'updates may not remove a condition of type "{kind}"'))
    if subresource != "approval":
        for kind in (APPROVED, DENIED):
            before = [c for c in conditions(old) if c.get("type") == kind]
            after = [c for c in conditions(new) if c.get("type") == kind]
            if len(after) > len(before):
                errs.append(apierrors.forbidden("status.conditions",
                                                f'updates may not add a condition of type "{kind}"'))
            elif len(after) == len(before) and after != before:
                errs.append(apierrors.forbidden("status.conditions",
                                                f'updates may not modify a condition of type "{kind}"'))
    new_cert = _dict(new.get("status")).get("certificate") or ""
    old_cert = _dict(old.get("status")).get("certificate") or ""
    if new_cert != old_cert:
        if subresource != "status":
            errs.append(apierrors.forbidden("status.certificate", "updates may not set certificate content"))
        elif old_cert:
            errs.append(apierrors.forbidden("status.certificate",
                                            "updates may not modify existing certificate content"))
    return errs


def _stamp_conditions(new: dict[str, Any], old: dict[str, Any] | None) -> None:
    """kube's ``populateConditionTimestamps``."""
    now = now_rfc3339()
    old_by_type = {c.get("type"): c for c in conditions(old)} if old is not None else {}
    for c in conditions(new):
        if not c.get("lastUpdateTime"):
            c["lastUpdateTime"] = now
        if not c.get("lastTransitionTime"):
            before = old_by_type.get(c.get("type"))
            if before is not None and before.get("status") == c.get("status") and before.get("lastTransitionTime"):
                c["lastTransitionTime"] = before["lastTransitionTime"]
            else:
                c["lastTransitionTime"] = now


class CSRStrategy(CertificateSigningRequestStrategy):
    def prepare_for_create(self, obj: dict[str, Any]) -> None:
        obj["status"] = {}
        spec = obj.get("spec")
        if isinstance(spec, dict):
            for key in ("username", "uid", "groups", "extra"):
                spec.pop(key, None)
            user = current_user.get()
            if user is not None:
                spec["username"] = user.name
                if user.uid:
                    spec["uid"] = user.uid
                if user.groups:
                    spec["groups"] = list(user.groups)
                if user.extra:
                    spec["extra"] = {k: list(v) for k, v in user.extra.items()}

    def prepare_for_update(self, new: dict[str, Any], old: dict[str, Any]) -> None:
        new["spec"] = copy.deepcopy(old.get("spec"))
        super().prepare_for_update(new, old)

    def validate(self, obj: dict[str, Any]) -> list[FieldError]:
        return super().validate(obj) + validate(obj)

    def validate_update(self, new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
        return super().validate_update(new, old) + validate(new, old)


class CSRStore(Store):
    """The CSR strategies of ``/approval`` and ``/status`` and kube's three CSR admission plugins."""

    authorizer: Authorizer | None = None

    async def create(self, namespace: str, obj: dict[str, Any], dry_run: bool = False,
                     writer: Any = None) -> dict[str, Any]:
        spec = _dict(obj.get("spec"))
        if spec.get("signerName") == KUBE_APISERVER_CLIENT:  # CertificateSubjectRestriction
            try:
                request = parse_request(_bytes(spec.get("request")))
            except CSRError:
                request = None  # validation says what is wrong
            if request is not None and "system:masters" in organizations(request):
                raise apierrors.forbidden_error(GROUP, "certificatesigningrequests",
                                                str(_dict(obj.get("metadata")).get("name") or ""),
                                                f"use of {KUBE_APISERVER_CLIENT} signer with system:masters group "
                                                "is not allowed")
        return await super().create(namespace, obj, dry_run, writer)

    async def validate_update_plugins(self, name: str, new: dict[str, Any], old: dict[str, Any],
                                      subresource: str) -> None:
        """kube's CertificateApproval (every update of ``/approval``: "approve" on the new object's
        signer) and CertificateSigning (an update of ``/status`` that changes the certificate or the
        conditions: "sign" on the stored object's signer), validating plugins on the prepared update:
        no read of their own, the write's origin is the old object."""
        if self.authorizer is None or subresource not in ("approval", "status"):
            return
        if subresource == "approval":
            signer = str(_dict(new.get("spec")).get("signerName") or "")
            if not await self._may("approve", signer):
                raise apierrors.forbidden_error(GROUP, "certificatesigningrequests", name,
                                                f'user not permitted to approve requests with signerName "{signer}"')
            return
        new_status, old_status = _dict(new.get("status")), _dict(old.get("status"))
        if new_status.get("certificate") == old_status.get("certificate") and conditions(new) == conditions(old):
            return
        signer = str(_dict(old.get("spec")).get("signerName") or "")
        if not await self._may("sign", signer):
            raise apierrors.forbidden_error(GROUP, "certificatesigningrequests", name,
                                            f'user not permitted to sign requests with signerName "{signer}"')

    async def _may(self, verb: str, signer: str) -> bool:
        """kube's ``IsAuthorizedForSignerName``: the signer's name, else ``<domain>/*``."""
        user = current_user.get()
        if user is None or self.authorizer is None:
            return True
        for resource_name in (signer, signer.split("/", 1)[0] + "/*"):
            decision, _ = await self.authorizer.authorize(Attributes(
                user, verb, True, api_group=GROUP, resource="signers", name=resource_name))
            if decision is Decision.ALLOW:
                return True
        return False

    def _prepare_update(self, namespace: str, name: str, new: dict[str, Any], old: dict[str, Any],
                        subresource: str) -> dict[str, Any]:
        if subresource not in ("approval", "status"):
            return super()._prepare_update(namespace, name, new, old, subresource)
        merged = copy.deepcopy(old)
        merged["metadata"]["resourceVersion"] = _dict(new.get("metadata")).get("resourceVersion") \
            or old["metadata"].get("resourceVersion")
        status = merged.setdefault("status", {})
        new_status = _dict(new.get("status"))
        if subresource == "approval":
            status["conditions"] = copy.deepcopy(new_status.get("conditions") or [])
        else:
            status.clear()
            status.update(copy.deepcopy(new_status))
            # kube's preserveConditionInstances: Approved/Denied stay the stored instances when their
            # count is unchanged (a count that differs is refused by the transition rules).
            for kind in (APPROVED, DENIED):
                listed = status.get("conditions") if isinstance(status.get("conditions"), list) else []
                new_at = [i for i, c in enumerate(listed) if isinstance(c, dict) and c.get("type") == kind]
                old_of = [c for c in conditions(old) if c.get("type") == kind]
                if len(new_at) == len(old_of):
                    for i, c in zip(new_at, old_of, strict=True):
                        listed[i] = copy.deepcopy(c)
        if not status:
            merged.pop("status")
        _stamp_conditions(merged, old)
        errs = transition_errors(merged, old, subresource)
        if errs:
            raise apierrors.invalid_object(GROUP, KIND, name, errs)
        return super()._prepare_update(namespace, name, merged, old, "status")


def build_store(info: ResourceInfo, schemas: SchemaCatalog, client: EtcdClient, key_prefix: str,
                admission: Any, watch_cache_size: int, authorizer: Authorizer | None) -> CSRStore:
    store = CSRStore(info, CSRStrategy(info, schemas), client, key_prefix, admission, watch_cache_size)
    store.authorizer = authorizer
    return store
