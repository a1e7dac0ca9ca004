"""The ``kubechain`` command: runs the whole chain (etcd included) on one machine."""
