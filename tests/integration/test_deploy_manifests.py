"""deploy/: the kustomize base and its dev and ha overlays render, every object validates against
the Kubernetes 1.33 schemas, the pieces agree with each other (etcd members, certificate names,
probes, budgets, network policy), and a server-side dry-run of each overlay succeeds against
kubechain itself. Also the certificate Job's Secret handling, against the running chain."""

from __future__ import annotations

import base64
import os
import ssl
import subprocess
import uuid
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from support.procs import ChainHandle

from kubechain_cli.certs import SecretStore, sync_secrets

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
OVERLAYS = {"dev": 1, "ha": 3}
SERVICES = ("kubechain-core-api", "kubechain-extensions-api", "kubechain-gateway")


def render(path: Path) -> list[dict[str, Any]]:
    proc = subprocess.run(["kubectl", "kustomize", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def by_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def args_of(container: dict[str, Any]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for arg in [*container.get("command", []), *container.get("args", [])]:
        if arg.startswith("--") and "=" in arg:
            key, _, value = arg.partition("=")
            out.setdefault(key, []).append(value)
    return out


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_overlay_renders_and_validates(overlay: str) -> None:
    docs = render(REPO / "deploy" / "overlays" / overlay)
    for doc in docs:
        try:
            kubernetes_validate.validate(doc, "1.33", strict=True)
        except kubernetes_validate.ValidationError as err:
            pytest.fail(f"{doc['kind']}/{doc['metadata']['name']}: {err}")
    assert all(d["metadata"].get("namespace") == "kubechain" for d in docs if d["kind"] != "Namespace")
    assert by_kind(docs, "Namespace").keys() == {"kubechain"}


def test_schema_validation_catches_a_broken_manifest() -> None:
    docs = render(REPO / "deploy" / "overlays" / "dev")
    deployment = dict(by_kind(docs, "Deployment")["kubechain-core-api"])
    deployment["spec"] = dict(deployment["spec"], replicas="two")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, "1.33", strict=True)


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_overlay_topology(overlay: str) -> None:
    docs = render(REPO / "deploy" / "overlays" / overlay)
    members = OVERLAYS[overlay]
    replicas = 1 if overlay == "dev" else 2
    # kustomize's generated name (kubechain-settings-<hash>); the audit policy is a ConfigMap too
    settings_name = next(n for n in by_kind(docs, "ConfigMap") if n.startswith("kubechain-settings"))
    settings = by_kind(docs, "ConfigMap")[settings_name]["data"]

    etcd = by_kind(docs, "StatefulSet")["kubechain-etcd"]
    assert etcd["spec"]["replicas"] == members
    assert etcd["spec"]["volumeClaimTemplates"][0]["spec"]["accessModes"] == ["ReadWriteOnce"]
    expected_cluster = ",".join(f"kubechain-etcd-{i}=https://kubechain-etcd-{i}.kubechain-etcd:2380"
                                for i in range(members))
    assert settings["ETCD_INITIAL_CLUSTER"] == expected_cluster
    assert settings["ETCD_SERVERS"] == ",".join(f"https://kubechain-etcd-{i}.kubechain-etcd:2379"
                                                for i in range(members))
    # etcd serves clients and peers over TLS and trusts only its own CA's certificates (kubeadm's layout).
    etcd_pod = etcd["spec"]["template"]["spec"]
    etcd_args = args_of(etcd_pod["containers"][0])
    pki = "/var/lib/kubechain/pki"
    for url_flag in ("--listen-client-urls", "--advertise-client-urls", "--listen-peer-urls",
                     "--initial-advertise-peer-urls"):
        assert etcd_args[url_flag][0].startswith("https://"), url_flag
    assert etcd_args["--trusted-ca-file"] == etcd_args["--peer-trusted-ca-file"] == [f"{pki}/etcd-ca.crt"]
    assert etcd_args["--cert-file"] == etcd_args["--peer-cert-file"] == [f"{pki}/etcd-server.crt"]
    assert {"--client-cert-auth", "--peer-client-cert-auth"} <= set(etcd_pod["containers"][0]["command"])
    assert {v["name"]: v for v in etcd_pod["volumes"]}["pki"]["secret"]["secretName"] == "kubechain-pki"
    headless = by_kind(docs, "Service")["kubechain-etcd"]
    assert headless["spec"]["clusterIP"] == "None" and etcd["spec"]["serviceName"] == "kubechain-etcd"
    if overlay == "ha":
        assert "requiredDuringSchedulingIgnoredDuringExecution" in etcd["spec"]["template"]["spec"]["affinity"][
            "podAntiAffinity"]

    deployments = by_kind(docs, "Deployment")
    assert deployments.keys() == set(SERVICES)
    for name, deployment in deployments.items():
        spec = deployment["spec"]["template"]["spec"]
        assert deployment["spec"]["replicas"] == replicas, name
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["affinity"]["podAntiAffinity"], name
        container = spec["containers"][0]
        assert container["readinessProbe"] and container["livenessProbe"], name
        assert container["resources"]["requests"]["cpu"] and container["resources"]["requests"]["memory"], name
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert volumes["pki"]["secret"]["secretName"] == "kubechain-pki"
        # Every service reaches etcd with the etcd CA's client certificate and reads encrypted Secrets.
        flags = args_of(container)
        assert flags["--etcd-cafile"] == [f"{pki}/etcd-ca.crt"], name
        assert flags["--etcd-certfile"] == [f"{pki}/apiserver-etcd-client.crt"], name
        assert flags["--etcd-keyfile"] == [f"{pki}/apiserver-etcd-client.key"], name
        assert flags["--encryption-provider-config"] == [f"{pki}/encryption-config.yaml"], name
        env = {e["name"]: e for e in container.get("env", [])}
        assert env["ETCD_SERVERS"]["valueFrom"]["configMapKeyRef"]["name"] == settings_name

    # RBAC as kubeadm: core-api signs service account tokens with sa.key, the gateway checks them with sa.pub.
    core_flags = args_of(deployments["kubechain-core-api"]["spec"]["template"]["spec"]["containers"][0])
    gateway_flags = args_of(deployments["kubechain-gateway"]["spec"]["template"]["spec"]["containers"][0])
    assert core_flags["--authorization-mode"] == gateway_flags["--authorization-mode"] == ["RBAC"]
    # extensions-api answers CEL's authorizer for policies on custom resources with the same mode.
    extensions_flags = args_of(deployments["kubechain-extensions-api"]["spec"]["template"]["spec"]["containers"][0])
    assert extensions_flags["--authorization-mode"] == core_flags["--authorization-mode"]
    assert core_flags["--service-account-signing-key-file"] == [f"{pki}/sa.key"]
    assert gateway_flags["--service-account-key-file"] == [f"{pki}/sa.pub"]
    assert gateway_flags["--enable-bootstrap-token-auth"] == ["true"]

    budgets = by_kind(docs, "PodDisruptionBudget")
    assert budgets.keys() == {"kubechain-etcd", "kubechain-core-api", "kubechain-extensions-api", "kubechain-gateway"}

    # The gateway reaches each backend under a name the serving certificate the Job issues carries
    # (TLS and gRPC verify the host name).
    job = by_kind(docs, "Job")["kubechain-certs"]
    job_args = args_of(job["spec"]["template"]["spec"]["containers"][0])
    sans = {s.replace("$(POD_NAMESPACE)", "kubechain") for v in job_args["--san"] for s in v.split(",")}
    gateway = args_of(deployments["kubechain-gateway"]["spec"]["template"]["spec"]["containers"][0])
    hosts = {u.split("//")[1].split(":")[0] for m in gateway["--member"] for u in m.split(",")}
    hosts |= {a.split("=", 1)[1].rsplit(":", 1)[0] for a in gateway["--member-grpc"]}
    core = args_of(deployments["kubechain-core-api"]["spec"]["template"]["spec"]["containers"][0])
    hosts |= {u.split("//")[1].split(":")[0] for u in core["--delegate-url"]}
    assert hosts and hosts <= sans, hosts - sans
    # etcd's certificate names every member as the others and the services dial it.
    etcd_hosts = {u.split("//")[1].split(":")[0] for u in settings["ETCD_SERVERS"].split(",")}
    assert len(etcd_hosts) == members and etcd_hosts <= sans, etcd_hosts - sans
    services = by_kind(docs, "Service")
    assert {"kubechain", "kubechain-core-api", "kubechain-extensions-api"} <= services.keys()
    assert hosts <= services.keys()

    # The network admits only the gateway to core-api, and the gateway and core-api to extensions-api.
    policies = by_kind(docs, "NetworkPolicy")

    def admitted(policy: str) -> set[str]:
        return {peer["podSelector"]["matchLabels"]["app.kubernetes.io/component"]
                for rule in policies[policy]["spec"]["ingress"] for peer in rule["from"]}

    assert admitted("kubechain-core-api") == {"gateway"}
    assert admitted("kubechain-extensions-api") == {"gateway", "core-api"}


def _wrapper(tmp_path: Path, overlay: str, namespace: str) -> Path:
    """A kustomization that deploys ``overlay`` into ``namespace`` (the test's own)."""
    target = os.path.relpath(REPO / "deploy" / "overlays" / overlay, tmp_path)
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "namespace": namespace, "resources": [target]}))
    return tmp_path


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_server_side_dry_run_against_kubechain(chain: ChainHandle, tmp_path: Path, overlay: str) -> None:
    namespace = f"deploy-{overlay}-{uuid.uuid4().hex[:6]}"
    chain.kubectl("create", "namespace", namespace)
    out = chain.kubectl("apply", "--dry-run=server", "-k", str(_wrapper(tmp_path, overlay, namespace)))
    lines = [line for line in out.stdout.splitlines() if line.strip()]
    assert len(lines) == len(render(REPO / "deploy" / "overlays" / overlay)), out.stdout
    assert all(line.endswith("(server dry run)") for line in lines), out.stdout
    assert "statefulset.apps/kubechain-etcd created (server dry run)" in out.stdout
    # Nothing was stored.
    left = chain.kubectl("get", "deployments,statefulsets,jobs,secrets,networkpolicies", "-n", namespace, "-o", "name")
    assert left.stdout.strip() == ""


