"""``admissionregistration.k8s.io/v1``: webhook configurations and ValidatingAdmissionPolicies
(with bindings) track generation and carry kube's defaults and validation. None of them takes an
unconditional update (kube's strategies answer false to AllowUnconditionalUpdate): a PUT must name the
resourceVersion it replaces."""

from __future__ import annotations

from typing import Any

from genericapi.apimachinery.errors import FieldError

from coreapi.defaults import groups as defaults
from coreapi.validation import admissionpolicy, webhooks

from .base import BuiltinStrategy


class MutatingWebhookConfigurationStrategy(BuiltinStrategy):
    tracks_generation = True
    allow_unconditional_update = False

    def set_defaults(self, obj: dict[str, Any]) -> None:
        defaults.mutating_webhook_configuration(obj)

    def validate_kind(self, obj: dict[str, Any]) -> list[FieldError]:
        return webhooks.validate_mutating_configuration(obj)


class ValidatingWebhookConfigurationStrategy(BuiltinStrategy):
    tracks_generation = True
    allow_unconditional_update = False

    def set_defaults(self, obj: dict[str, Any]) -> None:
        defaults.validating_webhook_configuration(obj)

    def validate_kind(self, obj: dict[str, Any]) -> list[FieldError]:
        return webhooks.validate_validating_configuration(obj)


class ValidatingAdmissionPolicyStrategy(BuiltinStrategy):
    tracks_generation = True
    allow_unconditional_update = False

    def set_defaults(self, obj: dict[str, Any]) -> None:
        defaults.validating_admission_policy(obj)

    def validate_kind(self, obj: dict[str, Any]) -> list[FieldError]:
        return admissionpolicy.validate_policy(obj)


class ValidatingAdmissionPolicyBindingStrategy(BuiltinStrategy):
    tracks_generation = True
    allow_unconditional_update = False

    def set_defaults(self, obj: dict[str, Any]) -> None:
        defaults.validating_admission_policy_binding(obj)

    def validate_kind(self, obj: dict[str, Any]) -> list[FieldError]:
        return admissionpolicy.validate_binding(obj)
