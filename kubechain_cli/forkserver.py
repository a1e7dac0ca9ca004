"""The services of a chain forked from one process that imported their shared code once (issue 15).

Each of core-api, extensions-api and the gateway imports about 5 G instructions of Python (FastAPI,
pydantic, gRPC, the shared library, ...) before it can start; three of them on two cores made the
cold start. ``Chain.start`` therefore first starts this fork server (``python -m
kubechain_cli.forkserver``), which imports what the three share (``PRELOAD``) while the chain makes
its certificates and etcd boots, and then forks each service from that state: the child imports
only what is its own and runs the service's ``__main__`` as ``python -m <module>`` would.

What a service sees is what ``subprocess.Popen`` gave it before: its own session and process group,
stdout and stderr appended to its log in the data dir, stdin from /dev/null, the same environment,
``/proc/<pid>/cmdline`` showing ``python -m <module> <flags>`` (``ps``, ``pgrep -f``; rewritten in
place, as setproctitle does, within the room the fork server's padded command line leaves), and
it is a child of the process that started the chain, with SIGTERM as its parent-death signal. The
last two come from a double fork: the fork server forks a short-lived intermediate that forks the
service and exits, and the chain's process, a child subreaper (``PR_SET_CHILD_SUBREAPER``) while it
spawns, adopts the orphan. ``Chain.processes`` holds it as a ``ForkedProcess`` (a ``Popen`` whose
``poll``/``wait``/``send_signal`` work on the adopted pid), so supervision, ``Chain.stop`` and the
tests treat it as any other child.

The fork server lives only while the chain starts: once the first gateway is forked it is told to
exit. A service started later (a supervisor's restart, ``add_process``) is executed as before;
so is every service when forking is not possible here (not Linux, no subreaper, the environment
changed since the fork server started, a thread in the fork server, the fork server gone).
``KUBECHAIN_FORK_SERVICES=0`` turns it off. Forking is safe because nothing the preload runs starts
a thread, an event loop or a gRPC channel (``GRPC_ENABLE_FORK_SUPPORT=0`` is set by
``kubechain_cli`` before gRPC loads); the fork server checks ``/proc/self/task`` before each fork.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import json
import os
import runpy
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: What core-api, extensions-api and the gateway all import, loaded once in the fork server: these
#: roots pull in most of the modules each service loads (Starlette, uvicorn, gRPC, cryptography,
#: prometheus_client, PyYAML, the shared library's server, registry and storage layers) and nothing
#: only one of them imports (so no service gains another's metrics or module state). uvicorn's
#: lifespan is what ``uvicorn.Config.load`` imports when each service starts serving (no websocket
#: protocol: the services serve uvicorn with ``ws="none"``). Not aiohttp: nothing on the way to a
#: ready chain needs it (the controllers reach the other members over Unix sockets with
#: ``genericapi.controllers.unixclient``), and its import was ~0.25 s of this serial preload.
PRELOAD = (
    "genericapi.server.apiserver",
    "genericapi.server.app",
    "genericapi.server.tls",
    "genericapi.server.proxy",
    "genericapi.registry.rbacview",
    "genericapi.registry.serviceview",
    "genericapi.storage.etcd",
    "genericapi.apimachinery.schemas",
    "genericapi.apimachinery.serviceresolver",
    "genericapi.apimachinery.matchconditions",
    "cryptography.x509",
    "uvicorn.lifespan.on",
)
#: The services that may be forked (``python -m <module>``).
FORKABLE = frozenset({"coreapi", "extensionsapi", "aggregator"})
#: Bytes of padding on the fork server's command line: the room a service's command line is
#: written into (a chain's longest, core-api with three replicas in a deep temporary directory, is
#: about 2 KiB).
CMDLINE_ROOM = 8192
#: ``KUBECHAIN_FORK_SERVICES=0`` starts every service with exec, as before.
ENV_SWITCH = "KUBECHAIN_FORK_SERVICES"
#: Variables that may differ between the fork server's environment and a service's (nothing reads
#: them at import): pytest names the running test phase in one. A forked service gets its own
#: environment exactly; any other difference means exec.
VOLATILE_ENV = frozenset({"PYTEST_CURRENT_TEST"})

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37


def _prctl(option: int, value: int) -> int:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    return int(libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0))


def _is_subreaper() -> bool:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    flag = ctypes.c_int(0)
    libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0)
    return bool(flag.value)


# -- the chain's end ---------------------------------------------------------------------------------


class ForkedProcess(subprocess.Popen[bytes]):
    """A service the fork server forked and this process adopted: ``Popen``'s interface over its pid.

    Nothing is started here (``Popen.__init__`` is not called); ``poll``, ``wait``, ``send_signal``,
    ``terminate`` and ``kill`` are implemented with ``os.waitpid``/``os.kill`` on the pid, which is
    this process's child."""

    def __init__(self, pid: int, args: Sequence[str]) -> None:
        self.argv = list(args)
        self.args = self.argv
        self.pid = pid
        self.returncode: Any = None
        self.stdin = self.stdout = self.stderr = None
        self._lock = threading.Lock()

    def poll(self) -> int | None:
        return self._reap(os.WNOHANG)

    def _reap(self, flags: int) -> int | None:
        if not self._lock.acquire(blocking=flags == 0):
            return None  # another thread is waiting for it
        try:
            if self.returncode is not None:
                return int(self.returncode)
            try:
                pid, status = os.waitpid(self.pid, flags)
            except ChildProcessError:  # reaped by someone else: as Popen, call it 0
                self.returncode = 0
                return 0
            if pid == self.pid:
                self.returncode = os.waitstatus_to_exitcode(status)
            return None if self.returncode is None else int(self.returncode)
        finally:
            self._lock.release()

    def wait(self, timeout: float | None = None) -> int:
        if timeout is None:
            code = self._reap(0)
            assert code is not None
            return code
        deadline = time.monotonic() + timeout
        delay = 0.0005
        while True:
            code = self.poll()
            if code is not None:
                return code
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(min(delay, remaining, 0.05))
            delay *= 2

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def __enter__(self) -> ForkedProcess:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.wait()

    def __del__(self) -> None:  # Popen's would look at attributes it never set
        with contextlib.suppress(Exception):
            self.poll()

    def __repr__(self) -> str:
        return f"<ForkedProcess: returncode: {self.returncode} args: {self.argv[:3]!r}...>"


