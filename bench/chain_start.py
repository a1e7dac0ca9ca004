"""Cold start of the chain (what ``kubechain up`` and the pytest plugin wait for): N starts, each in a
fresh data dir (new certificates, empty etcd), alternating controllers on and off; prints each time
and the medians with the load average, since on a busy machine the three Python services' imports
(about 1 s of CPU each) decide it.

    .venv/bin/python bench/chain_start.py [N]
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from kubechain_cli.chain import Chain, free_port


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    times: dict[str, list[float]] = {"controllers on": [], "controllers off": []}
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
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for label, runs in times.items():
        print(f"{label:16s} median {statistics.median(runs):.2f}s  ({' '.join(f'{t:.2f}' for t in runs)})")


if __name__ == "__main__":
    main()
