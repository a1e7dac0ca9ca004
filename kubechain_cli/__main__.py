"""``python -m kubechain_cli``."""

from .main import main

main()
