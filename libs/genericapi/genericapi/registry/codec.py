"""How objects are stored: the served JSON without ``resourceVersion`` (etcd's revision is it).

The stored value never carries its own revision; reading sets ``metadata.resourceVersion`` to
the key's ``mod_revision``, as kube-apiserver's storage layer does.
"""

from __future__ import annotations

from typing import Any

import orjson


class JsonCodec:
    """Encode objects for etcd and decode them with the revision they were read at."""

    def encode(self, obj: dict[str, Any]) -> bytes:
        meta = obj.get("metadata")
        if isinstance(meta, dict) and "resourceVersion" in meta:
            meta = {k: v for k, v in meta.items() if k != "resourceVersion"}
            obj = {**obj, "metadata": meta}
        return orjson.dumps(obj)

    def decode(self, value: bytes, revision: int) -> tuple[dict[str, Any], bytes]:
        obj = orjson.loads(value)
        if revision:
            meta = obj.setdefault("metadata", {})
            meta["resourceVersion"] = str(revision)
        return obj, orjson.dumps(obj)
