"""UUIDs (object UIDs, Audit-IDs) come from a pool of kernel random bytes: every one is a version 4,
RFC 4122 variant UUID in kube's text form, none repeats across many pool refills, and a forked child
never hands out the parent's next UUIDs (the fork server forks every service)."""

from __future__ import annotations

import os
import re
import uuid

from genericapi.apimachinery import uuids
from genericapi.registry import meta

_FORM = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def test_uids_are_v4_and_unique_across_refills() -> None:
    uids = [(meta.new_uid, uuids.new_uuid4)[i % 2]() for i in range(uuids._BLOCK // 16 * 5 + 7)]
    assert len(set(uids)) == len(uids)
    for u in uids:
        assert _FORM.match(u), u
        parsed = uuid.UUID(u)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122 and str(parsed) == u


def test_a_forked_child_does_not_repeat_the_parents_uids() -> None:
    meta.new_uid()  # the pool is filled in the parent
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its first UIDs, to the parent
        try:
            os.write(write_end, ",".join(meta.new_uid() for _ in range(4)).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    child = os.read(read_end, 4096).decode().split(",")
    os.close(read_end)
    os.waitpid(pid, 0)
    parent = [meta.new_uid() for _ in range(4)]
    assert len(child) == 4 and not set(child) & set(parent)
