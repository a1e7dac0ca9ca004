"""``kubectl get -w`` (a Table watch) from every kubectl 1.27 to 1.33 at once, on one event stream.

Each kubectl asks for ``as=Table`` and gets its rows from the same shared encodings of each event
(issue 15's serialize-once): every one must print the same ADDED, MODIFIED and DELETED rows, with
the columns kube prints for ConfigMaps, as it would against kube-apiserver.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
import uuid

from support.procs import ChainHandle, have_kubectl, kubectl_binary

VERSIONS = [v for v in ("1.27", "1.28", "1.29", "1.30", "1.31", "1.32", "1.33") if have_kubectl(v)]


class Reader:
    """A ``kubectl get -w`` process and the lines it has printed so far (read on a thread)."""

    def __init__(self, version: str, namespace: str, kubeconfig: str) -> None:
        self.version = version
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [kubectl_binary(version), "get", "configmaps", "-n", namespace, "-w", "--output-watch-events"],
            env=dict(os.environ, KUBECONFIG=kubeconfig), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def rows(self, *names: str) -> list[tuple[str, str, str]]:
        """(EVENT, NAME, DATA) of the rows about ``names``."""
        out = []
        for line in list(self.lines):
            cells = line.split()
            if len(cells) >= 3 and cells[1] in names:
                out.append((cells[0], cells[1], cells[2]))
        return out

    def stop(self) -> str:
        self.proc.terminate()
        try:
            _out, err = self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _out, err = self.proc.communicate()
        return err


def wait_for(condition: object, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return True
        time.sleep(0.1)
    return False


def test_kubectl_get_watch_every_version(chain: ChainHandle) -> None:
    assert VERSIONS, "no kubectl.1.N beside kubectl"
    ns = f"tw-{uuid.uuid4().hex[:6]}"
    chain.kubectl("create", "namespace", ns)
    chain.kubectl("create", "configmap", "seed", "-n", ns, "--from-literal=a=b")
    readers = [Reader(v, ns, str(chain.kubeconfig)) for v in VERSIONS]
    errors: dict[str, str] = {}
    try:
        # Each has listed (the seed row printed): later changes reach it through its watch.
        assert wait_for(lambda: all(r.rows("seed") for r in readers)), {r.version: r.lines for r in readers}
        chain.kubectl("create", "configmap", "w", "-n", ns, "--from-literal=a=b")
        chain.kubectl("patch", "configmap", "w", "-n", ns, "--type=merge", "-p", '{"data":{"c":"d"}}')
        chain.kubectl("delete", "configmap", "w", "-n", ns)
        expected = [("ADDED", "w", "1"), ("MODIFIED", "w", "2"), ("DELETED", "w", "2")]
        wait_for(lambda: all(len(r.rows("w")) >= len(expected) for r in readers))
        for r in readers:
            assert r.rows("seed") == [("ADDED", "seed", "1")], (r.version, r.lines)
            assert r.rows("w") == expected, (r.version, r.lines)
            header = [line.split() for line in r.lines if line.startswith("EVENT")]
            assert header == [["EVENT", "NAME", "DATA", "AGE"]], (r.version, r.lines)
    finally:
        for r in readers:
            errors[r.version] = r.stop()
    # Nothing went wrong on the way (a decode error or a dropped watch shows on stderr).
    assert {v: e for v, e in errors.items() if e.strip()} == {}
