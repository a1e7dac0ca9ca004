"""The direct stream writer a server protocol may offer a streamed answer (issue 15, watch fan-out).

A watch answered through ASGI costs, per event and per watcher, one task wakeup, one ``send``
message through every wrapper and one write scheduled by the protocol. A server protocol that can
do better puts an object with this interface in the request's scope under ``SCOPE_KEY``: once the
answer's head has gone through ``send`` (so every wrapper saw the status and headers), the handler
writes body pieces with ``stream_write``, chunk-framed by the protocol straight onto the
connection, from wherever the event is (the watch cache's dispatch loop), and ends the answer with
the usual last ``send``. Back-pressure and disconnects are the protocol's: ``stream_ready`` is false
while the connection's buffer is over its high-water mark (the handler queues and waits in
``stream_drain``) or once it is gone, and ``stream_lost`` (set by the handler) is called when the
client goes. Handlers only read the scope; the server layer implements it (leanexchange.py,
corking.py).
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any, Protocol

#: Where a protocol puts its ``DirectStream`` in the ASGI scope.
SCOPE_KEY = "kubechain.direct_stream"


class DirectStream(Protocol):
    """Writes a chunked answer's body straight to its connection (see the module docstring)."""

    #: Called once when the connection is lost (the handler ends its stream); set by the handler.
    stream_lost: Callable[[], None] | None

    def stream_ready(self) -> bool:
        """Whether a piece written now goes out at once: the answer's head was sent chunk-framed, the
        answer is not complete, the client is there and the connection's buffer is below its mark."""
        ...

    def stream_gone(self) -> bool:
        """Whether the client has gone (nothing written will reach it)."""
        ...

    def stream_write(self, data: bytes) -> None:
        """Write ``data`` as one chunk of the body (with the held head, if any, in one write)."""
        ...

    async def stream_drain(self) -> None:
        """Until the connection's buffer is below its low-water mark again, or the client is gone."""
        ...


def direct_stream(scope: MutableMapping[str, Any]) -> DirectStream | None:
    """The protocol's direct writer for this request, if it offers one."""
    stream: DirectStream | None = scope.get(SCOPE_KEY)
    return stream
