"""``autoscaling`` HorizontalPodAutoscalers: one stored resource served as v2 and v1, defaulted
per served version (v1's flat ``minReplicas``; v2's scaling behavior), as kube's generated
defaulters of each version do."""

from __future__ import annotations

from typing import Any

from coreapi.defaults import groups as defaults

from .base import BuiltinStrategy


class HorizontalPodAutoscalerStrategy(BuiltinStrategy):
    def set_defaults(self, obj: dict[str, Any]) -> None:
        if self.info.version == "v1":
            defaults.hpa_v1(obj)
        elif self.info.version == "v2":
            defaults.hpa_v2(obj)
