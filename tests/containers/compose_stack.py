"""Driving docker-compose.yml from tests: the compose CLI for up/down, the docker SDK for the rest.

``Stack`` is one compose project (its own name, host ports and kubeconfig folder, so it never
touches ./.kubechain or a stack someone else runs). ``Gateway`` is a small HTTPS client for the
published gateway(s) using the admin credentials of the kubeconfig the certificate job wrote.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import yaml

REPO = Path(__file__).resolve().parents[2]
SERVICES = ("core-api", "extensions-api", "aggregator")
#: The local base and etcd images deploy/images/build-base.sh makes (used when nothing else is set).
LOCAL_BASE, LOCAL_ETCD = "kubechain/base:bookworm", "kubechain/etcd:3.5.1"


def _version(cmd: list[str]) -> str:
    proc = subprocess.run([*cmd, "version", "--short"], capture_output=True, text=True)
    return proc.stdout.strip().lstrip("v") if proc.returncode == 0 else ""


def compose_commands() -> dict[str, list[str]]:
    """The compose CLIs this host has, by major version: ``v2`` (the ``docker compose`` plugin, or
    the binary named by ``KUBECHAIN_COMPOSE_V2``) and ``v1`` (``docker-compose`` 1.x, Debian's)."""
    found: dict[str, list[str]] = {}
    candidates = [["docker", "compose"]] if shutil.which("docker") else []
    if os.environ.get("KUBECHAIN_COMPOSE_V2"):
        candidates.append([os.environ["KUBECHAIN_COMPOSE_V2"]])
    if shutil.which("docker-compose"):
        candidates.append(["docker-compose"])
    for cmd in candidates:
        version = _version(cmd)
        if version:
            found.setdefault(f"v{version.split('.')[0]}", cmd)
    return found


def image_settings(client: docker.DockerClient) -> dict[str, str]:
    """KUBECHAIN_BASE_IMAGE and ETCD_IMAGE: from the environment, else the local images when built."""
    def present(name: str) -> bool:
        try:
            client.images.get(name)
            return True
        except docker.errors.ImageNotFound:
            return False

    base = os.environ.get("KUBECHAIN_BASE_IMAGE") or (LOCAL_BASE if present(LOCAL_BASE) else "")
    etcd = os.environ.get("ETCD_IMAGE") or (LOCAL_ETCD if present(LOCAL_ETCD) else "")
    return {"KUBECHAIN_BASE_IMAGE": base, "ETCD_IMAGE": etcd}


def build_images(client: docker.DockerClient, base: str) -> float:
    """Build the three service images from the working tree (the layer cache makes an unchanged
    tree a few seconds); returns the seconds it took."""
    started = time.monotonic()
    for service in SERVICES:
        client.images.build(path=str(REPO), dockerfile=f"services/{service}/Dockerfile",
                            buildargs={"BASE_IMAGE": base}, tag=f"kubechain/{service}:latest", rm=True)
    return time.monotonic() - started


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Stack:
    client: docker.DockerClient
    compose: list[str]
    images: dict[str, str]
    project: str
    ha: bool = False
    port: int = field(default_factory=free_port)
    second_port: int = field(default_factory=free_port)
    kubeconfig_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="kubechain-compose-")))

    @property
    def kubeconfig(self) -> Path:
        return self.kubeconfig_dir / "kubeconfig"

    def _env(self) -> dict[str, str]:
        return dict(os.environ, **self.images, KUBECHAIN_PORT=str(self.port),
                    KUBECHAIN_SECOND_PORT=str(self.second_port), KUBECHAIN_KUBECONFIG_DIR=str(self.kubeconfig_dir))

    def run(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        cmd = [*self.compose, "-p", self.project]
        if self.ha:
            cmd += ["--env-file", str(REPO / "deploy/compose/ha.env"), "--profile", "ha"]
        proc = subprocess.run([*cmd, *args], cwd=REPO, env=self._env(), capture_output=True, text=True,
                              timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd + list(args))} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
                               f"\n{self.logs()}")
        return proc

    def up(self, timeout: float = 120) -> float:
        """``up -d`` and wait until every long-running container is healthy (compose waits only
        for what others depend on); the seconds it took."""
        started = time.monotonic()
        self.run("up", "-d", "--no-build")
        deadline = started + timeout
        while True:
            containers = self.client.containers.list(filters={"label": f"com.docker.compose.project={self.project}"})
            states = {c.name: c.attrs["State"].get("Health", {}).get("Status") for c in containers}
            if containers and all(v == "healthy" for v in states.values()):
                return time.monotonic() - started
            if time.monotonic() > deadline:
                raise RuntimeError(f"not healthy after {timeout}s: {states}\n{self.logs()}")
            time.sleep(0.5)

    def logs(self, *services: str, tail: int = 40, grep: tuple[str, ...] = ("",)) -> str:
        """The services' last ``tail`` log lines, only those containing one of ``grep``."""
        proc = subprocess.run([*self.compose, "-p", self.project, "logs", "--no-color", "--tail", str(tail), *services],
                              cwd=REPO, env=self._env(), capture_output=True, text=True, timeout=60)
        lines = [line for line in proc.stdout.splitlines() if any(g in line for g in grep)]
        return "\n".join(lines)[-12000:]

    def container(self, service: str) -> Any:
        found = self.client.containers.list(all=True, filters={"label": [
            f"com.docker.compose.project={self.project}", f"com.docker.compose.service={service}"]})
        if not found:
            raise LookupError(f"no container of {service} in {self.project}")
        return found[0]

    def destroy(self) -> None:
        try:
            self.run("down", "-v", "--remove-orphans", timeout=180)
        finally:
            shutil.rmtree(self.kubeconfig_dir, ignore_errors=True)

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ, KUBECONFIG=str(self.kubeconfig))
        proc = subprocess.run(["kubectl", *args], input=input, capture_output=True, text=True, env=env, timeout=60)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {proc.stderr}")
        return proc


