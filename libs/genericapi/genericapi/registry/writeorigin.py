"""Where an update, patch or delete starts: the watch cache's copy of the object, or etcd's.

kube 1.33's Cacher hands ``GuaranteedUpdate`` (and ``Delete``) the watch cache's copy of the object
(``cachedExistingObject``), so a write is one etcd round trip: the Txn comparing the key's mod
revision. The copy may be stale, so etcd3's store keeps ``origStateIsCurrent``: a result computed on
a copy that is not known current and that would be an answer without a write (a failed precondition,
a validation or admission error, a conflict, "nothing changed") is decided again on the current
state (``getCurrentState``: one read). A failed Txn's else branch read the key: that is the current
state, and the retry starts from it with no read of its own.

``WriteOrigin`` is that state (kube's ``objState``): the object as the store serves it, the key and
mod revision the Txn compares, whether it is current, and how to make a private copy to change.
A store that converts what it reads (``Store._served``: a custom resource behind a conversion
webhook) starts from the cached copy converted the same way, so a write from the cache and one
from a read see the same object.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from genericapi.storage.cacher import CachedObject
from genericapi.storage.etcd import KeyValue


@dataclass(slots=True)
class WriteOrigin:
    """The stored object a write starts from (kube's ``objState``)."""

    #: The object as read (resourceVersion set); a write changes a ``private_copy``, never this.
    obj: dict[str, Any]
    #: The key and mod revision the Txn compares, and whether the value was stored with an
    #: encryption key other than the one that writes now (``stale``: unknown, False, for a cached copy).
    kv: KeyValue
    #: Read from etcd in this request, or what a failed Txn read (kube's ``origStateIsCurrent``).
    current: bool
    #: The watch cache's entry it came from, if it did.
    cached: CachedObject | None = None

    @property
    def revision(self) -> int:
        return self.kv.mod_revision

    @classmethod
    def from_cache(cls, cached: CachedObject, served: dict[str, Any] | None = None) -> WriteOrigin:
        """The cache's copy: its JSON decoded (the store's served object, resourceVersion set), or
        ``served``, what the store made of it (a custom resource converted through its webhook), and
        its revision; the stored bytes are not kept by the cache and not needed (a write encodes anew)."""
        obj = cached.decode() if served is None else served
        return cls(obj, KeyValue(cached.key, b"", 0, cached.revision), False, cached)
