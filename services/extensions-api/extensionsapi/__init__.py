"""extensions-api: the last link of the chain; CustomResourceDefinitions grow here (``python -m extensionsapi``)."""
