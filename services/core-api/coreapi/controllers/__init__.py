"""core-api's controllers (kube-controller-manager's, for the resources a control plane owns).

They run in core-api under leader election (``manager.py``): level-triggered from informers on
the watch cache, so whichever replica leads reconciles every namespace from scratch.
"""
