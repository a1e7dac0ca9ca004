"""Cold start of the chain (what ``kubechain up`` and the pytest plugin wait for): N starts, each in a
fresh data dir (new certificates, empty etcd), alternating controllers on and off; prints each time
and the medians with the load average, since on a busy machine the three Python services' imports
(about 1 s of CPU each) decide it. bench/bench.py reads its cold-start line with ``cold_starts``.

    .venv/bin/python bench/chain_start.py [N]
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from kubechain_cli.chain import Chain, free_port

#: The modes a round starts, in order: "controllers on" is what ``kubechain up`` runs.
MODES = ("controllers on", "controllers off")


def cold_starts(rounds: int, modes: Sequence[str] = MODES) -> dict[str, list[float]]:
    """Seconds from ``Chain.start`` to a ready gateway (``/readyz``), ``rounds`` starts of each mode."""
    times: dict[str, list[float]] = {mode: [] for mode in modes}
    for _ in range(rounds):
        for label, runs in times.items():
            with tempfile.TemporaryDirectory(prefix="kubechain-bench-") as data:
                chain = Chain(Path(data), port=free_port(), controllers=label.endswith("on"))
                started = time.monotonic()
                try:
                    chain.start()
                    runs.append(time.monotonic() - started)
                finally:
                    chain.stop(timeout=3)
    return times


def main() -> None:
    times = cold_starts(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for label, runs in times.items():
        print(f"{label:16s} median {statistics.median(runs):.2f}s  ({' '.join(f'{t:.2f}' for t in runs)})")


if __name__ == "__main__":
    main()
