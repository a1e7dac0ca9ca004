"""Server-side Table printing of CertificateSigningRequests (``kubectl get csr``), as kube's
``printCertificateSigningRequest``: signer, requestor, requested duration and the condition
summary (``Pending``, ``Approved,Issued``, ``Denied``, ``Approved,Failed``)."""

from __future__ import annotations

from datetime import datetime

from genericapi.apimachinery.tables_common import (
    Cells,
    Obj,
    age_column,
    column,
    doc,
    get,
    human_duration,
    items,
    name_column,
    printer,
    since,
    text,
)

_SPEC = "io.k8s.api.certificates.v1.CertificateSigningRequestSpec"


def condition_summary(obj: Obj) -> str:
    """kube's ``extractCSRStatus``: Denied over Approved over Pending, then Failed and Issued."""
    kinds = {c.get("type") for c in items(obj, "status", "conditions") if isinstance(c, dict)}
    out = "Denied" if "Denied" in kinds else "Approved" if "Approved" in kinds else "Pending"
    if "Failed" in kinds:
        out += ",Failed"
    if text(obj, "status", "certificate"):
        out += ",Issued"
    return out


def csr_cells(obj: Obj, now: datetime) -> Cells:
    seconds = get(obj, "spec", "expirationSeconds")
    duration = human_duration(seconds) if isinstance(seconds, int) and not isinstance(seconds, bool) else "<none>"
    return [text(obj, "metadata", "name"), since(get(obj, "metadata", "creationTimestamp"), now),
            text(obj, "spec", "signerName") or "<none>", text(obj, "spec", "username"), duration,
            condition_summary(obj)]


CSR_PRINTER = printer([
    name_column(),
    age_column(),
    column("SignerName", "string", doc(_SPEC, "signerName")),
    column("Requestor", "string", "Name of the user which made this request."),
    column("RequestedDuration", "string", doc(_SPEC, "expirationSeconds")),
    column("Condition", "string", "State of the signing request."),
], csr_cells)