def forkable_module(argv: Sequence[str]) -> str:
    """The service module of ``python -m <module> ...`` with this interpreter ("" when not forkable)."""
    if len(argv) >= 3 and argv[0] == sys.executable and argv[1] == "-m" and argv[2] in FORKABLE:
        return argv[2]
    return ""


def enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether chains fork their services here (Linux, and not turned off)."""
    env = os.environ if environ is None else environ
    return sys.platform == "linux" and env.get(ENV_SWITCH, "1") != "0"


_subreaper_lock = threading.Lock()
_subreaper_users = 0
_subreaper_was_set = False


@contextlib.contextmanager
def _adopting() -> Any:
    """This process a child subreaper for the block (several chains may start at once)."""
    global _subreaper_users, _subreaper_was_set
    with _subreaper_lock:
        if _subreaper_users == 0:
            _subreaper_was_set = _is_subreaper()
            if not _subreaper_was_set and _prctl(_PR_SET_CHILD_SUBREAPER, 1) != 0:
                raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")
        _subreaper_users += 1
    try:
        yield
    finally:
        with _subreaper_lock:
            _subreaper_users -= 1
            if _subreaper_users == 0 and not _subreaper_was_set:
                _prctl(_PR_SET_CHILD_SUBREAPER, 0)


def _stable(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k not in VOLATILE_ENV}


class ForkServer:
    """The chain's handle on a running fork server: ``spawn`` services, then ``close``."""

    def __init__(self, proc: subprocess.Popen[bytes], sock: socket.socket, env: Mapping[str, str],
                 adopting: contextlib.AbstractContextManager[Any]) -> None:
        self.proc = proc
        self.env = dict(env)
        self._sock = sock
        self._buffer = b""
        self._adopting = adopting
        #: Why the last spawn was not forked ("" when it was).
        self.last_refusal = ""

    @classmethod
    def launch(cls, env: Mapping[str, str], log_path: str, preexec_fn: Any = None,
               preload: Sequence[str] = PRELOAD) -> ForkServer | None:
        """Start a fork server that preloads ``preload``; None where services cannot be forked."""
        if not enabled(env):
            return None
        adopting = _adopting()
        try:
            adopting.__enter__()
        except OSError:
            return None
        ours, theirs = socket.socketpair()
        try:
            with open(log_path, "ab") as log:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "kubechain_cli.forkserver", "--fd", str(theirs.fileno()),
                     "--parent", str(os.getpid()), "--preload", ",".join(preload), "--room=" + "." * CMDLINE_ROOM],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=dict(env),
                    pass_fds=(theirs.fileno(),), start_new_session=True, preexec_fn=preexec_fn)
        except OSError:
            ours.close()
            adopting.__exit__(None, None, None)
            return None
        finally:
            theirs.close()
        return cls(proc, ours, env, adopting)

    def spawn(self, argv: Sequence[str], log_path: str, env: Mapping[str, str],
              timeout: float = 60.0) -> ForkedProcess | None:
        """Fork the service ``argv`` runs (``python -m <module> ...``), logging to ``log_path``;
        None (start it with exec) when it cannot be forked (``last_refusal`` says why)."""
        module = forkable_module(argv)
        self.last_refusal = ""
        if not module:
            self.last_refusal = "not a forkable service"
        elif _stable(env) != _stable(self.env):
            self.last_refusal = "environment differs from the fork server's"
        elif self._sock.fileno() < 0 or self.proc.poll() is not None:
            self.last_refusal = "fork server gone"
        if self.last_refusal:
            return None
        request = {"module": module, "argv": list(argv), "log": log_path, "env": dict(env)}
        try:
            self._sock.sendall(json.dumps(request).encode() + b"\n")
            answer = self._read(timeout)
        except (OSError, TimeoutError, ValueError) as err:
            self.last_refusal = f"fork server: {err}"
            self.close()
            return None
        if "pid" not in answer:
            self.last_refusal = str(answer.get("error") or answer)
            return None
        return ForkedProcess(int(answer["pid"]), argv)

    def _read(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no answer in {timeout}s")
            ready, _w, _x = select.select([self._sock], [], [], remaining)
            if ready:
                chunk = self._sock.recv(65536)
                if not chunk:
                    raise OSError("the fork server exited")
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self, timeout: float = 1.0) -> None:
        """Tell the fork server to exit (end of its input) and reap it; stop adopting. One still
        preloading (a chain stopped while starting) is killed after ``timeout``: it holds nothing."""
        if self._sock.fileno() >= 0:
            self._sock.close()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self._adopting.__exit__(None, None, None)


