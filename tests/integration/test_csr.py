"""CertificateSigningRequests end to end: create, ``kubectl certificate approve``, kube's signers sign
with the cluster CA, and the issued certificate authenticates at the gateway.

Keys and requests are made with ``cryptography`` as a user's tooling would; kubectl 1.27 and 1.33
create and approve; the certificate is checked (subject, issuer, validity with kube's backdate,
usages) and used by kubectl as a client certificate. Bad requests get kube's 422/403 texts; a
request a signer may not sign gets kube's Failed condition; approval needs ``approve`` on the
signer (kube's CertificateApproval admission).
"""

from __future__ import annotations

import base64
import json
import subprocess
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from support.procs import ChainHandle, kubectl_binary

pytestmark = pytest.mark.integration

CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
CLIENT = "kubernetes.io/kube-apiserver-client"


def make_request(cn: str, orgs: tuple[str, ...] = (), dns: tuple[str, ...] = ()) -> tuple[bytes, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.NameAttribute(NameOID.COMMON_NAME, cn), *(x509.NameAttribute(NameOID.ORGANIZATION_NAME, o)
                                                             for o in orgs)]
    builder = x509.CertificateSigningRequestBuilder().subject_name(x509.Name(names))
    if dns:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(d) for d in dns]), critical=False)
    csr = builder.sign(key, hashes.SHA256())
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return csr.public_bytes(serialization.Encoding.PEM), key_pem


def csr_body(name: str, request: bytes, signer: str = CLIENT, usages: list[str] | None = None,
             seconds: int | None = 86400) -> dict[str, Any]:
    spec: dict[str, Any] = {"request": base64.b64encode(request).decode(), "signerName": signer,
                            "usages": ["client auth"] if usages is None else usages}
    if seconds is not None:
        spec["expirationSeconds"] = seconds
    return {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {"name": name}, "spec": spec}


def until(check: Callable[[], Any], limit: float = 20.0) -> Any:
    deadline = time.monotonic() + limit
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def get(chain: ChainHandle, name: str) -> dict[str, Any]:
    status, body = chain.json("GET", f"{CSRS}/{name}")
    assert status == 200, body
    return body  # type: ignore[no-any-return]


def issued(chain: ChainHandle, name: str) -> x509.Certificate:
    obj = until(lambda: (o := get(chain, name)).get("status", {}).get("certificate") and o)
    assert obj, f"no certificate issued: {get(chain, name)}"
    return x509.load_pem_x509_certificate(base64.b64decode(obj["status"]["certificate"]))


def failed(chain: ChainHandle, name: str) -> dict[str, Any]:
    def find() -> Any:
        return next((c for c in get(chain, name).get("status", {}).get("conditions", []) if c["type"] == "Failed"),
                    None)
    condition = until(find)
    assert condition, get(chain, name)
    return condition  # type: ignore[no-any-return]


