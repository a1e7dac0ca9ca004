"""CronJob schedules: ``cron.ParseStandard`` of robfig/cron v3, with its error texts.

kube-apiserver puts the parser's error verbatim into ``spec.schedule: Invalid value``, so the
grammar (five fields, ranges, steps, month/weekday names, ``@`` descriptors) and each message
are reproduced; the parsed schedule itself is not needed.
"""

from __future__ import annotations

import re

_BOUNDS = (  # minute, hour, day of month, month, day of week: (min, max, names)
    (0, 59, None), (0, 23, None), (1, 31, None),
    (1, 12, {m: i + 1 for i, m in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"))}),
    (0, 6, {d: i for i, d in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}),
)
_DESCRIPTORS = frozenset({"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"})
_DURATION_RE = re.compile(r"[-+]?(([0-9]*(\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h))+|[-+]?0")
_INT_RE = re.compile(r"[+-]?[0-9]+")


def _atoi(text: str) -> int:
    if not _INT_RE.fullmatch(text):
        raise ValueError(f'failed to parse int from {text}: strconv.Atoi: parsing "{text}": invalid syntax')
    number = int(text)
    if not -(2**63) <= number < 2**63:
        raise ValueError(f'failed to parse int from {text}: strconv.Atoi: parsing "{text}": value out of range')
    if number < 0:
        raise ValueError(f"negative number ({number}) not allowed: {text}")
    return number


def _int_or_name(text: str, names: dict[str, int] | None) -> int:
    if names is not None and text.lower() in names:
        return names[text.lower()]
    return _atoi(text)


def _check_range(expr: str, low: int, high: int, names: dict[str, int] | None) -> None:
    range_and_step = expr.split("/")
    low_high = range_and_step[0].split("-")
    if low_high[0] in ("*", "?"):
        start, end = low, high
    else:
        start = _int_or_name(low_high[0], names)
        if len(low_high) == 1:
            end = start
        elif len(low_high) == 2:
            end = _int_or_name(low_high[1], names)
        else:
            raise ValueError(f"too many hyphens: {expr}")
    if len(range_and_step) == 1:
        step = 1
    elif len(range_and_step) == 2:
        step = _atoi(range_and_step[1])
        if len(low_high) == 1:
            end = high
    else:
        raise ValueError(f"too many slashes: {expr}")
    if start < low:
        raise ValueError(f"beginning of range ({start}) below minimum ({low}): {expr}")
    if end > high:
        raise ValueError(f"end of range ({end}) above maximum ({high}): {expr}")
    if start > end:
        raise ValueError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
    if step == 0:
        raise ValueError(f"step of range should be a positive number: {expr}")


def schedule_error(spec: str) -> str | None:
    """The parser's error for ``spec``, or None when it parses (TZ prefixes are checked elsewhere)."""
    if not spec:
        return "empty spec string"
    if spec.startswith(("TZ=", "CRON_TZ=")):
        space = spec.find(" ")
        if space < 0:
            return None  # kube reports the TZ use itself
        spec = spec[space:].strip()
    if spec.startswith("@"):
        if spec in _DESCRIPTORS:
            return None
        if spec.startswith("@every "):
            duration = spec[len("@every "):]
            if not _DURATION_RE.fullmatch(duration):
                return f'failed to parse duration {spec}: time: invalid duration "{duration}"'
            return None
        return f"unrecognized descriptor: {spec}"
    fields = spec.split()
    if len(fields) != 5:
        return f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]"
    try:
        for text, (low, high, names) in zip(fields, _BOUNDS, strict=True):
            for expr in (part for part in text.split(",") if part):
                _check_range(expr, low, high, names)
    except ValueError as err:
        return str(err)
    return None
