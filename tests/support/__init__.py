"""Helpers the integration tests share: real etcd, the real chain, real kubectl."""
