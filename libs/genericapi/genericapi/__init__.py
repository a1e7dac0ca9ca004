"""Generic Kubernetes API machinery shared by every kubechain service.

Layers, one direction only (enforced by import-linter):
``server`` -> ``handlers`` -> ``registry`` -> ``storage``; ``apimachinery`` holds pure,
framework-free helpers (errors, selectors, patches, schemas, printing) usable from any layer
above storage.
"""
