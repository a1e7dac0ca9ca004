"""Secrets encrypted in etcd as on a kube-apiserver with ``--encryption-provider-config``.

A chain of its own (it restarts with new configurations): by default ``kubechain up`` encrypts
Secrets with an aescbc key it makes in the data dir; the value etcd holds starts with
``k8s:enc:aescbc:v1:key1:`` and decrypts with that key; ConfigMaps stay plain. Rotation as kube
documents it: put the new key first, restart, rewrite every Secret with ``kubectl get secrets -A
-o json | kubectl replace -f -``, drop the old key, restart: everything still reads. A bad
configuration stops the server at start with the field named.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import yaml
from genericapi.storage.value import AESCBCTransformer
from support.coreapi_procs import etcdctl
from support.procs import ChainHandle

from kubechain_cli.chain import Chain, free_port

pytestmark = pytest.mark.integration

SECRET_KEY = "/registry/secrets/default/enc-a"


def write_config(path: Path, *keys: tuple[str, bytes]) -> None:
    providers = [{"aescbc": {"keys": [{"name": name, "secret": base64.b64encode(k).decode()}]}} for name, k in keys]
    providers.append({"identity": {}})
    path.write_text(yaml.safe_dump({"apiVersion": "apiserver.config.k8s.io/v1", "kind": "EncryptionConfiguration",
                                    "resources": [{"resources": ["secrets"], "providers": providers}]}))


@pytest.fixture
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield tmp_path_factory.mktemp("encrypted-chain")


def start(data: Path, config: str = "") -> ChainHandle:
    chain = Chain(data, port=free_port(), encryption_config=config)
    try:
        chain.start(timeout=60)
    except Exception:
        chain.stop()
        raise
    return ChainHandle(chain)


def raw(handle: ChainHandle, key: str) -> bytes:
    # etcdctl ends the value with one newline; ciphertext may itself end in 0x0a (1 time in 256), so
    # only that one is removed (rstrip once cut a block short: "not a multiple of the block size").
    out = etcdctl(handle.chain.etcd_endpoints, "get", key, "--print-value-only")
    return out[:-1] if out.endswith(b"\n") else out


def test_secrets_are_encrypted_by_default_and_keys_rotate(data_dir: Path) -> None:
    chain = start(data_dir)
    try:
        chain.kubectl("create", "secret", "generic", "enc-a", "--from-literal=password=hunter2")
        chain.kubectl("create", "secret", "generic", "enc-b", "--from-literal=token=t0k3n")
        chain.kubectl("create", "configmap", "enc-plain", "--from-literal=x=y")
        stored = raw(chain, SECRET_KEY)
        assert stored.startswith(b"k8s:enc:aescbc:v1:key1:"), stored[:40]
        assert b"hunter2" not in stored and base64.b64encode(b"hunter2") not in stored
        default = yaml.safe_load((data_dir / "encryption-config.yaml").read_text())
        key1 = base64.b64decode(default["resources"][0]["providers"][0]["aescbc"]["keys"][0]["secret"])
        decrypted = orjson.loads(AESCBCTransformer("key1", key1).from_storage(stored, SECRET_KEY.encode()))
        assert decrypted["metadata"]["name"] == "enc-a"
        assert decrypted["data"] == {"password": base64.b64encode(b"hunter2").decode()}
        assert orjson.loads(raw(chain, "/registry/configmaps/default/enc-plain"))["data"] == {"x": "y"}
        got = chain.kubectl("get", "secret", "enc-a", "-o", "jsonpath={.data.password}").stdout
        assert base64.b64decode(got) == b"hunter2"
    finally:
        chain.chain.stop()

    # Rotation, step 1: the new key first, the old one still read.
    key2 = os.urandom(32)
    rotated = data_dir / "rotated.yaml"
    write_config(rotated, ("key2", key2), ("key1", key1))
    chain = start(data_dir, str(rotated))
    try:
        assert raw(chain, SECRET_KEY).startswith(b"k8s:enc:aescbc:v1:key1:")
        listed = chain.kubectl("get", "secrets", "-A", "-o", "json").stdout
        chain.kubectl("replace", "-f", "-", input=listed)
        assert raw(chain, SECRET_KEY).startswith(b"k8s:enc:aescbc:v1:key2:")
        assert raw(chain, "/registry/secrets/default/enc-b").startswith(b"k8s:enc:aescbc:v1:key2:")
    finally:
        chain.chain.stop()

    # Step 2: the old key gone; everything was rewritten, so everything reads.
    only_new = data_dir / "only-new.yaml"
    write_config(only_new, ("key2", key2))
    chain = start(data_dir, str(only_new))
    try:
        got = chain.kubectl("get", "secret", "enc-b", "-o", "jsonpath={.data.token}").stdout
        assert base64.b64decode(got) == b"t0k3n"
        assert len(orjson.loads(chain.kubectl("get", "secrets", "-o", "json").stdout)["items"]) >= 2
    finally:
        chain.chain.stop()


def test_a_bad_configuration_stops_the_server_at_start(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    short_key = {"name": "k", "secret": base64.b64encode(b"short").decode()}
    bad.write_text(yaml.safe_dump({"apiVersion": "apiserver.config.k8s.io/v1", "kind": "EncryptionConfiguration",
                                   "resources": [{"resources": ["secrets"],
                                                  "providers": [{"aesgcm": {"keys": [short_key]}}]}]}))
    proc = subprocess.run([sys.executable, "-m", "coreapi", "--etcd-servers", "http://127.0.0.1:1",
                           "--encryption-provider-config", str(bad), "--port", str(free_port())],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert ("resources[0].providers[0].aesgcm.keys[0].secret: Invalid value: \"REDACTED\": secret is not of the "
            "expected length, got 5, expected one of [16 24 32]") in proc.stderr
