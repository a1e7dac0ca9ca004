"""CEL validation rules (``x-kubernetes-validations``) for custom resources, as apiextensions-apiserver runs them.

``compile_schema`` is called when a CRD is written (bad rules are rejected then, with kube's
paths and messages) and when a CRD is served; ``CELValidator.validate`` runs on every create and
update of a custom resource.

Interpreter choice, measured with ``bench/cel_choice.py`` (one run on the 2-core dev machine,
microseconds per call, compile / eval):

=========================== ================= ==========================
rule                         cel-python        common-expression-language
=========================== ================= ==========================
``self.replicas <= ...``     157 / 268         13 / 48
``all()`` over 10 items      324 / 2196        30 / 56
``self.items.size() <= 10``  162 / 302         14 / 50
regex (DNS label)            164 / 329         16 / 75
=========================== ================= ==========================

Semantics against cel-go on 33 expressions: cel-python 26/33 (no heterogeneous equality:
``dyn(1) == 1.0`` errors; lets ``1u + 1`` and ``2.0 * 3`` through; no 3-argument ``map``),
common-expression-language 31/33 (``size()`` of a non-ASCII string counts bytes; neither has the
``.?`` optional syntax). Custom functions register on both. Parse errors: only
common-expression-language reports cel-go's exact texts (``ERROR: <input>:1:16: Syntax error:
mismatched input '<EOF>' expecting ...``), which kube returns verbatim. Neither type-checks nor
estimates cost, so: undeclared names and undefined fields are found by ``checks`` against the
schema; overload/result-type errors surface at run time; kube's cost limits are NOT enforced.
Chosen: common-expression-language (10x faster compile, 5-40x faster evaluation, cel-go errors).
Through this package, a 12-rule object validates in ~200 us (~17 us per rule evaluation).

Rules under ``allOf``/``anyOf``/``oneOf``/``not`` never reach here: kube 1.33 refuses them in CRDs
(``...allOf[0].x-kubernetes-validations: Forbidden: must be empty to be structural``; its validator
can run allOf rules, but CRD validation keeps ``AllowNestedXValidations`` off), and so does
``schema.structural``. ``format: date-time/date/duration/byte`` strings are timestamps/durations/
bytes (``typed``); quantity/URL/IP/CIDR values compare by value (``library_ext``).

The interpreter stops ``all``/``exists``/``exists_one`` at the first element whose predicate
errors; cel-go lets another element decide (``['x', 1].exists(e, e > 0)`` is true): an evaluation
that raised is run again through ``macros``, which folds as cel-go does.

Known gaps: ``optionalOldSelf`` rules never run without an old value (no optional types);
timestamps/durations have microsecond precision; ``quantity('1000m').isInteger()`` is true here
(kube keeps Go's internal scale and says false).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from genericapi.apimachinery.errors import FieldError

if TYPE_CHECKING:
    from genericapi.apimachinery.cel.validator import CELValidator

__all__ = ["CELValidator", "compile_schema"]


def __getattr__(name: str) -> Any:
    """``CELValidator`` loads the interpreter when first asked for: importing the package (or a light
    module of it, as the gateway's ``typed``) does not compile the rest (start-up CPU of every service)."""
    if name == "CELValidator":
        from genericapi.apimachinery.cel.validator import CELValidator

        return CELValidator
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def compile_schema(schema: dict[str, Any], path: str) -> tuple[CELValidator | None, list[FieldError]]:
    """Compile every rule below ``schema`` (an openAPIV3Schema at CRD path ``path``).

    Returns the validator (None when the schema has no rules, or when a rule did not compile)
    and the CRD field errors, at ``<path>.properties[spec].x-kubernetes-validations[0].rule`` etc.
    """
    from genericapi.apimachinery.cel.compiler import compile_node
    from genericapi.apimachinery.cel.validator import CELValidator

    errs: list[FieldError] = []
    root = compile_node(schema, path, True, None, errs)
    if root is None or errs:
        return None, errs
    return CELValidator(root), errs
