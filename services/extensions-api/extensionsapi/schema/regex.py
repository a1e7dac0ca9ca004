"""Go RE2 patterns (the ``pattern`` keyword of CRD schemas) compiled with Python's ``re``.

kube-openapi compiles ``pattern`` with Go's ``regexp`` (RE2 syntax) and matches it unanchored.
Most patterns mean the same in both; the differences that occur in real CRDs are translated:
``\\z`` (end of text), POSIX classes such as ``[[:alpha:]]`` and the Unicode classes ``\\pL``,
``\\p{L}``, ``\\pN``/``\\p{N}``, ``\\p{Lu}``, ``\\p{Ll}``. Python's ``re`` rejects what RE2 rejects in
the usual cases (lookarounds and backreferences are accepted by ``re`` but not RE2: those are
reported as invalid, as apiextensions does when the CRD is written).
"""

from __future__ import annotations

import functools
import re

_POSIX = {
    "alnum": "0-9A-Za-z", "alpha": "A-Za-z", "ascii": "\\x00-\\x7F", "blank": "\\t ", "cntrl": "\\x00-\\x1F\\x7F",
    "digit": "0-9", "graph": "!-~", "lower": "a-z", "print": " -~", "punct": "!-/:-@\\[-`{-~",
    "space": "\\t\\n\\v\\f\\r ", "upper": "A-Z", "word": "0-9A-Za-z_", "xdigit": "0-9A-Fa-f",
}
_UNICODE = {"L": "^\\W\\d_", "N": "\\d", "Lu": "A-Z", "Ll": "a-z", "Nd": "\\d"}
_RE2_UNSUPPORTED = re.compile(r"\(\?(?:=|!|<=|<!)|\\[1-9]")


class PatternError(ValueError):
    """The pattern is not a valid RE2 expression."""


def _translate(pattern: str) -> str:
    out: list[str] = []
    i = 0
    in_class = False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            if nxt == "z":
                out.append("\\Z")
                i += 2
                continue
            if nxt in "pP":
                negate = nxt == "P"
                if i + 2 < len(pattern) and pattern[i + 2] == "{":
                    end = pattern.find("}", i + 3)
                    name = pattern[i + 3:end] if end > 0 else ""
                    step = end + 1 - i if end > 0 else 2
                else:
                    name = pattern[i + 2:i + 3]
                    step = 3
                cls = _UNICODE.get(name)
                if cls is None:
                    raise PatternError(f"invalid character class range: \\p{{{name}}}")
                if in_class:
                    out.append(cls.lstrip("^") if not cls.startswith("^") else "a-zA-Z")
                else:
                    inner = cls[1:] if cls.startswith("^") else cls
                    positive = not cls.startswith("^")
                    out.append(f"[{'' if positive != negate else '^'}{inner}]")
                i += step
                continue
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if in_class and pattern.startswith("[:", i):
            end = pattern.find(":]", i + 2)
            name = pattern[i + 2:end] if end > 0 else ""
            if name in _POSIX:
                out.append(_POSIX[name])
                i = end + 2
                continue
        if ch == "[" and not in_class:
            in_class = True
            out.append(ch)
            i += 1
            if i < len(pattern) and pattern[i] == "^":
                out.append("^")
                i += 1
            if i < len(pattern) and pattern[i] == "]":
                out.append("\\]")
                i += 1
            continue
        if ch == "]" and in_class:
            in_class = False
        out.append(ch)
        i += 1
    return "".join(out)


@functools.lru_cache(maxsize=1024)
def compile_pattern(pattern: str) -> re.Pattern[str]:
    """Compile an RE2 pattern; raises :class:`PatternError` with a message when it is invalid."""
    if _RE2_UNSUPPORTED.search(pattern):
        raise PatternError(f"error parsing regexp: invalid or unsupported Perl syntax: `{pattern}`")
    try:
        return re.compile(_translate(pattern))
    except re.error as exc:
        raise PatternError(f"error parsing regexp: {exc}") from exc
