"""A real-socket HTTP/2 server speaking just enough of RFC 9113 to drive storage/grpcwire.py through
what etcd cannot be made to send (CONTINUATION, padding, GOAWAY, stream limits, resets, silence).

Why it exists: the review of the hand-written gRPC transport (issue 15) needs a peer whose frames the
test chooses; etcd (grpc-go) sends only its own. Frames are built and parsed by hand here, headers
encoded with ``hpack``'s encoder (which indexes what it sends, as grpc-go's does)."""

from __future__ import annotations

import asyncio
import struct
from collections import defaultdict
from collections.abc import Callable

import hpack

DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY_FLAG = 0x1, 0x1, 0x4, 0x8, 0x20
S_HEADER_TABLE_SIZE, S_MAX_CONCURRENT_STREAMS, S_INITIAL_WINDOW_SIZE = 1, 3, 4


def frame(kind: int, flags: int, sid: int, payload: bytes = b"") -> bytes:
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + sid.to_bytes(4, "big") + payload


def grpc_message(body: bytes, compressed: bool = False) -> bytes:
    return struct.pack(">BI", 1 if compressed else 0, len(body)) + body


class Peer:
    """One accepted connection: reads the client's frames in a task, acks SETTINGS and PING, keeps
    the flow-control windows both ways, and lets the test send what it likes."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *,
                 ack_pings: bool = True) -> None:
        self.reader, self.writer = reader, writer
        self.encoder, self.decoder = hpack.Encoder(), hpack.Decoder()
        self.ack_pings = ack_pings
        self.headers: dict[int, list[tuple[bytes, bytes]]] = {}
        self.data: dict[int, bytearray] = defaultdict(bytearray)
        self.client_ended: set[int] = set()
        self.rst: dict[int, int] = {}
        self.goaway: tuple[int, int] | None = None
        self.pings_seen = 0
        self.ping_acks: list[bytes] = []
        self.settings_acks = 0
        self.frames: list[tuple[int, int, int, int]] = []  # (type, flags, stream, length) in order
        # Our (the server's) view of the windows the client gives us, and of ours to it.
        self.send_conn = 65535
        self.client_initial = 65535
        self.send_stream: dict[int, int] = {}
        self.recv_conn = 65535  # what the client may still send us on the connection
        self.recv_initial = 65535
        self.recv_stream: dict[int, int] = {}
        self.window_violations: list[str] = []
        self.window_updates_conn = 0
        self.window_updates_stream: dict[int, int] = defaultdict(int)
        self.eof = False
        self.changed = asyncio.Event()
        self.pump: asyncio.Task[None] | None = None

    async def start(self, settings: dict[int, int]) -> None:
        preface = await self.reader.readexactly(24)
        assert preface == b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
        if S_INITIAL_WINDOW_SIZE in settings:
            self.recv_initial = settings[S_INITIAL_WINDOW_SIZE]
        self.send(SETTINGS, 0, 0, b"".join(struct.pack(">HI", k, v) for k, v in settings.items()))
        self.pump = asyncio.ensure_future(self._pump())

    def send(self, kind: int, flags: int, sid: int, payload: bytes = b"") -> None:
        if not self.writer.is_closing():
            self.writer.write(frame(kind, flags, sid, payload))

    async def until(self, predicate: Callable[[], bool], within: float = 10.0) -> None:
        async with asyncio.timeout(within):
            while not predicate():
                self.changed.clear()
                await self.changed.wait()

    async def _pump(self) -> None:
        try:
            while True:
                head = await self.reader.readexactly(9)
                length = int.from_bytes(head[:3], "big")
                kind, flags = head[3], head[4]
                sid = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
                payload = await self.reader.readexactly(length)
                self.frames.append((kind, flags, sid, length))
                self._on_frame(kind, flags, sid, payload)
                self.changed.set()
        except (asyncio.IncompleteReadError, ConnectionError):
            self.eof = True
            self.changed.set()

    def _on_frame(self, kind: int, flags: int, sid: int, payload: bytes) -> None:
        if kind == SETTINGS:
            if flags & ACK:
                self.settings_acks += 1
                return
            for i in range(0, len(payload), 6):
                key, value = struct.unpack_from(">HI", payload, i)
                if key == S_INITIAL_WINDOW_SIZE:
                    for s in self.send_stream:
                        self.send_stream[s] += value - self.client_initial
                    self.client_initial = value
            self.send(SETTINGS, ACK, 0)
        elif kind == PING:
            if flags & ACK:
                self.ping_acks.append(payload)
            else:
                self.pings_seen += 1
                if self.ack_pings:
                    self.send(PING, ACK, 0, payload)
        elif kind == WINDOW_UPDATE:
            increment = int.from_bytes(payload, "big") & 0x7FFFFFFF
            if sid == 0:
                self.send_conn += increment
                self.window_updates_conn += increment
            else:
                self.send_stream[sid] = self.send_stream.get(sid, self.client_initial) + increment
                self.window_updates_stream[sid] += increment
        elif kind == HEADERS:
            assert flags & END_HEADERS, "this client never continues its header blocks"
            self.headers[sid] = self.decoder.decode(payload, raw=True)  # type: ignore[assignment]
            self.send_stream.setdefault(sid, self.client_initial)
            self.recv_stream.setdefault(sid, self.recv_initial)
            if flags & END_STREAM:
                self.client_ended.add(sid)
        elif kind == DATA:
            self.recv_conn -= len(payload)
            self.recv_stream[sid] = self.recv_stream.get(sid, self.recv_initial) - len(payload)
            if self.recv_conn < 0 or self.recv_stream[sid] < 0:
                self.window_violations.append(f"stream {sid}: conn {self.recv_conn}, stream {self.recv_stream[sid]}")
            self.data[sid] += payload
            if flags & END_STREAM:
                self.client_ended.add(sid)
        elif kind == RST_STREAM:
            self.rst[sid] = int.from_bytes(payload, "big")
        elif kind == GOAWAY:
            self.goaway = (int.from_bytes(payload[:4], "big"), int.from_bytes(payload[4:8], "big"))

    # -- what the server sends ------------------------------------------------------------------
    def give_window(self, sid: int, increment: int) -> None:
        """Open our receive window (the client may send ``increment`` more)."""
        if sid == 0:
            self.recv_conn += increment
        else:
            self.recv_stream[sid] = self.recv_stream.get(sid, self.recv_initial) + increment
        self.send(WINDOW_UPDATE, 0, sid, increment.to_bytes(4, "big"))

    def head(self, sid: int, extra: list[tuple[bytes, bytes]] | None = None, *, end: bool = False) -> None:
        block = self.encoder.encode([(b":status", b"200"), (b"content-type", b"application/grpc")] + (extra or []))
        self.send(HEADERS, END_HEADERS | (END_STREAM if end else 0), sid, block)

    def trailers(self, sid: int, status: int = 0, message: bytes = b"") -> None:
        fields = [(b"grpc-status", str(status).encode())]
        if message:
            fields.append((b"grpc-message", message))
        self.send(HEADERS, END_HEADERS | END_STREAM, sid, self.encoder.encode(fields))

    async def send_data(self, sid: int, data: bytes, *, end: bool = False, pad: int = 0,
                        frame_size: int = 16384, within: float = 10.0) -> None:
        """DATA frames within the client's windows (padding counts against them, RFC 9113 6.1)."""
        pos = 0
        while True:
            room = frame_size - (pad + 1 if pad else 0)
            size = min(len(data) - pos, room)
            flow = size + (pad + 1 if pad else 0)
            await self.until(lambda flow=flow: self.eof or (self.send_conn >= flow and self.send_stream.get(  # type: ignore[misc]
                sid, self.client_initial) >= flow), within)
            if self.eof:
                raise ConnectionError("client went away")
            chunk = data[pos:pos + size]
            last = pos + size >= len(data)
            payload = bytes([pad]) + chunk + b"\0" * pad if pad else chunk
            self.send_conn -= flow
            self.send_stream[sid] = self.send_stream.get(sid, self.client_initial) - flow
            self.send(DATA, (PADDED if pad else 0) | (END_STREAM if end and last else 0), sid, payload)
            await self.writer.drain()
            pos += size
            if last:
                return

    async def answer(self, sid: int, body: bytes = b"", status: int = 0) -> None:
        self.head(sid)
        await self.send_data(sid, grpc_message(body))
        self.trailers(sid, status)
        await self.writer.drain()

    def close(self) -> None:
        if self.pump is not None:
            self.pump.cancel()
        self.writer.close()


class PeerServer:
    """Listens on loopback; each accepted connection becomes a started ``Peer`` in ``peers``."""

    def __init__(self, settings: dict[int, int] | None = None, *, ack_pings: bool = True) -> None:
        self.settings = settings or {}
        self.ack_pings = ack_pings
        self.peers: asyncio.Queue[Peer] = asyncio.Queue()
        self.all: list[Peer] = []
        self.server: asyncio.Server | None = None
        self.port = 0

    async def __aenter__(self) -> PeerServer:
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = Peer(reader, writer, ack_pings=self.ack_pings)
        self.all.append(peer)
        await peer.start(self.settings)
        await self.peers.put(peer)

    async def next_peer(self, within: float = 10.0) -> Peer:
        return await asyncio.wait_for(self.peers.get(), within)

    async def __aexit__(self, *exc: object) -> None:
        for peer in self.all:
            peer.close()
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()
