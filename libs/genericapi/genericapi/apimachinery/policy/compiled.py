"""A ValidatingAdmissionPolicy compiled once per generation, and its evaluation for one request.

Mirrors kube's ``validating.validator.Validate``: the policy's ``matchConditions`` first (an error
follows ``failurePolicy``), then every validation (a failing expression follows
``failurePolicy``; a false one denies with its ``reason``, default Invalid, and the message of
``messageExpression``, else ``message``, else ``failed expression: <expression>``), then the
audit annotations (string: published, null or empty: left out, anything else: an error).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from genericapi.apimachinery.matchconditions import FAIL, IGNORE, MatchConditions

from .matching import MatchResources

if TYPE_CHECKING:
    # CEL loads when a policy is compiled, not when the server starts (start-up CPU)
    from genericapi.apimachinery.cel.admission import Activation, Expression, Paths

MAX_MESSAGE_BYTES = 5 * 1024  # kube's MaxEvaluatedMessageExpressionSizeBytes
ADMIT, DENY = "admit", "deny"


@dataclass
class Decision:
    """kube's ``PolicyDecision``: admit or deny, whether it came from an error, and why."""

    action: str
    message: str = ""
    reason: str = ""
    error: bool = False


@dataclass
class AuditAnnotation:
    key: str
    value: str = ""
    error: str = ""
    #: An error whatever the failure policy (a value that is neither string nor null).
    hard: bool = False


@dataclass
class Validation:
    expression: Expression
    message: str
    message_expression: Expression | None
    reason: str


@dataclass
class CompiledPolicy:
    """Everything a request needs from one policy object, built once per (uid, generation)."""

    name: str
    uid: str
    generation: int
    failure_policy: str
    param_kind: dict[str, str] | None
    match: MatchResources
    conditions: MatchConditions
    variables: list[tuple[str, Expression]]
    validations: list[Validation]
    audit: list[tuple[str, Expression]]
    spec: dict[str, Any] = field(default_factory=dict)
    #: What the policy's expressions read of each variable: only that is handed to the interpreter
    #: (None: whole values).
    paths: Paths | None = field(default_factory=dict)
    #: The admission variables any of the policy's expressions reads (``request`` and
    #: ``namespaceObject`` are built for a request only when one is).
    reads: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        from genericapi.apimachinery.cel.admission import merge_paths

        exprs = [e for _n, e in self.conditions.conditions] + [e for _n, e in self.variables]
        for v in self.validations:
            exprs.append(v.expression)
            if v.message_expression is not None:
                exprs.append(v.message_expression)
        exprs += [e for _k, e in self.audit]
        self.paths = merge_paths(exprs)
        self.reads = frozenset().union(*(e.refs for e in exprs if e.program is not None))

    @classmethod
    def compile(cls, policy: dict[str, Any]) -> CompiledPolicy:
        from genericapi.apimachinery.cel.admission import compile_expression

        meta = policy.get("metadata") or {}
        spec = policy.get("spec") or {}
        failure = str(spec.get("failurePolicy") or FAIL)
        pk = spec.get("paramKind")
        param_kind = ({"apiVersion": str(pk.get("apiVersion") or ""), "kind": str(pk.get("kind") or "")}
                      if isinstance(pk, dict) else None)
        validations = []
        for v in spec.get("validations") or []:
            if not isinstance(v, dict):
                continue
            msg_expr = v.get("messageExpression")
            validations.append(Validation(compile_expression(str(v.get("expression") or "")),
                                          str(v.get("message") or ""),
                                          compile_expression(str(msg_expr)) if msg_expr else None,
                                          str(v.get("reason") or "")))
        return cls(
            name=str(meta.get("name") or ""), uid=str(meta.get("uid") or ""),
            generation=int(meta.get("generation") or 0), failure_policy=failure, param_kind=param_kind,
            match=MatchResources.parse(spec.get("matchConstraints")),
            conditions=MatchConditions(spec.get("matchConditions"), failure),
            variables=[(str(v.get("name") or ""), compile_expression(str(v.get("expression") or "")))
                       for v in spec.get("variables") or [] if isinstance(v, dict)],
            validations=validations,
            audit=[(str(a.get("key") or ""), compile_expression(str(a.get("valueExpression") or "")))
                   for a in spec.get("auditAnnotations") or [] if isinstance(a, dict)],
            spec=spec,
        )

    def _error_action(self) -> str:
        return ADMIT if self.failure_policy == IGNORE else DENY

    def validate(self, activation: Activation) -> tuple[list[Decision], list[AuditAnnotation]]:
        """The decisions of every validation and the audit annotations, for one binding and param."""
        activation.composition = self.variables
        activation.paths = self.paths
        if self.conditions:
            result = self.conditions.match(activation)
            if result.error:
                return [Decision(self._error_action(), result.error, error=True)], []
            if not result.matches:
                return [], []
        decisions = []
        for v in self.validations:
            value, err = activation.evaluate(v.expression)
            if err:
                decisions.append(Decision(self._error_action(), err, error=True))
            elif value is not True:
                decisions.append(Decision(DENY, self._message(v, activation), v.reason or "Invalid"))
            else:
                decisions.append(Decision(ADMIT))
        annotations = []
        for key, expr in self.audit:
            value, err = activation.evaluate(expr, with_authorizer=False)
            if err:
                annotations.append(AuditAnnotation(key, error=err))
            elif isinstance(value, str):
                if value.strip():
                    annotations.append(AuditAnnotation(key, value.strip()))
            elif value is not None:
                annotations.append(AuditAnnotation(key, error=(
                    f"valueExpression '{expr.source}' resulted in unsupported return type: {_cel_type(value)}. "
                    "Return type must be either string or null."), hard=True))
        return decisions, annotations

    @staticmethod
    def _message(v: Validation, activation: Activation) -> str:
        message = ""
        if v.message_expression is not None:
            value, err = activation.evaluate(v.message_expression, with_authorizer=False)
            if not err and isinstance(value, str):
                message = value.strip()
                if len(message.encode()) > MAX_MESSAGE_BYTES or "\n" in message:
                    message = ""
        if not message and v.message:
            message = v.message.strip()
        if not message:
            message = f"failed expression: {v.expression.source.strip()}"
        return message


def _cel_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "double"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "map"
    if isinstance(value, bytes):
        return "bytes"
    return type(value).__name__
