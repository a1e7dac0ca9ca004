"""API Priority and Fairness (``flowcontrol.apiserver.k8s.io/v1``): the pure parts, shared.

core-api writes kube's bootstrap configuration (``bootstrap``) and validates the objects; the gateway
classifies requests (``matching``), deals them to queues (``shufflesharding``) and splits the server's
seats among priority levels (``allocation``). Nothing here does I/O.
"""
