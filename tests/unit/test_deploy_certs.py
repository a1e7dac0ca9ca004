"""The container deployments' credential pieces: extra serving names, a credentials folder
without the CA key (a mounted Secret), the certificate job's local mode and the health probe."""

from __future__ import annotations

import http.server
import os
import shutil
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from genericapi.server.certs import SERVING_NAMES, ensure_certificates

from kubechain_cli import certs as certs_job
from kubechain_cli import probe


def _sans(path: str) -> tuple[set[str], set[str]]:
    cert = x509.load_pem_x509_certificate(Path(path).read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return set(names.get_values_for_type(x509.DNSName)), {str(i) for i in names.get_values_for_type(x509.IPAddress)}


def test_extra_sans_go_into_both_serving_certificates(tmp_path: Path) -> None:
    paths = ensure_certificates(tmp_path, ["core-api", " extensions-api-2 ", "", "172.18.0.5", "localhost"])
    for name in ("apiserver", "backend"):
        dns, ips = _sans(paths.pair(name)[0])
        assert dns == set(SERVING_NAMES) | {"core-api", "extensions-api-2"}
        assert "172.18.0.5" in ips
    client = x509.load_pem_x509_certificate(Path(paths.pair("admin")[0]).read_bytes())
    with pytest.raises(x509.ExtensionNotFound):
        client.extensions.get_extension_for_class(x509.SubjectAlternativeName)


def test_a_complete_folder_without_the_ca_key_is_used_as_it_is(tmp_path: Path) -> None:
    source = ensure_certificates(tmp_path / "all")
    mounted = tmp_path / "mounted"
    shutil.copytree(source.dir, mounted)
    (mounted / "ca.key").unlink()
    before = {p.name: p.read_bytes() for p in mounted.iterdir()}
    ensure_certificates(mounted)
    assert {p.name: p.read_bytes() for p in mounted.iterdir()} == before


def test_a_missing_certificate_without_the_ca_key_is_an_error_not_a_new_ca(tmp_path: Path) -> None:
    paths = ensure_certificates(tmp_path)
    ca = Path(paths.ca).read_bytes()
    os.unlink(paths.ca_key)
    os.unlink(paths.pair("backend")[0])
    with pytest.raises(FileNotFoundError, match=r"backend\.crt is missing and the CA key"):
        ensure_certificates(tmp_path)
    assert Path(paths.ca).read_bytes() == ca


def test_certificate_job_local_mode_writes_kubeconfig_and_keeps_the_ca(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    certs_job.main(["--dir", str(tmp_path / "pki"), "--san", "core-api,aggregator", "--san", "core-api-2",
                    "--kubeconfig", str(out / "kubeconfig"), "--server", "https://127.0.0.1:7443"])
    config = yaml.safe_load((out / "kubeconfig").read_text())
    assert config["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:7443"
    assert (out / "kubeconfig").stat().st_mode & 0o777 == 0o600
    dns, _ = _sans(str(tmp_path / "pki" / "backend.crt"))
    assert {"core-api", "aggregator", "core-api-2"} <= dns
    ca = (tmp_path / "pki" / "ca.crt").read_bytes()
    certs_job.main(["--dir", str(tmp_path / "pki")])
    assert (tmp_path / "pki" / "ca.crt").read_bytes() == ca


@pytest.mark.parametrize("value", ["x", "10:y", ""])
def test_certificate_job_rejects_a_bad_owner(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        certs_job.main(["--dir", "/nonexistent", "--owner", value])
    assert exc.value.code == 2
    assert "invalid owner" in capsys.readouterr().err


def test_secrets_mode_outside_a_pod_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(SystemExit) as exc:
        certs_job.main(["--dir", str(tmp_path), "--secrets-namespace", "kubechain"])
    assert exc.value.code == 1
    assert "needs to run in a pod" in capsys.readouterr().err


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An HTTPS server requiring client certificates from the CA: /readyz 200, /livez 500."""
    paths = ensure_certificates(tmp_path / "pki")

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            code = 200 if self.path == "/readyz" else 500
            self.send_response(code)
            self.end_headers()
            self.wfile.write(b"ok" if code == 200 else b"[-]etcd failed")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*paths.pair("backend"))
    context.load_verify_locations(paths.ca)
    context.verify_mode = ssl.CERT_REQUIRED
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{server.server_address[1]}", paths.dir
    server.shutdown()


def test_probe_presents_the_client_certificate(tls_server: tuple[str, Path]) -> None:
    url, pki = tls_server
    ca, crt, key = str(pki / "ca.crt"), str(pki / "front-proxy-client.crt"), str(pki / "front-proxy-client.key")
    assert probe.probe(url + "/readyz", ca, crt, key)[0] is True
    ok, detail = probe.probe(url + "/livez", ca, crt, key)
    assert not ok and detail.startswith("500") and "etcd failed" in detail
    assert probe.probe(url + "/readyz", ca)[0] is False  # no client certificate: the handshake fails


def test_probe_exit_status_from_environment(tls_server: tuple[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    url, pki = tls_server
    monkeypatch.setenv("KUBECHAIN_PROBE_URL", url + "/readyz")
    monkeypatch.setenv("KUBECHAIN_PROBE_CA", str(pki / "ca.crt"))
    monkeypatch.setenv("KUBECHAIN_PROBE_CERT", str(pki / "front-proxy-client.crt"))
    monkeypatch.setenv("KUBECHAIN_PROBE_KEY", str(pki / "front-proxy-client.key"))
    with pytest.raises(SystemExit) as exc:
        probe.main([])
    assert exc.value.code == 0
    with pytest.raises(SystemExit) as exc:
        probe.main([url + "/livez"])
    assert exc.value.code == 1
    with pytest.raises(SystemExit) as exc:  # unreadable credentials are a failed probe, not a crash
        probe.main(["--cert", "/nonexistent.crt"])
    assert exc.value.code == 1
