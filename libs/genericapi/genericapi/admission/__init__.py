"""Admission webhooks (kube's MutatingAdmissionWebhook and ValidatingAdmissionWebhook plugins).

Beside the layers: it reads webhook configurations from registry watch caches, calls webhooks
over HTTPS (aiohttp) and plugs into a service's ``AdmissionChain``; nothing in the layers
imports it (the contract in pyproject.toml), so only a service's ``server.py`` wires it.
"""
