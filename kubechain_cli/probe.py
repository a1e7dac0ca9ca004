"""Health probe for the container images (Docker ``HEALTHCHECK``, Kubernetes exec probes).

The backends accept only TLS clients with a certificate from the cluster CA, so a plain HTTP
check cannot reach their ``/readyz``; this probe presents one. Exit status 0 when the endpoint
answers 200, 1 otherwise. Configured by flags or, as the images set them, environment:
``KUBECHAIN_PROBE_URL``, ``KUBECHAIN_PROBE_CA``, ``KUBECHAIN_PROBE_CERT``, ``KUBECHAIN_PROBE_KEY``.
Run as ``python -m kubechain_cli.probe`` (imports only the standard library: it runs every few seconds).
"""

from __future__ import annotations

import argparse
import os
import ssl
import sys
import urllib.error
import urllib.request


def probe(url: str, ca: str = "", cert: str = "", key: str = "", timeout: float = 3.0) -> tuple[bool, str]:
    context = None
    if url.startswith("https:"):
        context = ssl.create_default_context(cafile=ca or None)
        if cert:
            context.load_cert_chain(cert, key or None)
    try:
        with urllib.request.urlopen(url, context=context, timeout=timeout) as response:
            return response.status == 200, f"{response.status} {response.read(200).decode(errors='replace')}"
    except urllib.error.HTTPError as err:
        return False, f"{err.code} {err.read(500).decode(errors='replace')}"
    except (urllib.error.URLError, OSError, ssl.SSLError) as err:
        return False, str(err)


def main(argv: list[str] | None = None) -> None:
    env = os.environ.get
    parser = argparse.ArgumentParser(prog="python -m kubechain_cli.probe", description=__doc__.split("\n\n")[0])
    parser.add_argument("url", nargs="?", default=env("KUBECHAIN_PROBE_URL", "https://127.0.0.1:6443/readyz"))
    parser.add_argument("--ca", default=env("KUBECHAIN_PROBE_CA", ""))
    parser.add_argument("--cert", default=env("KUBECHAIN_PROBE_CERT", ""))
    parser.add_argument("--key", default=env("KUBECHAIN_PROBE_KEY", ""))
    parser.add_argument("--timeout", type=float, default=3.0)
    args = parser.parse_args(argv)
    try:
        ok, detail = probe(args.url, args.ca, args.cert, args.key, args.timeout)
    except (OSError, ssl.SSLError) as err:  # unreadable credentials
        ok, detail = False, str(err)
    print(f"{args.url}: {detail.strip()[:300]}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
