"""headcheck.clean against the regular expression it replaced, on heads built to be hard: random
mixes of text, CR, LF, CRLF and every control character."""

from __future__ import annotations

import random
import re

from genericapi.server.headcheck import clean

#: What the lean exchange used before (uvicorn's two checks in one expression).
_BAD_HEAD = re.compile(b"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|\r(?!\n)|(?<!\r)\n")
PIECES = [b"a", b"content-type: application/json", b"\r\n", b"\r", b"\n", b"\t", b" ", b"\xff", b"\x80",
          *(bytes([c]) for c in range(0x20)), b"\x7f", b"\r\n\r\n", b"\n\r"]


def test_clean_agrees_with_the_regular_expression_on_random_heads() -> None:
    rng = random.Random(15)
    for _ in range(20000):
        head = b"".join(rng.choice(PIECES) for _ in range(rng.randrange(0, 12)))
        assert clean(head) == (_BAD_HEAD.search(head) is None), head


def test_ordinary_heads_are_clean_and_injections_are_not() -> None:
    assert clean(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\naudit-id: x\r\n\r\n")
    assert clean(b"")
    assert not clean(b"x-a: b\r\nx-b: c\rinjected\r\n")
    assert not clean(b"x-a: b\nset-cookie: c\r\n")
    assert not clean(b"x-a: \x00\r\n")
