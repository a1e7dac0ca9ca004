"""``python -m extensionsapi``."""

from .server import main

main()
