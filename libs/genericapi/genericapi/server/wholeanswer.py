"""A sized answer written in one go, without the two ASGI messages (issue 15: the gateway's CPU per GET).

A proxied GET's answer arrives from a Unix-socket backend whole (head and body in one read). Sent on
as ASGI, it went through ``http.response.start`` and ``http.response.body``: the chain's ``send`` copied
the message and rebuilt its header list, the server's ``send`` checked the message types, re-read every
header for its framing and wrote the head and body in two steps. py-spy put that at about a fifth of
the gateway's busy time under GETs. Here the server's exchange (leanexchange.py) and the gateway's
one-pass chain (aggregator/gatewaychain.py) offer ``answer_whole``: the status, the headers (already
without hop-by-hop ones) and the whole body, turned into one head and one write.

Whoever offers it puts an object with this interface in the scope under ``SCOPE_KEY``; its ``send`` is
the ASGI ``send`` it stands for. A caller uses ``answer_whole`` only when the ``send`` it was given *is*
that one (``offered``): anything that wraps ``send`` (fault injection, another filter, a test's
recorder) sees every message as before.
"""

from __future__ import annotations

from typing import Any, Protocol

from starlette.types import Scope, Send

SCOPE_KEY = "kubechain.whole_answer"


class WholeAnswer(Protocol):
    """Writes a sized answer whole (see the module doc)."""

    async def send(self, message: Any) -> None: ...

    async def answer_whole(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        """The answer: ``headers`` (lowercase names, no hop-by-hop ones, no ``content-length``: the
        length of ``body`` is added), then ``body``; the response is complete afterwards. RuntimeError,
        nothing written, for a head with control characters (as ``send`` would raise)."""
        ...


def offered(scope: Scope, send: Send) -> WholeAnswer | None:
    """The scope's ``WholeAnswer`` when ``send`` is its own ``send`` (nothing wraps it), else None."""
    whole: WholeAnswer | None = scope.get(SCOPE_KEY)
    if whole is not None and whole.send == send:
        return whole
    return None