@pytest.mark.parametrize("version", ["1.27", "1.33"])
def test_round_trip_kubectl_approve_then_the_certificate_authenticates(chain: ChainHandle, version: str,
                                                                       tmp_path: Path) -> None:
    user = f"carol-{uuid.uuid4().hex[:6]}"
    request, key_pem = make_request(user, ("devs", "qa"))
    name = f"{user}-csr"
    chain.kubectl("apply", "-f", "-", input=json.dumps(csr_body(name, request)), version=version)
    obj = get(chain, name)
    assert obj["spec"]["username"] and "system:authenticated" in obj["spec"]["groups"]  # who asked, not who is named
    assert obj["status"] == {}
    shown = chain.kubectl("get", "csr", name, version=version).stdout
    assert "Pending" in shown and CLIENT in shown

    approved = chain.kubectl("certificate", "approve", name, version=version)
    assert f"certificatesigningrequest.certificates.k8s.io/{name} approved" in approved.stdout
    condition = get(chain, name)["status"]["conditions"][0]
    assert (condition["type"], condition["status"], condition["reason"]) == ("Approved", "True", "KubectlApprove")
    assert condition["lastUpdateTime"] and condition["lastTransitionTime"]
    cert = issued(chain, name)
    assert "Approved,Issued" in chain.kubectl("get", "csr", name, version=version).stdout

    ca = x509.load_pem_x509_certificate(Path(chain.chain.pki.ca).read_bytes())
    assert cert.issuer == ca.subject
    cert.verify_directly_issued_by(ca)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == user
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == ["devs", "qa"]
    now = datetime.now(UTC)
    assert abs(cert.not_valid_before_utc - (now - timedelta(minutes=5))) < timedelta(minutes=2)
    assert cert.not_valid_after_utc - cert.not_valid_before_utc == timedelta(days=1)  # long-lived: backdated end
    assert list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.CLIENT_AUTH]
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False

    crt, key = tmp_path / "user.crt", tmp_path / "user.key"
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(key_pem)
    base = [kubectl_binary(version), "--kubeconfig=/dev/null", f"--server={chain.url}",
            f"--certificate-authority={chain.chain.pki.ca}", f"--client-certificate={crt}", f"--client-key={key}"]
    refused = subprocess.run([*base, "get", "pods", "-n", "default"], capture_output=True, text=True, timeout=60)
    assert (f'pods is forbidden: User "{user}" cannot list resource "pods" in API group "" in the namespace '
            '"default"') in refused.stderr
    status, review = chain.json("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": ["devs"], "resourceAttributes": {"verb": "list", "resource": "pods"}}})
    assert status == 201 and review["status"]["allowed"] is False
    if version == "1.33":
        who = subprocess.run([*base, "auth", "whoami", "-o", "json"], capture_output=True, text=True, timeout=60)
        assert who.returncode == 0, who.stderr
        assert json.loads(who.stdout)["status"]["userInfo"] == {
            "username": user, "groups": ["devs", "qa", "system:authenticated"]}


def test_short_lived_and_kubelet_signers(chain: ChainHandle) -> None:
    request, _key = make_request("short-lived")
    name = f"short-{uuid.uuid4().hex[:6]}"
    assert chain.json("POST", CSRS, csr_body(name, request, seconds=900))[0] == 201
    chain.kubectl("certificate", "approve", name)
    cert = issued(chain, name)
    assert cert.not_valid_after_utc - cert.not_valid_before_utc == timedelta(minutes=20)  # 15 min + backdate

    request, _key = make_request("system:node:n1", ("system:nodes",), dns=("n1.example.com",))
    name = f"serving-{uuid.uuid4().hex[:6]}"
    body = csr_body(name, request, "kubernetes.io/kubelet-serving",
                    ["digital signature", "key encipherment", "server auth"])
    assert chain.json("POST", CSRS, body)[0] == 201
    chain.kubectl("certificate", "approve", name)
    cert = issued(chain, name)
    assert cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName) == ["n1.example.com"]
    assert list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.SERVER_AUTH]
    assert cert.not_valid_after_utc - cert.not_valid_before_utc == timedelta(days=1)

    # The kubelet client signer refuses a subject outside system:nodes: kube's Failed condition.
    request, _key = make_request("system:node:n1", ("devs",))
    name = f"kubelet-{uuid.uuid4().hex[:6]}"
    body = csr_body(name, request, "kubernetes.io/kube-apiserver-client-kubelet",
                    ["digital signature", "client auth"])
    assert chain.json("POST", CSRS, body)[0] == 201
    chain.kubectl("certificate", "approve", name)
    condition = failed(chain, name)
    assert (condition["reason"], condition["message"]) == ("SignerValidationFailure",
                                                           "subject organization is not system:nodes")
    assert not get(chain, name)["status"].get("certificate")
    assert "Approved,Failed" in chain.kubectl("get", "csr", name).stdout


