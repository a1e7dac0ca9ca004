"""CPU per create and per GET of each process, this working tree ÷ another tree, in one run.

The other tree (``git archive <commit> libs services kubechain_cli proto | tar -x -C DIR``, plus the
generated code copied from ``libs/genericapi/genericapi/generated``) runs first on ``PYTHONPATH``,
ahead of the editable install; both chains run side by side and the rounds alternate between them
(bench/gc_bench.py's rounds: N creates then N GETs through the gateway, CPU from /proc).

    .venv/bin/python bench/tree_ab.py DIR [ROUNDS] [N]
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gc_bench import main_async


def main() -> None:
    old = Path(sys.argv[1]).resolve()
    paths = [old / "libs" / "genericapi", *(p for p in sorted((old / "services").iterdir()) if p.is_dir()), old]
    env = {"PYTHONPATH": os.pathsep.join(str(p) for p in paths)}
    asyncio.run(main_async(int(sys.argv[2]) if len(sys.argv) > 2 else 6,
                           int(sys.argv[3]) if len(sys.argv) > 3 else 2000,
                           {"old": env, "new": {}}))


if __name__ == "__main__":
    main()
