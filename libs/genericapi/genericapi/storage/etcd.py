"""The one module that talks to etcd; everything else sees bytes and revisions.

It speaks etcd's v3 gRPC API (aetcd's generated message classes, protobuf's C implementation) over a
connection of its own (``grpcwire``: gRPC framed on HTTP/2 on the event loop, plain or TLS with a
client certificate as kube-apiserver's ``--etcd-cafile/--etcd-certfile/--etcd-keyfile``), and issues
the KV, Lease and Watch RPCs itself: kube-apiserver's storage needs ranges at a revision with limits,
transactions comparing ``mod_revision`` and watches with progress notifications. Transport and gRPC
errors are wrapped once, here, into storage errors.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from aetcd import rpc

from .errors import (
    FutureRevisionRefusedError,
    KeyExistsError,
    KeyNotFoundError,
    RevisionConflictError,
    SentCallError,
    TooOldRevisionError,
)
from .errors import UnavailableError as StorageUnavailable
from .etcdproto import create_txn, delete_txn, update_txn
from .grpcwire import Connection, RpcError, StatusCode
from .instrumentation import EtcdInstruments, recorded
from .value import PrefixTransformers

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class KeyValue:
    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    #: Read with an encryption provider other than the one that writes now: rewrite it on update.
    stale: bool = False


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One etcd change: ``PUT`` or ``DELETE``, with the value before it when known."""

    kind: str
    key: bytes
    value: bytes
    prev_value: bytes | None
    mod_revision: int
    create_revision: int


@dataclass(frozen=True, slots=True)
class WatchBatch:
    """Everything one watch response carried: events of one or more revisions, or progress."""

    events: tuple[WatchEvent, ...]
    revision: int


def prefix_end(prefix: bytes) -> bytes:
    """The exclusive end of the key range that starts with ``prefix``."""
    end = bytearray(prefix)
    for i in range(len(end) - 1, -1, -1):
        if end[i] < 0xFF:
            end[i] += 1
            return bytes(end[: i + 1])
    return b"\0"


@dataclass(frozen=True, slots=True)
class EtcdTLS:
    """kube-apiserver's etcd client TLS: the CA that signed etcd's serving certificate and the
    client certificate etcd (``--client-cert-auth``) asks for. Read when a connection opens, so a
    rotated certificate is used from the next reconnect on."""

    cafile: str = ""
    certfile: str = ""
    keyfile: str = ""

    def __bool__(self) -> bool:
        return bool(self.cafile or self.certfile)

    def ssl_context(self) -> ssl.SSLContext:
        """A client context trusting ``cafile`` (the system's roots without one), presenting the
        client certificate when given, offering HTTP/2 by ALPN as gRPC does."""
        ctx = ssl.create_default_context(cafile=self.cafile or None)
        if self.certfile:
            ctx.load_cert_chain(self.certfile, self.keyfile or None)
        ctx.set_alpn_protocols(["h2"])
        return ctx


def _system_tls() -> ssl.SSLContext:
    return EtcdTLS().ssl_context()


#: gRPC keepalive on the etcd connection (kube-apiserver's etcd client keeps one too): a member that
#: vanished without closing its connections (host or container killed) is noticed within ~15 s, which
#: ends the watches on it so they resume on the next endpoint instead of waiting forever. A PING every
#: 10 s while calls are open (etcd accepts one every 5 s or slower), none while the connection is idle
#: (a server counts those against the client), and an unanswered one ends the connection after 5 s.
KEEPALIVE_TIME = 10.0
KEEPALIVE_TIMEOUT = 5.0

#: Responses up to math.MaxInt32 bytes, as etcd's own Go client (clientv3, which kube-apiserver uses)
#: takes them. gRPC's default 4 MiB receive limit failed any range read past it: a LIST at an exact
#: resourceVersion of 25 MB, or a watch-cache page of 1,000 objects of 5 KB each. (Requests stay
#: unbounded here; etcd refuses those past its ``--max-request-bytes`` itself.)
MAX_RECEIVE_MESSAGE = 2**31 - 1