def test_signer_refuses_bad_usages_and_denied_requests_are_not_signed(chain: ChainHandle) -> None:
    request, _key = make_request("dave")
    name = f"usage-{uuid.uuid4().hex[:6]}"
    assert chain.json("POST", CSRS, csr_body(name, request, usages=["client auth", "server auth"]))[0] == 201
    chain.kubectl("certificate", "approve", name)
    assert failed(chain, name)["message"] == "invalid usage for client certificate: server auth"

    name = f"deny-{uuid.uuid4().hex[:6]}"
    assert chain.json("POST", CSRS, csr_body(name, request))[0] == 201
    chain.kubectl("certificate", "deny", name)
    time.sleep(1)
    obj = get(chain, name)
    assert [c["type"] for c in obj["status"]["conditions"]] == ["Denied"] and "certificate" not in obj["status"]
    # Approved and Denied exclusive; conditions may not be removed.
    obj["status"]["conditions"].append({"type": "Approved", "status": "True"})
    status, body = chain.json("PUT", f"{CSRS}/{name}/approval", obj)
    assert status == 422 and ('status.conditions[1].type: Invalid value: "Approved": Approved and Denied '
                              'conditions are mutually exclusive') in body["message"]
    obj["status"]["conditions"] = []
    status, body = chain.json("PUT", f"{CSRS}/{name}/approval", obj)
    assert status == 422 and 'updates may not remove a condition of type "Denied"' in body["message"]


def test_status_and_main_resource_cannot_approve_or_rewrite(chain: ChainHandle) -> None:
    request, _key = make_request("erin")
    name = f"status-{uuid.uuid4().hex[:6]}"
    assert chain.json("POST", CSRS, csr_body(name, request))[0] == 201
    obj = get(chain, name)
    obj["status"] = {"conditions": [{"type": "Approved", "status": "True", "reason": "Sneaky"}]}
    status, body = chain.json("PUT", f"{CSRS}/{name}/status", obj)
    assert status == 422 and 'status.conditions: Forbidden: updates may not add a condition of type "Approved"' \
        in body["message"]
    # The main resource ignores status and spec changes (kube's strategy keeps them).
    obj = get(chain, name)
    obj["status"] = {"conditions": [{"type": "Approved", "status": "True"}]}
    obj["spec"]["usages"] = ["digital signature", "client auth"]
    obj["metadata"]["labels"] = {"team": "a"}
    status, body = chain.json("PUT", f"{CSRS}/{name}", obj)
    assert status == 200, body
    assert body["status"] == {} and body["spec"]["usages"] == ["client auth"] and body["metadata"]["labels"]
    # A signer of one's own (kube signs none of it): its controller writes the certificate through /status.
    name = f"custom-{uuid.uuid4().hex[:6]}"
    assert chain.json("POST", CSRS, csr_body(name, request, "example.com/custom"))[0] == 201
    chain.kubectl("certificate", "approve", name)
    obj = get(chain, name)
    obj["status"]["certificate"] = base64.b64encode(b"garbage").decode()
    status, body = chain.json("PUT", f"{CSRS}/{name}/status", obj)
    assert status == 422 and "status.certificate: Invalid value: \"<certificate data>\": must contain at least " \
        "one CERTIFICATE PEM block" in body["message"]
    obj["status"]["certificate"] = base64.b64encode(Path(chain.chain.pki.ca).read_bytes()).decode()
    status, body = chain.json("PUT", f"{CSRS}/{name}/status", obj)
    assert status == 200, body
    assert "Approved,Issued" in chain.kubectl("get", "csr", name).stdout
    obj = body
    obj["status"]["certificate"] = base64.b64encode(issued(chain, name).public_bytes(
        serialization.Encoding.PEM) + Path(chain.chain.pki.ca).read_bytes()).decode()
    status, body = chain.json("PUT", f"{CSRS}/{name}/status", obj)
    assert status == 422 and "status.certificate: Forbidden: updates may not modify existing certificate content" \
        in body["message"]


