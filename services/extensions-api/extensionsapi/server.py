"""extensions-api: CustomResourceDefinitions (a later issue); for now the chain's last link,
answering 404 NotFound for everything nobody else serves, as kube-apiserver's NotFound handler.
"""

from __future__ import annotations

import argparse
import logging

from genericapi.server.apiserver import GenericAPIServer, add_common_flags, config_from_args
from genericapi.server.app import run_forever


def _order_key(group: str, version: str) -> tuple[int, str, str]:
    return (0, group, version)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="kubechain-extensions-api", description=__doc__)
    add_common_flags(parser, default_port=6445)
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level,
                        format="%(asctime)s extensions-api %(levelname)s %(name)s: %(message)s")
    server = GenericAPIServer(config_from_args("extensions-api", args), _order_key)
    run_forever(server.run())
