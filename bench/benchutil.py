"""What every bench module shares: the concurrency, the concurrent runner, percentiles, a CPU speed probe and
client certificates.

bench.py, rbac_bench.py and audit_bench.py each measured with their own copy of these; one copy
keeps their figures comparable (same workers, same way of counting time).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Awaitable, Callable

from genericapi.server.certs import issue_client_certificate

from kubechain_cli.chain import Chain

#: Requests in flight in every concurrent measurement.
CONCURRENCY = 64


async def run_concurrently(n: int, work: Callable[[int], Awaitable[None]]) -> float:
    """``work(i)`` for i in range(n) with CONCURRENCY workers; elapsed seconds."""
    counter = iter(range(n))

    async def worker() -> None:
        for i in counter:
            await work(i)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return time.perf_counter() - start


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def python_speed_ms(rounds: int = 3) -> float:
    """CPU ms this process takes for a fixed pure-Python loop, the least of ``rounds``: how much work a
    CPU second buys right now. On this shared machine it moves with what else runs (0.30-0.96 s within
    minutes at load 5-6), and the CPU-per-request figures read from /proc move with it."""
    best = float("inf")
    for _ in range(rounds):
        start, x = time.process_time(), 0
        for i in range(5_000_000):
            x += i * i
        best = min(best, time.process_time() - start)
    return best * 1000


def client_ssl(chain: Chain, user: str) -> ssl.SSLContext:
    """A TLS context presenting a client certificate for ``user`` signed by the chain's CA."""
    cert, key = issue_client_certificate(chain.data_dir / "pki", user)
    crt_path, key_path = chain.data_dir / f"{user}.crt", chain.data_dir / f"{user}.key"
    crt_path.write_bytes(cert)
    key_path.write_bytes(key)
    key_path.chmod(0o600)
    ctx = ssl.create_default_context(cafile=chain.pki.ca)
    ctx.load_cert_chain(str(crt_path), str(key_path))
    return ctx


def without_flags(argv: list[str], with_value: tuple[str, ...], switches: tuple[str, ...] = ()) -> list[str]:
    """``argv`` without the flags in ``with_value`` (as ``--f v`` or ``--f=v``) and ``switches``: a
    bench mode takes a chain process's command line and sets those flags its own way."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg in with_value:
            skip = True
            continue
        if arg.split("=", 1)[0] in (*with_value, *switches):
            continue
        out.append(arg)
    return out