def test_server_side_dry_run_rejects_a_broken_overlay(chain: ChainHandle, tmp_path: Path) -> None:
    namespace = f"deploy-bad-{uuid.uuid4().hex[:6]}"
    chain.kubectl("create", "namespace", namespace)
    wrapper = _wrapper(tmp_path, "dev", namespace)
    config = yaml.safe_load((wrapper / "kustomization.yaml").read_text())
    # Selector no longer matches the pod template's labels: kube-apiserver rejects such a Deployment.
    config["patches"] = [{"target": {"kind": "Deployment", "name": "kubechain-gateway"}, "patch": yaml.safe_dump([
        {"op": "replace", "path": "/spec/template/metadata/labels", "value": {"app": "other"}}])}]
    (wrapper / "kustomization.yaml").write_text(yaml.safe_dump(config))
    out = chain.kubectl("apply", "--dry-run=server", "-k", str(wrapper), check=False)
    assert out.returncode != 0
    assert "spec.template.metadata.labels: Invalid value" in out.stderr, out.stderr


def _store(chain: ChainHandle, namespace: str) -> SecretStore:
    pki = chain.chain.pki
    context = ssl.create_default_context(cafile=pki.ca)
    context.load_cert_chain(*pki.pair("admin"))
    return SecretStore(chain.chain.server_url, namespace, context)


