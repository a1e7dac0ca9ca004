"""Children forked to become services survive a parent that has used gRPC.

grpcio's core turns fork support on by default; a child forked with ``preexec_fn`` (as
``Chain`` spawns every service) then restarts gRPC's poller thread, which aborts the child when
``close_fds`` closes its epoll descriptor before ``exec`` (grpc/grpc#43055; a test's chain once
failed to start with "aggregator exited with -6"). ``kubechain_cli`` turns the support off before
gRPC loads. Without it 8-10 of 300 children died here.
"""

from __future__ import annotations

import os
import subprocess
import sys

_PARENT = """
import asyncio, os, subprocess, sys
import kubechain_cli
import grpc

async def use_grpc():
    channel = grpc.aio.insecure_channel("127.0.0.1:1")
    try:
        await asyncio.wait_for(channel.channel_ready(), 0.3)
    except Exception:
        pass
    return channel

channel = asyncio.run(use_grpc())
died = sum(subprocess.Popen(["/bin/true"], preexec_fn=lambda: None).wait() != 0 for _ in range(200))
print(os.environ.get("GRPC_ENABLE_FORK_SUPPORT"), died)
"""


def test_children_forked_after_grpc_was_used_all_reach_exec() -> None:
    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}  # as a fresh shell has it
    out = subprocess.run([sys.executable, "-c", _PARENT], capture_output=True, text=True, check=True,
                         timeout=300, env=env).stdout
    setting, died = out.split()
    assert (setting, died) == ("0", "0")
