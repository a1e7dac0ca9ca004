"""Field ownership as kube-apiserver tracks it (``metadata.managedFields``) and server-side apply.

A pure library, the Python counterpart of sigs.k8s.io/structured-merge-diff and kube's
``managedfields`` package: field paths and sets serialised as ``fieldsV1``
(:mod:`.fieldset`), merge semantics read from OpenAPI/structural schemas (:mod:`.schema`),
typed walks over objects (field sets, comparison, apply merge, removal; :mod:`.typed`), and
the bookkeeping of managers, updates, applies and conflicts (:mod:`.managers`). The registry
calls it on every write; nothing here knows about HTTP or storage.
"""