def test_certificate_job_keeps_credentials_in_secrets(chain: ChainHandle, tmp_path: Path) -> None:
    namespace = f"deploy-certs-{uuid.uuid4().hex[:6]}"
    chain.kubectl("create", "namespace", namespace)
    store = _store(chain, namespace)
    sans = ["kubechain-core-api", f"kubechain.{namespace}.svc", "10.96.0.10"]
    created = sync_secrets(store, "kc", tmp_path / "first", sans, "https://kubechain.example:443")
    assert sorted(created) == ["kc-ca", "kc-kubeconfig", "kc-pki"]
    pki, ca = store.get("kc-pki"), store.get("kc-ca")
    assert pki is not None and ca is not None
    # The CA keys (the API's and etcd's) only in the CA Secret, read by the Job alone.
    assert set(ca) == {"ca.crt", "ca.key", "etcd-ca.crt", "etcd-ca.key"}
    assert "ca.key" not in pki and "etcd-ca.key" not in pki
    assert {"apiserver.crt", "backend.key", "front-proxy-client.crt", "admin.key", "etcd-ca.crt", "etcd-server.crt",
            "etcd-server.key", "apiserver-etcd-client.crt", "apiserver-etcd-client.key", "sa.key", "sa.pub"} <= set(pki)
    encryption = yaml.safe_load(pki["encryption-config.yaml"])
    assert encryption["kind"] == "EncryptionConfiguration"
    assert [next(iter(p)) for p in encryption["resources"][0]["providers"]] == ["aescbc", "identity"]
    from cryptography import x509

    names = x509.load_pem_x509_certificate(pki["backend.crt"]).extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value
    assert {"kubechain-core-api", f"kubechain.{namespace}.svc"} <= set(names.get_values_for_type(x509.DNSName))
    assert "10.96.0.10" in {str(ip) for ip in names.get_values_for_type(x509.IPAddress)}
    kubeconfig = store.get("kc-kubeconfig")
    assert kubeconfig is not None
    config = yaml.safe_load(kubeconfig["kubeconfig"])
    assert config["clusters"][0]["cluster"]["server"] == "https://kubechain.example:443"
    assert base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]) == ca["ca.crt"]

    # A rerun (a new pod, an empty folder) creates nothing and issues nothing new.
    assert sync_secrets(store, "kc", tmp_path / "second", sans, "https://kubechain.example:443") == []
    assert store.get("kc-pki") == pki
    assert (tmp_path / "second" / "backend.crt").read_bytes() == pki["backend.crt"]

    # Lost pki Secret: reissued from the kept CA, not from a new one.
    assert chain.kubectl("delete", "secret", "kc-pki", "-n", namespace).returncode == 0
    assert sync_secrets(store, "kc", tmp_path / "third", sans, "") == ["kc-pki"]
    reissued = store.get("kc-pki")
    assert reissued is not None and reissued["ca.crt"] == ca["ca.crt"] and reissued["backend.crt"] != pki["backend.crt"]


def test_certificate_job_reports_api_errors(chain: ChainHandle, tmp_path: Path) -> None:
    store = _store(chain, "no-such-namespace-for-certs")
    with pytest.raises(RuntimeError, match="creating Secret no-such-namespace-for-certs/kc-ca: HTTP 404"):
        sync_secrets(store, "kc", tmp_path, [], "")
