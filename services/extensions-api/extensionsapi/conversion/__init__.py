"""Custom resource conversion between a CRD's versions: strategy ``None`` and ``Webhook``."""

from .converter import CRConverter
from .webhook import DEFAULT_TIMEOUT

__all__ = ["DEFAULT_TIMEOUT", "CRConverter"]
