"""core-api's authorizer: the shared ``genericapi.apimachinery.authorization`` types, re-exported
for the access reviews (``accessreviews.py``), which ask whichever authorizer the server runs."""

from __future__ import annotations

from genericapi.apimachinery.authorization import (
    AlwaysAllow,
    Attributes,
    Authorizer,
    Decision,
    NonResourceRule,
    ResourceRule,
    Rules,
)

__all__ = ["AlwaysAllow", "Attributes", "Authorizer", "Decision", "NonResourceRule", "ResourceRule", "Rules"]
