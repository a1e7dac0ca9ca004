"""The aggregator: the gateway in front of the chain (``python -m aggregator``)."""
