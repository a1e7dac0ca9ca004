"""core-api: the built-in Kubernetes resources (``python -m coreapi``)."""