def test_bad_requests_are_kubes_422_and_403(chain: ChainHandle) -> None:
    request, _key = make_request("frank")

    def refused(body: dict[str, Any]) -> tuple[int, str]:
        status, out = chain.json("POST", CSRS, body)
        return status, out["message"]

    name = f"bad-{uuid.uuid4().hex[:6]}"
    status, message = refused(csr_body(name, b"not a pem"))
    assert status == 422
    assert message == (f'CertificateSigningRequest.certificates.k8s.io "{name}" is invalid: spec.request: Invalid '
                       "value: []byte{0x6e, 0x6f, 0x74, 0x20, 0x61, 0x20, 0x70, 0x65, 0x6d}: PEM block type must "
                       "be CERTIFICATE REQUEST")
    cert_pem = Path(chain.chain.pki.ca).read_bytes()  # a certificate is not a request
    assert "PEM block type must be CERTIFICATE REQUEST" in refused(csr_body(name, cert_pem))[1]
    assert refused(csr_body(name, request, usages=[]))[1].endswith("spec.usages: Required value")
    status, message = refused(csr_body(name, request, usages=["client auth", "flying"]))
    assert status == 422 and 'spec.usages[1]: Unsupported value: "flying": supported values: "any", ' in message
    assert 'spec.usages[1]: Duplicate value: "client auth"' in refused(
        csr_body(name, request, usages=["client auth", "client auth"]))[1]
    assert ('spec.signerName: Invalid value: "kubernetes.io/legacy-unknown": the legacy signerName is not allowed '
            "via this API version") in refused(csr_body(name, request, "kubernetes.io/legacy-unknown"))[1]
    assert "spec.signerName: Required value" in refused(csr_body(name, request, ""))[1]
    assert ("spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 600 seconds "
            "(10 minutes)") in refused(csr_body(name, request, seconds=599))[1]
    masters, _key = make_request("mallory", ("system:masters",))
    status, message = refused(csr_body(name, masters))
    assert (status, message) == (403, f'certificatesigningrequests.certificates.k8s.io "{name}" is forbidden: use '
                                      "of kubernetes.io/kube-apiserver-client signer with system:masters group "
                                      "is not allowed")
    assert chain.json("GET", f"{CSRS}/{name}")[0] == 404


def test_approval_needs_approve_on_the_signer(chain: ChainHandle) -> None:
    request, _key = make_request("grace")
    name = f"perm-{uuid.uuid4().hex[:6]}"
    assert chain.json("POST", CSRS, csr_body(name, request))[0] == 201
    approver = f"approver-{uuid.uuid4().hex[:6]}"
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": approver},
            "rules": [{"apiGroups": ["certificates.k8s.io"], "verbs": ["get", "list", "update"],
                       "resources": ["certificatesigningrequests", "certificatesigningrequests/approval"]}]}
    assert chain.json("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", role)[0] == 201
    chain.kubectl("create", "clusterrolebinding", approver, f"--clusterrole={approver}", f"--user={approver}")
    obj = get(chain, name)
    obj["status"] = {"conditions": [{"type": "Approved", "status": "True", "reason": "Manual"}]}

    def approve() -> tuple[int, Any]:
        return chain.json("PUT", f"{CSRS}/{name}/approval", obj, headers={"Impersonate-User": approver})

    status, body = until(lambda: (r := approve())[0] == 403 and r, 10) or approve()
    assert (status, body["message"]) == (403, f'certificatesigningrequests.certificates.k8s.io "{name}" is forbidden: '
                                              f'user not permitted to approve requests with signerName "{CLIENT}"')
    role["rules"].append({"apiGroups": ["certificates.k8s.io"], "verbs": ["approve"], "resources": ["signers"],
                          "resourceNames": ["kubernetes.io/*"]})
    assert chain.json("PUT", f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{approver}", role)[0] == 200
    status, body = until(lambda: (r := approve())[0] == 200 and r, 10) or approve()
    assert status == 200, body
    issued(chain, name)
