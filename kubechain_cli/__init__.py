"""The ``kubechain`` command: runs the whole chain (etcd included) on one machine.

Every process that starts chains (this command, the pytest plugin, tests, benches) imports this
package first, and it is where gRPC's fork support is turned off for them, before gRPC loads:
grpcio 1.85's core enables it by default, and then a child forked to become a service (subprocess
with ``preexec_fn``, to die with its parent) restarts gRPC's poller thread, which aborts the child
with "epoll_wait error: Bad file descriptor" when ``close_fds`` closes its epoll descriptor before
``exec`` (grpc/grpc#43055). Measured: 8-10 of 300 such children died after the parent had used a
channel, none with the support off. The services themselves never fork; a user's own setting wins.
"""

import os

os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")
