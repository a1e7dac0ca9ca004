"""Storage errors: what can go wrong with keys and revisions, in storage's own words.

The registry translates these into API errors (``genericapi.apimachinery.errors``) in one
place; nothing here knows about HTTP status codes or ``metav1.Status``.
"""

from __future__ import annotations

from typing import Any


class StorageError(Exception):
    """Base of every storage failure."""


class KeyExistsError(StorageError):
    def __init__(self, key: str) -> None:
        super().__init__(f"key exists: {key}")
        self.key = key


class KeyNotFoundError(StorageError):
    def __init__(self, key: str) -> None:
        super().__init__(f"key not found: {key}")
        self.key = key


class RevisionConflictError(StorageError):
    """The key's mod revision is not the one the caller expected. ``current``, when the store read
    it in the same transaction, is the key as it is now (the etcd client's ``KeyValue``): a retry
    can start from it instead of reading the key again (kube's GuaranteedUpdate does so)."""

    def __init__(self, key: str, expected: int, actual: int, current: Any = None) -> None:
        super().__init__(f"revision conflict on {key}: expected {expected}, actual {actual}")
        self.key = key
        self.expected = expected
        self.actual = actual
        self.current = current


class TooOldRevisionError(StorageError):
    """A revision that was compacted, or is older than a watch cache window."""

    def __init__(self, requested: int, oldest: int) -> None:
        super().__init__(f"too old resource version: {requested} ({oldest})")
        self.requested = requested
        self.oldest = oldest


class FutureRevisionRefusedError(TooOldRevisionError):
    """etcd refused a read at a revision it has not reached (its ErrFutureRev). etcd answers it
    with the gRPC code of a compacted revision (OUT_OF_RANGE), and code that only needs to know the
    revision cannot be read (the watch cache's freshness probe, which keeps waiting) catches both as
    ``TooOldRevisionError``; kube-apiserver 1.33's etcd3 store passes it on unclassified (a TODO in
    its storage tests), so a LIST read from etcd at a future revision is its 500 with etcd's text."""

    MESSAGE = "etcdserver: mvcc: required revision is a future revision"

    def __init__(self, requested: int) -> None:
        super().__init__(requested, 0)
        self.args = (self.MESSAGE,)


class FutureRevisionError(StorageError):
    """A revision newer than anything the store has seen within the wait budget."""

    def __init__(self, requested: int, current: int) -> None:
        super().__init__(f"Too large resource version: {requested}, current: {current}")
        self.requested = requested
        self.current = current


class UnavailableError(StorageError):
    """etcd cannot be reached or answered with an error."""


class SentCallError(UnavailableError):
    """etcd got the call and it failed: etcd answered an error status, or a write timed out or lost its
    connection after it was sent (whether etcd applied it is unknown). ``code`` and ``details`` are the
    call's gRPC status, which kube's answer for such a write carries (registry/translate.py)."""

    def __init__(self, message: str, code: int, details: str) -> None:
        super().__init__(message)
        self.code = code
        self.details = details


#: grpc-go's names of the status codes (``codes.Code.String()``): how a Go client's error names them.
GRPC_CODE_NAMES: dict[int, str] = {
    1: "Canceled", 2: "Unknown", 3: "InvalidArgument", 4: "DeadlineExceeded", 5: "NotFound", 6: "AlreadyExists",
    7: "PermissionDenied", 8: "ResourceExhausted", 9: "FailedPrecondition", 10: "Aborted", 11: "OutOfRange",
    12: "Unimplemented", 13: "Internal", 14: "Unavailable", 15: "DataLoss", 16: "Unauthenticated"}
#: The gRPC status a call whose deadline passed ends with.
GRPC_DEADLINE_EXCEEDED = 4


def sent_call_status(err: StorageError) -> tuple[int, str] | None:
    """The gRPC status (code, details) of the call behind ``err`` when etcd got that call and it then
    failed (``SentCallError``); None otherwise (etcd unreachable: the call never went out, or went
    out again elsewhere)."""
    if isinstance(err, SentCallError):
        return err.code, err.details
    return None
