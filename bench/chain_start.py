"""Cold start of the chain (what ``kubechain up`` and the pytest plugin wait for): N starts, each in a
fresh data dir (new certificates, empty etcd), alternating controllers on and off; prints each time
and the medians with the load average, since on a busy machine the three Python services' start-up
CPU decides it. bench/bench.py reads its cold-start line with ``cold_starts``.

``--ab`` instead alternates, with controllers on, the services forked from the fork server (the
default, kubechain_cli.forkserver) and executed one by one (``KUBECHAIN_FORK_SERVICES=0``): both
medians from one run, under the same load.

    .venv/bin/python bench/chain_start.py [N] [--ab]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from kubechain_cli import forkserver
from kubechain_cli.chain import Chain, free_port

#: The modes a round starts, in order: "controllers on" is what ``kubechain up`` runs.
MODES = ("controllers on", "controllers off")
#: The modes of ``--ab``: forked (the default) and executed services, controllers on.
AB_MODES = ("forked", "executed")


def cold_starts(rounds: int, modes: Sequence[str] = MODES) -> dict[str, list[float]]:
    """Seconds from ``Chain.start`` to a ready gateway (``/readyz``), ``rounds`` starts of each mode."""
    times: dict[str, list[float]] = {mode: [] for mode in modes}
    for _ in range(rounds):
        for label, runs in times.items():
            saved = os.environ.get(forkserver.ENV_SWITCH)
            if label == "executed":
                os.environ[forkserver.ENV_SWITCH] = "0"
            try:
                with tempfile.TemporaryDirectory(prefix="kubechain-bench-") as data:
                    chain = Chain(Path(data), port=free_port(), controllers=not label.endswith("off"))
                    started = time.monotonic()
                    try:
                        chain.start()
                        runs.append(time.monotonic() - started)
                    finally:
                        chain.stop(timeout=3)
            finally:
                if saved is None:
                    os.environ.pop(forkserver.ENV_SWITCH, None)
                else:
                    os.environ[forkserver.ENV_SWITCH] = saved
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rounds", nargs="?", type=int, default=5)
    parser.add_argument("--ab", action="store_true", help="forked vs executed services, controllers on")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    times = cold_starts(args.rounds, AB_MODES if args.ab else MODES)
    print(f"load average {load:.1f} at start, {os.getloadavg()[0]:.1f} at end, on {os.cpu_count()} cores")
    for label, runs in times.items():
        print(f"{label:16s} median {statistics.median(runs):.2f}s  ({' '.join(f'{t:.2f}' for t in runs)})")


if __name__ == "__main__":
    main()
