"""One strategy class per built-in kind: where a kind's defaulting, validation, printing and field
selectors live.

kube-apiserver gives every resource a ``rest.Store`` with a strategy of its kind; kubechain does the
same: each catalog row (``catalog_core``, ``catalog_groups``) names its class from here, and the
generic store runs it. A class carries its kind's rules as overrides and class attributes of
``BuiltinStrategy`` (``set_defaults``, ``zero_status``, ``validate_kind``/``validate_kind_update``,
``default_name_validator``, ``tracks_generation``, ``returns_deleted_object``, ``field_support``,
``table_printer``), so nothing about a kind is looked up in a table keyed by its name. One module
per API group (``core``, ``apps``, ``batch``, ...); kinds with nothing of their own use
``BuiltinStrategy`` itself. The kinds' Table printers (``printers_core``, ``printers_apps``,
``printers_certificates``: kube's ``pkg/printers/internalversion``) and field selectors
(``fieldsets``) live beside them; the shared library keeps only the machinery they plug into.
"""

from __future__ import annotations

from .base import BuiltinStrategy

__all__ = ["BuiltinStrategy"]
