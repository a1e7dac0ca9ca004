"""String-format checks of ``k8s.io/apimachinery/pkg/util/validation`` used by the kind validators.

Port names, environment variable names, config keys and percentages each have their own
wording; these return Go's messages (a list, empty when valid) for callers to wrap in field errors.
"""

from __future__ import annotations

import re
from typing import Any

from genericapi.apimachinery.validation_meta import max_len_error, regex_error

_PORT_NAME_CHARSET = re.compile(r"[-a-z0-9]+")
_PORT_NAME_LETTER = re.compile(r"[a-z]")
_CONFIG_KEY_FMT = "[-._a-zA-Z0-9]+"
_CONFIG_KEY_RE = re.compile(_CONFIG_KEY_FMT)
_PERCENT_FMT = "[0-9]+%"
_PERCENT_RE = re.compile(_PERCENT_FMT)
_C_IDENTIFIER_FMT = "[A-Za-z_][A-Za-z0-9_]*"
_C_IDENTIFIER_RE = re.compile(_C_IDENTIFIER_FMT)


def inclusive_range_error(low: int, high: int) -> str:
    return f"must be between {low} and {high}, inclusive"


def port_num_errors(port: int) -> list[str]:
    """``IsValidPortNum``."""
    return [] if 1 <= port <= 65535 else [inclusive_range_error(1, 65535)]


def port_name_errors(name: str) -> list[str]:
    """``IsValidPortName`` (an IANA_SVC_NAME)."""
    errs: list[str] = []
    if len(name) > 15:
        errs.append(max_len_error(15))
    if not _PORT_NAME_CHARSET.fullmatch(name):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not _PORT_NAME_LETTER.search(name):
        errs.append("must contain at least one letter (a-z)")
    if "--" in name:
        errs.append("must not contain consecutive hyphens")
    if name and (name[0] == "-" or name[-1] == "-"):
        errs.append("must not begin or end with a hyphen")
    return errs


def _chdir_prefix_errors(value: str) -> list[str]:
    if value == ".":
        return ["must not be '.'"]
    if value == "..":
        return ["must not be '..'"]
    if value.startswith(".."):
        return ["must not start with '..'"]
    return []


def relaxed_env_var_name_errors(name: str) -> list[str]:
    """``IsRelaxedEnvVarName`` (RelaxedEnvironmentVariableValidation is on by default in 1.33)."""
    errs: list[str] = []
    if not name:
        errs.append("environment variable name must be non-empty")
    if any(ord(ch) > 127 or not ch.isprintable() or ch == "=" for ch in name):
        errs.append("a valid environment variable name must consist only of printable ASCII characters "
                    "other than '='")
    return errs


def is_config_key(key: Any) -> bool:
    """Whether ``config_key_errors`` finds nothing (the usual key: one regular-expression match)."""
    return (type(key) is str and len(key) <= 253 and _CONFIG_KEY_RE.fullmatch(key) is not None
            and not key.startswith("..") and key != ".")


def config_key_errors(key: str) -> list[str]:
    """``IsConfigMapKey``: keys of ConfigMap/Secret data and key selectors."""
    errs: list[str] = []
    if len(key) > 253:
        errs.append(max_len_error(253))
    if not _CONFIG_KEY_RE.fullmatch(key):
        errs.append(regex_error("a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
                                _CONFIG_KEY_FMT, "key.name", "KEY_NAME", "key-name"))
    errs.extend(_chdir_prefix_errors(key))
    return errs


def percent_errors(value: str) -> list[str]:
    """``IsValidPercent``."""
    if _PERCENT_RE.fullmatch(value):
        return []
    return [regex_error("a valid percent string must be a numeric string followed by an ending '%'",
                        _PERCENT_FMT, "1%", "93%")]


def c_identifier_errors(value: str) -> list[str]:
    """``IsCIdentifier``."""
    if _C_IDENTIFIER_RE.fullmatch(value):
        return []
    return [regex_error("a valid C identifier must start with alphabetic character or '_', followed by "
                        "a string of alphanumeric characters or '_'", _C_IDENTIFIER_FMT, "my_name", "MY_NAME",
                        "MyName")]