#: The unary methods: their paths and response messages.
_METHODS: dict[str, tuple[bytes, Any]] = {
    "Range": (b"/etcdserverpb.KV/Range", rpc.RangeResponse),
    "Put": (b"/etcdserverpb.KV/Put", rpc.PutResponse),
    "DeleteRange": (b"/etcdserverpb.KV/DeleteRange", rpc.DeleteRangeResponse),
    "Txn": (b"/etcdserverpb.KV/Txn", rpc.TxnResponse),
    "Compact": (b"/etcdserverpb.KV/Compact", rpc.CompactionResponse),
    "LeaseGrant": (b"/etcdserverpb.Lease/LeaseGrant", rpc.LeaseGrantResponse),
}
_WATCH = b"/etcdserverpb.Watch/Watch"
_DELETE = rpc.Event.DELETE

#: Calls failing so are retried on the next endpoint: the member or the connection is gone.
_RETRIED = (StatusCode.UNAVAILABLE, StatusCode.DEADLINE_EXCEEDED, StatusCode.CANCELLED)

#: The methods that change etcd: sent again only when etcd never got them (clientv3's
#: ``isSafeRetryMutableRPC``: a write is at most once; one that was sent and then failed may have been
#: applied, and a create sent twice would answer AlreadyExists for the object it created).
_MUTATIONS = frozenset({"Put", "DeleteRange", "Txn", "Compact"})


