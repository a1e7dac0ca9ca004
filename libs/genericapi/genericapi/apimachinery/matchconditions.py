"""``matchConditions``: CEL preconditions of a webhook or a ValidatingAdmissionPolicy (kube's matchconditions package).

Both admission webhooks and policies list up to 64 ``{name, expression}`` conditions over
``object``, ``oldObject``, ``request``, ``authorizer`` (and, for policies, ``params`` and
``variables``). As kube's ``matchconditions.Matcher`` decides: any condition that is false means
no match (the first false one is named); otherwise if any condition errored, the failure policy
decides (``Ignore``: no match, ``Fail``: an error, kube's aggregate of the errors); otherwise all
were true and the hook matches. Compile the list once per configuration generation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # CEL loads when conditions are compiled, not when the server starts (start-up CPU)
    from .cel.admission import Activation, Expression, Paths

FAIL = "Fail"
IGNORE = "Ignore"


@dataclass(frozen=True)
class MatchResult:
    """kube's ``matchconditions.MatchResult``."""

    matches: bool
    error: str = ""  # set only when the failure policy is Fail and a condition errored
    failed_condition: str = ""  # the first condition that evaluated to false


def aggregate(errors: Sequence[str]) -> str:
    """``utilerrors.NewAggregate(...).Error()``: one message as is, several as ``[a, b]``."""
    unique: list[str] = []
    for e in errors:
        if e not in unique:
            unique.append(e)
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


class MatchConditions:
    """The compiled conditions of one webhook or policy."""

    def __init__(self, conditions: Sequence[dict[str, Any]] | None, failure_policy: str | None = FAIL) -> None:
        from .cel.admission import compile_expression, merge_paths

        self.conditions: list[tuple[str, Expression]] = [
            (str(c.get("name") or ""), compile_expression(str(c.get("expression") or "")))
            for c in conditions or () if isinstance(c, dict)]
        self.failure_policy = failure_policy or FAIL
        #: What the conditions read of each variable; an ``Activation`` used only for them may
        #: take it as its ``paths`` (values are then handed to the interpreter in part).
        self.paths: Paths = merge_paths(e for _n, e in self.conditions)

    def __bool__(self) -> bool:
        return bool(self.conditions)

    def match(self, activation: Activation) -> MatchResult:
        """Evaluate in order; the authorizer is available, params/variables as the activation has them."""
        errors: list[str] = []
        for name, expr in self.conditions:
            value, err = activation.evaluate(expr)
            if err:
                errors.append(err)
                continue
            if value is False:
                return MatchResult(False, failed_condition=name)
            if value is not True:  # cel-go's checker rejects non-bool conditions at compile time
                errors.append(f"expression '{expr.source}' resulted in error: no such overload")
        if errors:
            if self.failure_policy == IGNORE:
                return MatchResult(False)
            return MatchResult(False, error=aggregate(errors))
        return MatchResult(True)
