"""ValidatingAdmissionPolicy: CEL policies bound to requests, as kube-apiserver 1.33's validating policy plugin.

``matching`` decides whether a policy's ``matchConstraints`` (and a binding's ``matchResources``)
cover a request; ``compiled`` turns a policy object into programs once per generation; ``plugin``
is the ``ValidatingPlugin`` that evaluates every bound policy for a write and denies, warns or
records audit annotations as each binding's ``validationActions`` say. Where the policies,
bindings, namespaces and params come from (watch caches in each service) is behind the
``PolicySource`` protocol in ``plugin``.
"""
