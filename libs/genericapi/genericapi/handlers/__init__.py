"""Handlers: HTTP verbs to registry calls, content negotiation, errors to ``metav1.Status``."""
