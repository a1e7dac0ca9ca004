"""kube-apiserver's ``--tracing-config-file``: a ``TracingConfiguration`` of
``apiserver.config.k8s.io`` (v1alpha1 or v1beta1 in 1.33), read and validated as kube reads it.

The file is YAML or JSON, decoded strictly (an unknown field is an error); ``endpoint`` defaults to
the OTLP gRPC default ``localhost:4317`` and an unset ``samplingRatePerMillion`` samples nothing of
its own (only requests whose parent was sampled are traced). Errors use kube's wording, so an
operator who moves a file from kube-apiserver reads the same complaint.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import yaml

GROUP = "apiserver.config.k8s.io"
VERSIONS = ("v1alpha1", "v1beta1")
KIND = "TracingConfiguration"
DEFAULT_ENDPOINT = "localhost:4317"
MAX_SAMPLING_RATE_PER_MILLION = 1_000_000


class TracingConfigError(ValueError):
    """A file kube-apiserver would refuse at start, with kube's message."""


@dataclass(frozen=True)
class TracingConfig:
    endpoint: str | None = None
    sampling_rate_per_million: int | None = None

    @property
    def collector(self) -> str:
        """The OTLP gRPC target spans are exported to."""
        return self.endpoint if self.endpoint is not None else DEFAULT_ENDPOINT

    @property
    def sampling_ratio(self) -> float:
        """The share of new traces sampled (0: only those whose parent was sampled)."""
        rate = self.sampling_rate_per_million or 0
        return rate / MAX_SAMPLING_RATE_PER_MILLION if rate > 0 else 0.0


def load(path: str) -> TracingConfig:
    """Read and validate the file (kube's ReadTracingConfiguration + ValidateTracingConfiguration)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as err:
        raise TracingConfigError(f"tracing-config-file {path} does not exist") from err
    try:
        return parse(data)
    except TracingConfigError as err:
        raise TracingConfigError(f"failed to read tracing config: {err}") from None


def parse(data: bytes) -> TracingConfig:
    try:
        doc = yaml.safe_load(data)
    except yaml.YAMLError as err:
        raise TracingConfigError(f"unable to decode tracing configuration data: {err}") from None
    if not isinstance(doc, dict):
        raise TracingConfigError("unable to decode tracing configuration data: Object 'Kind' is missing")
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    if not kind:
        raise TracingConfigError(f"unable to decode tracing configuration data: Object 'Kind' is missing in "
                                 f"'{_short(data)}'")
    group, _, version = str(api_version or "").rpartition("/")
    if group != GROUP or version not in VERSIONS or kind != KIND:
        raise TracingConfigError(f"unable to decode tracing configuration data: no kind \"{kind}\" is registered "
                                 f"for version \"{api_version}\" in scheme")
    unknown = sorted(set(doc) - {"apiVersion", "kind", "endpoint", "samplingRatePerMillion"})
    if unknown:
        raise TracingConfigError("unable to decode tracing configuration data: strict decoding error: "
                                 + ", ".join(f'unknown field "{name}"' for name in unknown))
    endpoint = _typed(doc, "endpoint", str)
    rate = _typed(doc, "samplingRatePerMillion", int)
    config = TracingConfig(endpoint, rate)
    errors = validate(config)
    if errors:
        joined = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
        raise TracingConfigError(f"failed to validate tracing configuration: {joined}")
    return config


def validate(config: TracingConfig) -> list[str]:
    """kube's ValidateTracingConfiguration: field errors in ``field.Error`` wording."""
    errors: list[str] = []
    rate = config.sampling_rate_per_million
    if rate is not None:
        if rate < 0:
            errors.append(f"samplingRatePerMillion: Invalid value: {rate}: sampling rate must be positive")
        if rate > MAX_SAMPLING_RATE_PER_MILLION:
            errors.append(f"samplingRatePerMillion: Invalid value: {rate}: sampling rate per million must be less "
                          "than or equal to one million")
    if config.endpoint is not None:
        endpoint = config.endpoint if "//" in config.endpoint else "dns://" + config.endpoint
        scheme = urlparse(endpoint).scheme
        if scheme not in ("dns", "unix", "unix-abstract"):
            errors.append(f'endpoint: Invalid value: "{endpoint}": unsupported scheme: {scheme}.  Options are '
                          "none, dns, unix, or unix-abstract.  See "
                          "https://github.com/grpc/grpc/blob/master/doc/naming.md")
    return errors


def _typed(doc: dict[str, Any], name: str, kind: type) -> Any:
    value = doc.get(name)
    if value is None:
        return None
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise TracingConfigError(f"unable to decode tracing configuration data: json: cannot unmarshal "
                                 f"{_json_type(value)} into Go struct field TracingConfiguration.{name} of type int32")
    if kind is int and not -2**31 <= value < 2**31:
        raise TracingConfigError(f"unable to decode tracing configuration data: json: cannot unmarshal number "
                                 f"{value} into Go struct field TracingConfiguration.{name} of type int32")
    if kind is str and not isinstance(value, str):
        raise TracingConfigError(f"unable to decode tracing configuration data: json: cannot unmarshal "
                                 f"{_json_type(value)} into Go struct field TracingConfiguration.{name} of type string")
    return value


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _short(data: bytes) -> str:
    return data.decode("utf-8", "replace").strip()
