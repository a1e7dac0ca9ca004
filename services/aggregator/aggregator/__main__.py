"""``python -m aggregator``."""

from .server import main

main()
