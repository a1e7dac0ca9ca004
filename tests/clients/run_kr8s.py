"""``./dev clients``: kr8s's own test suite against a chain started the way users start it.

Starts ``kubechain up`` on a free port with a throw-away data dir, waits for the ``export KUBECONFIG=``
line it prints, runs the kr8s tests shipped in the installed kr8s wheel with that KUBECONFIG (the kubelet
tests deselected by ``kr8s_plugin``), then stops the chain with Ctrl-C (SIGINT) as a user would. Extra
arguments go to pytest (``./dev clients -k watch -x``). Exits with pytest's status; the chain's output is
printed when the run fails.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import kr8s

from kubechain_cli.chain import free_port

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
START_TIMEOUT = 120.0
RUN_TIMEOUT = 900.0


def _kubechain() -> str:
    exe = Path(sys.executable).parent / "kubechain"
    return str(exe) if exe.exists() else "kubechain"


def _wait_ready(proc: subprocess.Popen[bytes], log: Path) -> Path:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        for line in log.read_text(errors="replace").splitlines():
            if line.strip().startswith("export KUBECONFIG="):
                return Path(line.strip().split("=", 1)[1])
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    raise RuntimeError(f"kubechain up did not become ready:\n{log.read_text(errors='replace')[-4000:]}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main(argv: list[str]) -> int:
    kr8s_dir = Path(kr8s.__file__).resolve().parent
    with tempfile.TemporaryDirectory(prefix="kubechain-clients-") as tmp:
        data, log = Path(tmp) / "chain", Path(tmp) / "chain.log"
        port = free_port()
        with open(log, "wb") as out:
            chain = subprocess.Popen([_kubechain(), "up", "--data-dir", str(data), "--port", str(port)],
                                     stdout=out, stderr=subprocess.STDOUT, cwd=tmp)
        rc = 1
        try:
            kubeconfig = _wait_ready(chain, log)
            print(f"== kr8s {kr8s.__version__} tests against kubechain up on port {port}", flush=True)
            env = dict(os.environ, KUBECONFIG=str(kubeconfig),
                       PYTHONPATH=os.pathsep.join(p for p in (str(REPO / "tests"), os.environ.get("PYTHONPATH"))
                                                  if p))
            cmd = [sys.executable, "-m", "pytest", "-c", str(HERE / "kr8s.ini"), "--rootdir", str(kr8s_dir),
                   "--confcutdir", str(kr8s_dir), str(kr8s_dir / "tests"), *argv]
            # kr8s's tests write temporary kubeconfigs and start `kubectl proxy`; run them from the scratch dir.
            rc = subprocess.run(cmd, env=env, cwd=tmp, timeout=RUN_TIMEOUT).returncode
        finally:
            _stop(chain)
            if rc != 0:
                print(f"== kubechain up output (last 6000 characters)\n{log.read_text(errors='replace')[-6000:]}")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