# -- the fork server's end ----------------------------------------------------------------------------


@dataclass
class _Request:
    module: str
    argv: list[str]
    log: str
    env: dict[str, str]


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(json.dumps(message).encode() + b"\n")


def _serve(sock: socket.socket) -> _Request | None:
    """Answer requests until the chain closes the socket (then None). Returns a request only in a
    forked service, which goes on to run it."""
    reader = sock.makefile("rb")
    for line in reader:
        raw = json.loads(line)
        request = _Request(str(raw["module"]), [str(a) for a in raw["argv"]], str(raw["log"]),
                           {str(k): str(v) for k, v in raw["env"].items()})
        threads = _threads()
        if threads != 1:
            _send(sock, {"error": f"{threads} threads in the fork server"})
            continue
        read_end, write_end = os.pipe()
        intermediate = os.fork()
        if intermediate == 0:
            os.close(read_end)
            service = os.fork()
            if service == 0:
                # Its own session before the chain hears its pid (Popen's start_new_session gives
                # that too): a killpg right after spawn must reach it.
                os.setsid()
                os.write(write_end, str(os.getpid()).encode())
                os.close(write_end)
                reader.close()
                sock.close()
                return request
            os.close(write_end)
            os._exit(0)
        os.close(write_end)
        with os.fdopen(read_end, "rb") as pipe:
            pid = pipe.read().decode()
        os.waitpid(intermediate, 0)  # the service is an orphan now: the chain's process has adopted it
        _send(sock, {"pid": int(pid)} if pid else {"error": "the intermediate process failed"})
    return None


def _become(request: _Request, parent: int) -> None:
    """In the forked service: what Popen(start_new_session=True, preexec_fn=die with parent) gave it
    (its own session it took in ``_serve``, before its pid was reported)."""
    deadline = time.monotonic() + 10
    while os.getppid() != parent:  # until the chain's process has adopted us
        if time.monotonic() > deadline:
            os._exit(70)
        time.sleep(0.0005)
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the chain's process died meanwhile
        os._exit(70)
    for sig in (signal.SIGTERM, signal.SIGCHLD, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    log = os.open(request.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.close(null)
    if dict(os.environ) != request.env:
        os.environ.clear()
        os.environ.update(request.env)
    set_cmdline(request.argv)
    gc.enable()


def set_cmdline(argv: Sequence[str]) -> bool:
    """Show ``argv`` as this process's ``/proc/<pid>/cmdline`` (``ps``, ``pgrep -f``) by rewriting
    the original argument strings in place, cut to the room they had; False where not possible."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end (fields 48 and 49)
    except (OSError, IndexError, ValueError):
        return False
    room = end - start
    if room <= 1:
        return False
    data = b"\0".join(a.encode(errors="surrogateescape") for a in argv)[:room - 1]
    ctypes.memset(start, 0, room)
    ctypes.memmove(start, data, len(data))
    return True


def main(argv: Sequence[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m kubechain_cli.forkserver", description=__doc__.split("\n\n")[0])
    parser.add_argument("--fd", type=int, required=True, help="the socket to the chain's process")
    parser.add_argument("--parent", type=int, required=True, help="the chain's process (adopts the services)")
    parser.add_argument("--preload", default=",".join(PRELOAD), help="modules to import before forking")
    parser.add_argument("--room", default="", help="padding: room for the services' command lines")
    args = parser.parse_args(argv)
    gc.disable()  # as gctuning.import_server: nothing to collect while modules load
    started = time.monotonic()
    for name in filter(None, args.preload.split(",")):
        importlib.import_module(name)
    gc.freeze()  # what is loaded now stays: shared copy-on-write pages in the services
    print(f"forkserver: preloaded {args.preload} in {time.monotonic() - started:.2f}s", flush=True)
    sock = socket.socket(fileno=args.fd)
    request = _serve(sock)
    if request is None:
        return
    _become(request, args.parent)
    sys.argv = list(request.argv[2:])  # run_module puts the module's path first, as ``-m`` does
    runpy.run_module(request.module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
