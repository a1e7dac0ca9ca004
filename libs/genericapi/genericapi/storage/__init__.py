"""Storage: etcd keys, bytes, revisions and watch streams. Knows nothing of HTTP or kinds."""
