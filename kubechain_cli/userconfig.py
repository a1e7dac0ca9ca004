"""``kubechain kubeconfig user``: a kubeconfig for a new user, as ``kubeadm kubeconfig user`` makes one.

The user is whoever the client certificate names (CN) and its groups (O): the chain's CA signs it,
and RBAC then decides what it may do (``kubectl create rolebinding ... --user=<name>``). Printed
to standard output, or written (mode 0600) with ``-o``.
"""

from __future__ import annotations

import argparse
import base64
import os
import sys
from pathlib import Path

import yaml
from genericapi.server.certs import CertPaths, issue_client_certificate


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    kubeconfig = sub.add_parser("kubeconfig", help="write kubeconfigs for the chain")
    which = kubeconfig.add_subparsers(dest="kubeconfig_command", required=True)
    user = which.add_parser("user", help="a kubeconfig for a new user (a client certificate the chain's CA signs)")
    user.add_argument("--data-dir", default=".kubechain", help="the chain's data dir (its pki/ holds the CA)")
    user.add_argument("--client-name", required=True, help="the user name (the certificate's CN)")
    user.add_argument("--org", action="append", default=[], help="a group of the user (repeatable)")
    user.add_argument("--server", default="", help="the API server URL (default: the admin kubeconfig's)")
    user.add_argument("--validity-period", type=int, default=365, help="days the certificate is valid")
    user.add_argument("-o", "--output", default="", help="write here instead of standard output")


def run(args: argparse.Namespace) -> None:
    data = Path(args.data_dir).resolve()
    pki = CertPaths(data / "pki")
    if not Path(pki.ca_key).exists():
        raise SystemExit(f"kubechain: no CA key at {pki.ca_key}: is {data} a kubechain data dir?")
    server = args.server
    if not server:
        admin = data / "kubeconfig"
        if not admin.exists():
            raise SystemExit(f"kubechain: give --server: there is no {admin} to read it from")
        server = yaml.safe_load(admin.read_text())["clusters"][0]["cluster"]["server"]
    crt, key = issue_client_certificate(pki.dir, args.client_name, args.org, args.validity_period)
    b64 = lambda data: base64.b64encode(data).decode()  # noqa: E731
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": f"{args.client_name}@kubechain",
        "clusters": [{"name": "kubechain", "cluster": {"server": server,
                                                       "certificate-authority-data": b64(Path(pki.ca).read_bytes())}}],
        "users": [{"name": args.client_name, "user": {"client-certificate-data": b64(crt),
                                                      "client-key-data": b64(key)}}],
        "contexts": [{"name": f"{args.client_name}@kubechain",
                      "context": {"cluster": "kubechain", "user": args.client_name}}],
    }
    text = yaml.safe_dump(config, sort_keys=False)
    if not args.output:
        sys.stdout.write(text)
        return
    fd = os.open(args.output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
