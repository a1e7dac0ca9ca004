"""Catalog rows of the resources kube-apiserver serves without storing objects of their own.

A cluster without nodes still answers these (issue 16): ``componentstatuses`` (read-only, from
live health probes), ``bindings`` and ``pods/binding`` (what a scheduler posts), ``pods/eviction``
(what ``kubectl drain`` posts) and the ``authorization.k8s.io/v1`` reviews (create-only, nothing
stored). They are ordinary catalog rows so discovery, routes and OpenAPI derive from them like
any other; their stores (``componentstatuses``, ``binding``, ``eviction``, ``accessreviews``)
override the verbs they serve. None publishes a ``storageVersionHash``: kube gives one only to
resources persisted in etcd.
"""

from __future__ import annotations

from genericapi.apimachinery.resources import ResourceInfo, SubresourceSpec

_AUTHZ = "authorization.k8s.io"
_CREATE = ("create",)


def _virtual(group: str, kind: str, plural: str, *, namespaced: bool, verbs: tuple[str, ...] = _CREATE,
             short_names: tuple[str, ...] = ()) -> ResourceInfo:
    return ResourceInfo(group=group, version="v1", kind=kind, plural=plural, singular=kind.lower(),
                        namespaced=namespaced, short_names=short_names, verbs=verbs)


#: ``pods/binding`` answers a Binding; ``pods/eviction`` a policy/v1 Eviction (v1beta1 bodies
#: are accepted too, as kube's EvictionREST is a GroupVersionAcceptor of both).
POD_SUBRESOURCE_SPECS: tuple[SubresourceSpec, ...] = (
    SubresourceSpec("binding", _CREATE, kind="Binding"),
    SubresourceSpec("eviction", _CREATE, group="policy", version="v1", kind="Eviction",
                    also_accepts=("policy/v1beta1",)),
)
POD_SUBRESOURCES: tuple[str, ...] = tuple(spec.name for spec in POD_SUBRESOURCE_SPECS)

COMPONENT_STATUSES = _virtual("", "ComponentStatus", "componentstatuses", namespaced=False,
                              verbs=("get", "list"), short_names=("cs",))
BINDINGS = _virtual("", "Binding", "bindings", namespaced=True)

CORE_V1_NODELESS: tuple[ResourceInfo, ...] = (BINDINGS, COMPONENT_STATUSES)

LOCAL_SUBJECT_ACCESS_REVIEWS = _virtual(_AUTHZ, "LocalSubjectAccessReview", "localsubjectaccessreviews",
                                        namespaced=True)
SELF_SUBJECT_ACCESS_REVIEWS = _virtual(_AUTHZ, "SelfSubjectAccessReview", "selfsubjectaccessreviews",
                                       namespaced=False)
SELF_SUBJECT_RULES_REVIEWS = _virtual(_AUTHZ, "SelfSubjectRulesReview", "selfsubjectrulesreviews",
                                      namespaced=False)
SUBJECT_ACCESS_REVIEWS = _virtual(_AUTHZ, "SubjectAccessReview", "subjectaccessreviews", namespaced=False)

AUTHORIZATION_V1_RESOURCES: tuple[ResourceInfo, ...] = (
    LOCAL_SUBJECT_ACCESS_REVIEWS,
    SELF_SUBJECT_ACCESS_REVIEWS,
    SELF_SUBJECT_RULES_REVIEWS,
    SUBJECT_ACCESS_REVIEWS,
)

#: (group, plural) of every row here: installed with their own stores, not the generic one.
NODELESS_KEYS: frozenset[tuple[str, str]] = frozenset(
    (info.group, info.plural) for info in (*CORE_V1_NODELESS, *AUTHORIZATION_V1_RESOURCES))
