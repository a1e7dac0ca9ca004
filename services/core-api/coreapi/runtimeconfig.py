"""``--runtime-config``: which group-versions core-api serves, with kube-apiserver 1.33's rules.

Syntax (kube's ``cliflag.ConfigurationMap``): comma-separated ``key=value`` pairs, the flag
repeatable, a bare key meaning ``true``. Keys are ``api/all``, ``api/ga``, ``api/beta``,
``api/alpha`` (applied first, in that order; value exactly ``true`` or ``false``) and
``<group>/<version>`` (any Go ``ParseBool`` value), which win over them. Defaults are kube's:
stable versions on, beta and alpha off (``betaAPIGroupVersionsDisabledByDefault``). The start-up
errors are kube's words: a key that is not ``a/b`` or ``a/b/c``, a group no server of the chain
knows (``unknown api groups``), a version of a known group kubechain has no resources for
(``group version ... that has not been registered``), ``api/all=false`` alone. Only whole
group-versions can be switched here (kube's ``group/version/resource`` keys are refused).

The core group (``/api/v1``) is always served. Pure logic; ``server`` applies the result.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

GroupVersion = tuple[str, str]

API_ALL, API_GA, API_BETA, API_ALPHA = "api/all", "api/ga", "api/beta", "api/alpha"
_GA = re.compile(r"^v\d+$")
_BETA = re.compile(r"^v\d+beta\d+$")
_ALPHA = re.compile(r"^v\d+alpha\d+$")
_MATCHERS = {
    API_ALL: lambda v: True,
    API_GA: lambda v: bool(_GA.match(v)),
    API_BETA: lambda v: bool(_BETA.match(v)),
    API_ALPHA: lambda v: bool(_ALPHA.match(v)),
}
_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_FALSE = {"0", "f", "F", "FALSE", "false", "False"}


class RuntimeConfigError(ValueError):
    """A ``--runtime-config`` kube-apiserver would refuse to start with."""


def parse(values: Iterable[str]) -> dict[str, str]:
    """The flag's values (it may repeat) as one map; later keys win, as in kube."""
    out: dict[str, str] = {}
    for value in values:
        for pair in value.split(","):
            if not pair.strip():
                continue
            key, _eq, val = pair.partition("=")
            out[key.strip()] = val.strip()
    return out


def default_enabled(version: str) -> bool:
    """kube 1.33's default: GA served, beta and alpha not."""
    return bool(_GA.match(version))


def _parse_bool(key: str, value: str) -> bool:
    if value == "":
        return True
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise RuntimeConfigError(f'invalid value of {key}: {value}, err: strconv.ParseBool: parsing "{value}": '
                             "invalid syntax")


def _group_version(key: str) -> GroupVersion:
    tokens = key.split("/")
    if len(tokens) not in (2, 3) or not tokens[1] or "" in tokens[:2]:
        raise RuntimeConfigError(f"runtime-config invalid key {key}")
    return tokens[0], tokens[1]


def enabled_versions(overrides: dict[str, str], available: Iterable[GroupVersion],
                     known_groups: Iterable[str] = ()) -> set[GroupVersion]:
    """The named group-versions to serve out of ``available`` (those kubechain has resources for).

    ``known_groups``: groups other links of the chain serve (``apiextensions.k8s.io``,
    ``apiregistration.k8s.io``): accepted and left to them, as kube's ``MergeAPIResourceConfigs``
    skips groups it does not register.
    """
    available = [gv for gv in available if gv[0]]
    if overrides.get(API_ALL) == "false" and len(overrides) == 1:
        raise RuntimeConfigError(f"invalid key with only {API_ALL}=false")
    ours = {g for g, _v in available}
    others = set(known_groups) - ours
    unknown: list[str] = []
    for key in overrides:
        if key in _MATCHERS:
            continue
        group, _version = _group_version(key)
        if group not in ours and group not in others and group not in unknown:
            unknown.append(group)
    if unknown:
        raise RuntimeConfigError(f"unknown api groups {','.join(unknown)}")
    enabled = {gv: default_enabled(gv[1]) for gv in available}
    for key in (API_ALL, API_GA, API_BETA, API_ALPHA):
        if key not in overrides:
            continue
        value = overrides[key]
        if value not in ("true", "false"):
            raise RuntimeConfigError(f"invalid value {key}={value}")
        for gv in enabled:
            if _MATCHERS[key](gv[1]):
                enabled[gv] = value == "true"
    for key, value in overrides.items():
        if key in _MATCHERS:
            continue
        gv = _group_version(key)
        if gv[0] not in ours:
            continue  # another link's group
        if gv not in enabled:
            raise RuntimeConfigError(f"group version {gv[0]}/{gv[1]} that has not been registered")
        if len(key.split("/")) == 3:
            raise RuntimeConfigError(f"invalid key {key}: kubechain enables whole group-versions only")
        enabled[gv] = _parse_bool(key, value)
    return {gv for gv, on in enabled.items() if on}