class _Channel:
    """One connection to one etcd member."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    @classmethod
    async def open(cls, endpoint: str, tls: EtcdTLS, connect_timeout: float) -> _Channel:
        url = urlparse(endpoint)
        # TLS when certificates are given or the URL says https (then with the system's roots).
        context = tls.ssl_context() if tls else _system_tls() if url.scheme == "https" else None
        conn = await Connection.open(url.hostname or "127.0.0.1", url.port or 2379, context,
                                     connect_timeout=connect_timeout, max_message=MAX_RECEIVE_MESSAGE,
                                     keepalive=KEEPALIVE_TIME, keepalive_timeout=KEEPALIVE_TIMEOUT)
        return cls(conn)

    async def close(self) -> None:
        self.conn.close()


def _kv(kv: rpc.KeyValue) -> KeyValue:
    return KeyValue(kv.key, kv.value, kv.create_revision, kv.mod_revision)


def _revision(revision: int) -> int:
    """``revision`` for a request: etcd's revisions are int64, so one past that is a future revision
    etcd would refuse (answered as etcd's own refusal, never a protobuf ValueError)."""
    if revision > 2**63 - 1:
        raise FutureRevisionRefusedError(revision)
    return revision


class EtcdClient:
    """Async etcd v3 KV and Watch with kube-apiserver's transaction shapes."""

    def __init__(self, endpoints: Sequence[str], timeout: float = 10.0, tls: EtcdTLS | None = None) -> None:
        if not endpoints:
            raise ValueError("at least one etcd endpoint is required")
        self._endpoints = list(endpoints)
        self._timeout = timeout
        self._tls = tls or EtcdTLS()
        self._index = 0
        self._client: _Channel | None = None
        #: Connections replaced while draining, whose open streams still run (closed by close()).
        self._draining: set[_Channel] = set()
        self._lock = asyncio.Lock()
        #: Encryption at rest: key prefix -> the providers of the resource stored under it.
        self._transformers: list[tuple[bytes, PrefixTransformers]] = []
        #: kube's etcd metrics and (when configured) a span per call (instrumentation.py).
        self.instruments = EtcdInstruments()
        #: Watch streams open now, by key prefix (one per watch cache source: see cacher.py).
        self.open_watches: Counter[bytes] = Counter()

    # -- encryption at rest -------------------------------------------------------------
    def set_transformer(self, prefix: bytes, transformers: PrefixTransformers) -> None:
        """Encrypt values under ``prefix`` (one resource's keys) with ``transformers``."""
        self._transformers = [(p, t) for p, t in self._transformers if p != prefix]
        self._transformers.append((prefix, transformers))
        self._transformers.sort(key=lambda item: -len(item[0]))  # the longest prefix decides

    def _transformer(self, key: bytes) -> PrefixTransformers | None:
        for prefix, transformers in self._transformers:
            if key.startswith(prefix):
                return transformers
        return None

    def _seal(self, key: bytes, value: bytes) -> bytes:
        transformers = self._transformer(key) if self._transformers else None
        return transformers.to_storage(value, key) if transformers is not None else value

    def _open(self, key: bytes, value: bytes) -> tuple[bytes, bool]:
        transformers = self._transformer(key) if self._transformers and value else None
        if transformers is None:
            return value, False
        read = transformers.from_storage(value, key)
        return read.data, read.stale

    def _plain(self, kv: rpc.KeyValue) -> KeyValue:
        if not self._transformers:
            return _kv(kv)
        value, stale = self._open(kv.key, kv.value)
        return KeyValue(kv.key, value, kv.create_revision, kv.mod_revision, stale)

    # -- connection -------------------------------------------------------------------
    async def _connect(self) -> _Channel:
        client = self._client
        if client is not None and client.conn.usable:
            return client
        async with self._lock:
            current = self._client
            if current is not None and current.conn.lost:
                await self._reset(current)  # the member or the connection is gone: the next endpoint
            elif current is not None and not current.conn.usable:
                # Draining (GOAWAY, or its stream ids used up): the calls and watches still open on it
                # run to their end and it then closes by itself; new calls get a new connection.
                self._client = None
                self._draining.add(current)
                self._draining = {c for c in self._draining if not c.conn.lost}
            if self._client is not None:
                return self._client
            endpoint = self._endpoints[self._index % len(self._endpoints)]
            self._client = await _Channel.open(endpoint, self._tls, self._timeout)
            return self._client

    async def _reset(self, failed: _Channel | None) -> None:
        """Drop the channel ``failed`` and move to the next endpoint after a transport failure.

        Every call and watch on a connection fails at once when its member goes away; only the first
        report rotates. Later ones name a channel already replaced and leave the new one alone
        (closing it would break the watches just re-established on it). ``None``: connecting failed."""
        if failed is None:
            self._index += 1
            return
        if self._client is not failed:
            if failed in self._draining:  # a call on a draining connection failed: it is done for
                self._draining.discard(failed)
                await self._close_quietly(failed)
            return
        client, self._client = self._client, None
        self._index += 1
        if client is not None:
            await self._close_quietly(client)

    @staticmethod
    async def _close_quietly(channel: _Channel) -> None:
        try:
            await channel.close()
        except Exception:  # closing a broken connection may itself fail
            log.debug("error closing etcd connection", exc_info=True)

    async def _call(self, method: str, request: Any, data: bytes | None = None) -> Any:
        """``request`` (or its bytes, ``data``, already encoded) to etcd, retried on the next endpoint
        while the member or the connection is what failed; etcd's answer decoded.

        A read is sent again after any such failure. A write (``_MUTATIONS``) only when etcd never got
        it (connecting failed, or the connection says the request was not processed); one that was
        sent and then timed out or lost its connection may have been applied, so it fails as
        ``UnavailableError`` instead of being applied twice."""
        path, response = _METHODS[method]
        if data is None:
            data = request.SerializeToString()
        mutation = method in _MUTATIONS
        last: BaseException | None = None
        for _ in range(max(2, len(self._endpoints) + 1)):
            client: _Channel | None = None
            try:
                client = await self._connect()
                return response.FromString(await client.conn.unary(path, data, self._timeout))
            except RpcError as err:
                details = err.details
                if "future revision" in details:  # etcd's ErrFutureRev: OUT_OF_RANGE, as ErrCompacted
                    raise FutureRevisionRefusedError(getattr(request, "revision", 0)) from err
                if err.code == StatusCode.OUT_OF_RANGE or "compacted" in details:
                    raise TooOldRevisionError(getattr(request, "revision", 0), 0) from err
                last = err
                if err.code in _RETRIED:
                    if client is None or client.conn.lost:
                        await self._reset(client)
                    elif err.code == StatusCode.DEADLINE_EXCEEDED and not err.unprocessed:
                        # This call was slow; the others on the connection (watches) are not dropped
                        # for it unless the member no longer answers a PING (then it is gone).
                        if not await client.conn.alive():
                            await self._reset(client)
                    elif not err.unprocessed:
                        await self._reset(client)
                    # (Refused before it was sent by a connection still there - draining, or no stream
                    # slot in time - that connection is not what failed.)
                    if mutation and not err.unprocessed:
                        raise SentCallError(f"etcd {method}: {details} (the request was sent, whether etcd "
                                            "applied it is unknown)", err.code, details) from err
                    continue
                if err.unprocessed:
                    raise StorageUnavailable(f"etcd {method}: {details}") from err
                raise SentCallError(f"etcd {method}: {details}", err.code, details) from err
            except (TimeoutError, OSError) as err:  # connecting failed (refused, TLS, timed out)
                last = err
                await self._reset(client)
        raise StorageUnavailable(f"etcd unavailable: {last}")

    async def close(self) -> None:
        draining, self._draining = self._draining, set()
        for channel in draining:
            await channel.close()
        if self._client is not None:
            await self._client.close()
            self._client = None

    # -- reads ------------------------------------------------------------------------
    @recorded("get", "Range")
    async def get(self, key: bytes, revision: int = 0) -> tuple[KeyValue | None, int]:
        """The key's value (or None) and the store revision it was read at."""
        resp = await self._call("Range", rpc.RangeRequest(key=key, revision=_revision(revision)))
        kvs = resp.kvs
        header_rev = resp.header.revision
        return (self._plain(kvs[0]) if kvs else None), header_rev

    @recorded("list", "Range")
    async def range(self, start: bytes, end: bytes, *, revision: int = 0, limit: int = 0
                    ) -> tuple[list[KeyValue], int, bool]:
        """Keys in ``[start, end)`` at ``revision`` (0: newest): values, header revision, more."""
        resp = await self._call("Range", rpc.RangeRequest(key=start, range_end=end, revision=_revision(revision),
                                                          limit=limit))
        return ([self._plain(kv) for kv in resp.kvs],
                resp.header.revision,
                bool(resp.more))

    @recorded("list", "Range")
    async def range_counted(self, start: bytes, end: bytes, *, revision: int = 0, limit: int = 0
                            ) -> tuple[list[KeyValue], int, bool, int]:
        """``range``, and how many keys ``[start, end)`` holds at that revision, limit or not: etcd
        counts them in the same answer, so a page's ``remainingItemCount`` needs no second call
        (kube's etcd3 store reads it from the page's response, as here)."""
        resp = await self._call("Range", rpc.RangeRequest(key=start, range_end=end, revision=_revision(revision),
                                                          limit=limit))
        return [self._plain(kv) for kv in resp.kvs], resp.header.revision, bool(resp.more), int(resp.count)

    @recorded("listWithCount", "Range")
    async def count(self, start: bytes, end: bytes, revision: int = 0) -> int:
        """How many keys in ``[start, end)`` at ``revision``."""
        resp = await self._call("Range", rpc.RangeRequest(key=start, range_end=end, revision=_revision(revision),
                                                          count_only=True))
        return int(resp.count)

    async def count_modified_since(self, start: bytes, end: bytes, revision: int, min_mod_revision: int) -> int:
        """How many keys in ``[start, end)`` at ``revision`` were modified at or after
        ``min_mod_revision``. (etcd ignores revision filters on count-only ranges, so this
        reads the keys, without values.)"""
        resp = await self._call("Range", rpc.RangeRequest(key=start, range_end=end, revision=_revision(revision),
                                                          keys_only=True, min_mod_revision=min_mod_revision))
        return len(resp.kvs)

    async def current_revision(self) -> int:
        resp = await self._call("Range", rpc.RangeRequest(key=b"\0", limit=1, keys_only=True))
        return int(resp.header.revision)

    # -- writes -----------------------------------------------------------------------
    @recorded("create", "Txn")
    async def create(self, key: bytes, value: bytes) -> int:
        """Write a key that must not exist; the new revision."""
        resp = await self._call("Txn", None, create_txn(key, self._seal(key, value)))
        if not resp.succeeded:
            raise KeyExistsError(key.decode())
        return int(resp.header.revision)

    @recorded("update", "Txn")
    async def update(self, key: bytes, value: bytes, expected_revision: int) -> int:
        """Replace a key whose mod revision is ``expected_revision``; the new revision."""
        resp = await self._call("Txn", None, update_txn(key, self._seal(key, value), expected_revision))
        if not resp.succeeded:
            self._raise_mismatch(key, expected_revision, resp)
        return int(resp.header.revision)

    @recorded("delete", "Txn")
    async def delete(self, key: bytes, expected_revision: int) -> int:
        """Delete a key whose mod revision is ``expected_revision``; the deletion revision."""
        resp = await self._call("Txn", None, delete_txn(key, expected_revision))
        if not resp.succeeded:
            self._raise_mismatch(key, expected_revision, resp)
        return int(resp.header.revision)

    def _raise_mismatch(self, key: bytes, expected: int, resp: Any) -> None:
        """The compare failed: the key is gone, or it is at another revision. The transaction read
        it in the same round trip, and a conflict carries what it read (``current``), so a caller
        that retries need not read it again."""
        responses = resp.responses
        kvs = responses[0].response_range.kvs if responses else []
        if not kvs:
            raise KeyNotFoundError(key.decode())
        current = self._plain(kvs[0])
        raise RevisionConflictError(key.decode(), expected, current.mod_revision, current)

    async def put(self, key: bytes, value: bytes) -> int:
        """Unconditional write (bootstrap data, benchmarks); the new revision."""
        resp = await self._call("Put", rpc.PutRequest(key=key, value=self._seal(key, value)))
        return int(resp.header.revision)

    async def put_with_ttl(self, key: bytes, value: bytes, ttl: int) -> int:
        """A write etcd removes by itself ``ttl`` seconds later unless written again: a fresh
        lease per write, as kube's storage does for keys with a TTL (its master leases)."""
        lease = await self._call("LeaseGrant", rpc.LeaseGrantRequest(TTL=ttl))
        resp = await self._call("Put", rpc.PutRequest(key=key, value=self._seal(key, value), lease=lease.ID))
        return int(resp.header.revision)

    async def delete_prefix(self, prefix: bytes) -> int:
        resp = await self._call("DeleteRange", rpc.DeleteRangeRequest(key=prefix, range_end=prefix_end(prefix)))
        return int(resp.header.revision)

    async def compact(self, revision: int) -> None:
        await self._call("Compact", rpc.CompactionRequest(revision=revision, physical=True))

    # -- watch ------------------------------------------------------------------------
    async def watch(self, prefix: bytes, start_revision: int) -> AsyncIterator[WatchBatch]:
        """Changes under ``prefix`` from ``start_revision`` on.

        Progress notifications are not requested: etcd before 3.5.8 may send one ahead of
        events it has not yet delivered (etcd issue 15220), so they cannot prove freshness.
        Raises TooOldRevisionError when ``start_revision`` was compacted, StorageUnavailable
        when the stream breaks or cannot start (the caller restarts from its last revision).
        """
        create = rpc.WatchRequest(create_request=rpc.WatchCreateRequest(
            key=prefix, range_end=prefix_end(prefix), start_revision=start_revision, prev_kv=True))
        client: _Channel | None = None
        try:
            client = await self._connect()
        except (TimeoutError, OSError) as err:
            await self._reset(None)
            raise StorageUnavailable(f"etcd watch: {err}") from err
        parse = rpc.WatchResponse.FromString
        opened = self._open if self._transformers else None
        self.open_watches[prefix] += 1
        try:
            async for message in client.conn.stream(_WATCH, create.SerializeToString()):
                resp = parse(message)
                if resp.compact_revision:
                    raise TooOldRevisionError(start_revision, resp.compact_revision)
                if resp.canceled:
                    raise StorageUnavailable(f"etcd watch canceled: {resp.cancel_reason}")
                if not resp.events:
                    continue  # created confirmations and progress notifications
                events = []
                for ev in resp.events:
                    kv = ev.kv
                    prev = ev.prev_kv if ev.HasField("prev_kv") else None
                    key, value = kv.key, kv.value
                    prev_value = prev.value if prev is not None else None
                    if opened is not None:
                        value = opened(key, value)[0]
                        prev_value = opened(key, prev_value)[0] if prev_value is not None else None
                    if ev.type == _DELETE:
                        events.append(WatchEvent("DELETE", key, value, prev_value, kv.mod_revision,
                                                 prev.create_revision if prev is not None else 0))
                    else:
                        events.append(WatchEvent("PUT", key, value, prev_value, kv.mod_revision, kv.create_revision))
                yield WatchBatch(tuple(events), resp.header.revision)
            # The server ended the call with OK: for a watch that is the member going away.
            raise StorageUnavailable("etcd watch: the stream ended")
        except RpcError as err:
            if client.conn.lost:  # the connection broke; a failure of this stream alone leaves it be
                await self._reset(client)
            raise StorageUnavailable(f"etcd watch: {err.details}") from err
        finally:
            self.open_watches[prefix] -= 1
            if not self.open_watches[prefix]:
                del self.open_watches[prefix]
