"""``apiregistration.k8s.io/v1`` APIServices: what kube-aggregator adds on top of the delegation chain.

The gateway serves APIService objects itself (stored in the shared etcd), keeps a local
APIService for every built-in and CRD group-version (``autoregister``), checks service-backed
ones (``availability``), proxies requests for service-backed group-versions to the Service the
APIService names (``routes``) and lists their groups in discovery (``discovery``). ``layer``
wires it all into the gateway.
"""
