"""Go ``encoding/json`` syntax-error wording for a body that failed to parse.

Clients and tests match kube-apiserver's decode errors, which embed Go's scanner messages
(``invalid character 'x' looking for beginning of value``). orjson tells us *that* a body is
malformed; this small scanner, run only on that error path, tells us what Go would have said.
"""

from __future__ import annotations

from genericapi.apimachinery.gofmt import go_quote_byte


class _Syntax(Exception):
    pass


class _Scanner:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def fail(self, context: str) -> None:
        if self.pos >= len(self.data):
            raise _Syntax("unexpected end of JSON input")
        raise _Syntax(f"invalid character {go_quote_byte(self.data[self.pos])} {context}")

    def peek(self) -> int:
        return self.data[self.pos] if self.pos < len(self.data) else -1

    def skip_space(self) -> None:
        while self.pos < len(self.data) and self.data[self.pos] in b" \t\r\n":
            self.pos += 1

    def value(self) -> None:
        self.skip_space()
        c = self.peek()
        if c == ord("{"):
            self.obj()
        elif c == ord("["):
            self.array()
        elif c == ord('"'):
            self.string()
        elif c == ord("-") or ord("0") <= c <= ord("9"):
            self.number()
        elif c in (ord("t"), ord("f"), ord("n")):
            self.literal()
        else:
            self.fail("looking for beginning of value")

    def obj(self) -> None:
        self.pos += 1
        self.skip_space()
        if self.peek() == ord("}"):
            self.pos += 1
            return
        while True:
            self.skip_space()
            if self.peek() != ord('"'):
                self.fail("looking for beginning of object key string")
            self.string()
            self.skip_space()
            if self.peek() != ord(":"):
                self.fail("after object key")
            self.pos += 1
            self.value()
            self.skip_space()
            c = self.peek()
            if c == ord(","):
                self.pos += 1
                continue
            if c == ord("}"):
                self.pos += 1
                return
            self.fail("after object key:value pair")

    def array(self) -> None:
        self.pos += 1
        self.skip_space()
        if self.peek() == ord("]"):
            self.pos += 1
            return
        while True:
            self.value()
            self.skip_space()
            c = self.peek()
            if c == ord(","):
                self.pos += 1
                continue
            if c == ord("]"):
                self.pos += 1
                return
            self.fail("after array element")

    def string(self) -> None:
        self.pos += 1
        while True:
            c = self.peek()
            if c == -1:
                self.fail("")
            if c == ord('"'):
                self.pos += 1
                return
            if c < 0x20:
                self.fail("in string literal")
            if c == ord("\\"):
                self.pos += 1
                e = self.peek()
                if e == ord("u"):
                    self.pos += 1
                    for _ in range(4):
                        h = self.peek()
                        if h == -1 or chr(h) not in "0123456789abcdefABCDEF":
                            self.fail("in \\u hexadecimal character escape")
                        self.pos += 1
                    continue
                if e == -1 or chr(e) not in '"\\/bfnrt':
                    self.fail("in string escape code")
            self.pos += 1

    def digits(self) -> int:
        start = self.pos
        while ord("0") <= self.peek() <= ord("9"):
            self.pos += 1
        return self.pos - start

    def number(self) -> None:
        if self.peek() == ord("-"):
            self.pos += 1
            if not ord("0") <= self.peek() <= ord("9"):
                self.fail("in numeric literal")
        if self.peek() == ord("0"):
            self.pos += 1
        else:
            self.digits()
        if self.peek() == ord("."):
            self.pos += 1
            if not self.digits():
                self.fail("after decimal point in numeric literal")
        if self.peek() in (ord("e"), ord("E")):
            self.pos += 1
            if self.peek() in (ord("+"), ord("-")):
                self.pos += 1
            if not self.digits():
                self.fail("in exponent of numeric literal")

    def literal(self) -> None:
        word = {ord("t"): b"true", ord("f"): b"false", ord("n"): b"null"}[self.peek()]
        for expected in word:
            if self.peek() != expected:
                self.fail(f"in literal {word.decode()} (expecting {go_quote_byte(expected)})")
            self.pos += 1


def go_syntax_error(data: bytes) -> str | None:
    """The message Go's ``json.Unmarshal`` gives for ``data``, or None if it is valid JSON."""
    scanner = _Scanner(data)
    try:
        scanner.value()
        scanner.skip_space()
        if scanner.pos < len(data):
            scanner.fail("after top-level value")
    except _Syntax as err:
        return str(err)
    return None
