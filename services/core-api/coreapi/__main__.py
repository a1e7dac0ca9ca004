"""``python -m coreapi``."""

from .server import main

main()