class Gateway:
    """HTTPS to one published gateway with the kubeconfig's admin credentials."""

    def __init__(self, kubeconfig: Path, port: int) -> None:
        config = yaml.safe_load(kubeconfig.read_text())
        user, cluster = config["users"][0]["user"], config["clusters"][0]["cluster"]
        self._dir = Path(tempfile.mkdtemp(prefix="kubechain-client-"))
        for name, key in (("ca.crt", "certificate-authority-data"),):
            (self._dir / name).write_bytes(base64.b64decode(cluster[key]))
        (self._dir / "admin.crt").write_bytes(base64.b64decode(user["client-certificate-data"]))
        (self._dir / "admin.key").write_bytes(base64.b64decode(user["client-key-data"]))
        self.context = ssl.create_default_context(cafile=str(self._dir / "ca.crt"))
        self.context.load_cert_chain(str(self._dir / "admin.crt"), str(self._dir / "admin.key"))
        self.url = f"https://127.0.0.1:{port}"

    def request(self, method: str, path: str, body: Any = None, timeout: float = 10) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"} if data else {})
        try:
            with urllib.request.urlopen(req, context=self.context, timeout=timeout) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as err:
            raw = err.read()
            try:
                return err.code, json.loads(raw)
            except ValueError:
                return err.code, raw.decode(errors="replace")

    def stream(self, path: str, timeout: float = 15) -> Any:
        return urllib.request.urlopen(urllib.request.Request(self.url + path), context=self.context, timeout=timeout)


@dataclass
class Engine:
    """What the ``engine`` fixture hands the tests: the engine, the compose CLI, the image settings."""

    client: docker.DockerClient
    composes: dict[str, list[str]]
    images: dict[str, str]
    build_seconds: float

    def stack(self, name: str, ha: bool = False, compose: str = "") -> Stack:
        """A new project, run with the compose CLI of major version ``compose`` (default: the first
        found, v2 before v1)."""
        cli = self.composes[compose] if compose else next(iter(self.composes.values()))
        return Stack(self.client, cli, self.images, f"kctest-{name}-{uuid.uuid4().hex[:6]}", ha=ha)
