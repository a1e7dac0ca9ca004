"""kube's validation of Mutating- and ValidatingWebhookConfiguration (admissionregistration/validation, v1).

A configuration is refused when a webhook could never be called as written: a name that is not a
fully qualified domain (three dot-separated segments at least), names repeated in one
configuration, bad rules (the same checks as a policy's), an unknown failurePolicy, matchPolicy or
reinvocationPolicy, a sideEffects other than None or NoneOnDryRun (v1 allows no others), a
timeout outside 1..30 seconds, bad selectors, a clientConfig without exactly one of url and
service, an url that is not ``https://host[/path]`` without query, fragment or user, a service
without name or namespace, with a bad port or a path whose segments are not DNS subdomains,
admissionReviewVersions with no version kube speaks, and matchConditions that do not compile.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import orjson
from genericapi.apimachinery import errors
from genericapi.apimachinery.errors import FieldError
from genericapi.apimachinery.validation_meta import validate_dns1035_label, validate_dns1123_subdomain

from .admissionpolicy import FAILURE_POLICIES, MATCH_POLICIES, _match_conditions, _rule
from .selectors import validate_label_selector

SIDE_EFFECTS = ["None", "NoneOnDryRun"]
REINVOCATION_POLICIES = ["IfNeeded", "Never"]
REVIEW_VERSIONS = ["v1", "v1beta1"]
_URL_FORM = "; desired format: https://host[/path]"


def _fully_qualified(name: Any, path: str) -> list[FieldError]:
    """``IsFullyQualifiedName``."""
    if not name:
        return [errors.required(path)]
    text = str(name)
    problems = validate_dns1123_subdomain(text)
    if problems:
        return [errors.invalid(path, text, ",".join(problems))]
    if len(text.split(".")) < 3:
        return [errors.invalid(path, text, "should be a domain with at least three segments separated by dots")]
    return []


def _url(url: str, path: str) -> list[FieldError]:
    """``ValidateWebhookURL`` with https forced."""
    try:
        parts = urlsplit(url)
        host = parts.netloc.rpartition("@")[2]
    except ValueError as err:
        return [errors.required(path, f"url must be a valid URL: {err}{_URL_FORM}")]
    errs: list[FieldError] = []
    if parts.scheme != "https":
        errs.append(errors.invalid(path, parts.scheme, "'https' is the only allowed URL scheme" + _URL_FORM))
    if not host:
        errs.append(errors.invalid(path, host, "host must be specified" + _URL_FORM))
    if "@" in parts.netloc:
        user = parts.netloc.rpartition("@")[0]
        errs.append(errors.invalid(path, user, "user information is not permitted in the URL"))
    if parts.fragment:
        errs.append(errors.invalid(path, parts.fragment, "fragments are not permitted in the URL"))
    if parts.query:
        errs.append(errors.invalid(path, parts.query, "query parameters are not permitted in the URL"))
    return errs


def _service(service: dict[str, Any], path: str) -> list[FieldError]:
    """``ValidateWebhookService``."""
    errs: list[FieldError] = []
    if not service.get("name"):
        errs.append(errors.required(f"{path}.name", "service name is required"))
    if not service.get("namespace"):
        errs.append(errors.required(f"{path}.namespace", "service namespace is required"))
    port = service.get("port", 443)
    if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
        errs.append(errors.invalid(f"{path}.port", port, "port is not valid: must be between 1 and 65535, inclusive"))
    url_path = service.get("path")
    if url_path is None or url_path in ("", "/"):
        return errs
    url_path = str(url_path)
    if url_path == "//":
        return [*errs, errors.invalid(f"{path}.path", url_path, "segment[0] may not be empty")]
    if not url_path.startswith("/"):
        errs.append(errors.invalid(f"{path}.path", url_path, "must start with a '/'"))
    to_check = url_path[1:]
    if to_check.endswith("/"):
        to_check = to_check[:-1]
    for i, step in enumerate(to_check.split("/")):
        if not step:
            errs.append(errors.invalid(f"{path}.path", url_path, f"segment[{i}] may not be empty"))
            continue
        errs.extend(errors.invalid(f"{path}.path", url_path, f"segment[{i}]: {p}")
                    for p in validate_dns1123_subdomain(step))
    return errs


def _review_versions(versions: Any, path: str) -> list[FieldError]:
    """``validateAdmissionReviewVersions`` (a version kube speaks is required)."""
    listed = [str(v) for v in versions] if isinstance(versions, list) else []
    if not listed:
        return [errors.required(path, f"must specify one of {', '.join(REVIEW_VERSIONS)}")]
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, v in enumerate(listed):
        if v in seen:
            errs.append(errors.invalid(f"{path}[{i}]", v, "duplicate version"))
            continue
        seen.add(v)
        errs.extend(errors.invalid(f"{path}[{i}]", v, p) for p in validate_dns1035_label(v))
    if not any(v in REVIEW_VERSIONS for v in listed):
        shown = errors.GoRendered("[]string{" + ", ".join(orjson.dumps(v).decode() for v in listed) + "}")
        errs.append(errors.invalid(path, shown, f"must include at least one of {', '.join(REVIEW_VERSIONS)}"))
    return errs


def _webhook(hook: dict[str, Any], path: str, mutating: bool) -> list[FieldError]:
    errs = _fully_qualified(hook.get("name"), f"{path}.name")
    for i, rule in enumerate(hook.get("rules") or []):
        if isinstance(rule, dict):
            errs.extend(_rule(rule, f"{path}.rules[{i}]"))
    checks = [("failurePolicy", FAILURE_POLICIES), ("matchPolicy", MATCH_POLICIES)]
    if mutating:
        checks.append(("reinvocationPolicy", REINVOCATION_POLICIES))
    for key, supported in checks:
        value = hook.get(key)
        if value is not None and value not in supported:
            errs.append(errors.not_supported(f"{path}.{key}", value, supported))
    side_effects = hook.get("sideEffects")
    if side_effects is None:
        errs.append(errors.required(f"{path}.sideEffects", f"must specify one of {', '.join(SIDE_EFFECTS)}"))
    elif side_effects not in SIDE_EFFECTS:
        errs.append(errors.not_supported(f"{path}.sideEffects", side_effects, SIDE_EFFECTS))
    timeout = hook.get("timeoutSeconds")
    if timeout is not None and (not isinstance(timeout, int) or not 1 <= timeout <= 30):
        errs.append(errors.invalid(f"{path}.timeoutSeconds", timeout, "the timeout value must be between 1 and 30 "
                                                                       "seconds"))
    for key in ("namespaceSelector", "objectSelector"):
        if hook.get(key) is not None:
            errs.extend(validate_label_selector(hook.get(key), f"{path}.{key}"))
    client = hook.get("clientConfig") if isinstance(hook.get("clientConfig"), dict) else {}
    assert isinstance(client, dict)
    url, service = client.get("url"), client.get("service")
    if (url is None) == (service is None):
        errs.append(errors.required(f"{path}.clientConfig", "exactly one of url or service is required"))
    elif url is not None:
        errs.extend(_url(str(url), f"{path}.clientConfig.url"))
    elif isinstance(service, dict):
        errs.extend(_service(service, f"{path}.clientConfig.service"))
    conditions = hook.get("matchConditions")
    if isinstance(conditions, list):
        errs.extend(_match_conditions(conditions, False, f"{path}.matchConditions"))
    return errs


def _configuration(obj: dict[str, Any], mutating: bool) -> list[FieldError]:
    errs: list[FieldError] = []
    names: set[str] = set()
    for i, hook in enumerate(obj.get("webhooks") or []):
        if not isinstance(hook, dict):
            continue
        path = f"webhooks[{i}]"
        errs.extend(_webhook(hook, path, mutating))
        errs.extend(_review_versions(hook.get("admissionReviewVersions"), f"{path}.admissionReviewVersions"))
        name = hook.get("name")
        if name:
            if name in names:
                errs.append(errors.duplicate(f"{path}.name", name))
            names.add(name)
    return errs


def validate_validating_configuration(obj: dict[str, Any]) -> list[FieldError]:
    return _configuration(obj, mutating=False)


def validate_mutating_configuration(obj: dict[str, Any]) -> list[FieldError]:
    return _configuration(obj, mutating=True)
