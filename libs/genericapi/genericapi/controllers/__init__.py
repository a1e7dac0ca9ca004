"""The controller runtime: clients, informers, work queues, controllers and leader election.

Controllers in a service reach resources through ``ClientSet`` (this process's stores directly,
the delegate link's resources over HTTP), follow them with ``Informer``s, and do work from a
``WorkQueue`` in a ``Controller``; a ``ControllerManager`` runs them only while this replica holds
a ``coordination.k8s.io/v1`` Lease (``LeaderElector``). This package sits beside the registry:
it may import ``apimachinery``, ``registry`` and aiohttp, never ``server`` or ``handlers``.

Beyond the contract (docs/shared): ``ResourceClient.delete`` returns the object while it waits
for finalizers and None once it is gone; ``Controller`` has ``informers`` (started, synced and
stopped by ``run``) and ``on_synced`` (enqueue everything: level-triggered); ``run`` may be
called again for a new leader term. ``WorkQueue`` has ``shut_down`` (``get`` then raises
``ShutDown``). ``ClientSet`` has ``start(interval)`` (poll the delegate's discovery) and
``close``. ``ControllerManager(leases, lease_name, ...)`` has ``add(controller, workers)``,
``start``, ``stop``, ``leading``.
"""

from __future__ import annotations

from .clientset import ClientSet
from .controller import Controller
from .http import HTTPClient
from .informer import Informer, object_key
from .leaderelection import LeaderElector, micro_time, new_identity
from .local import LocalClient
from .manager import ControllerManager
from .types import CONTROLLER_USER, APIResource, ResourceClient, WatchEvent, controller_user
from .workqueue import ShutDown, WorkQueue

__all__ = [
    "CONTROLLER_USER",
    "APIResource",
    "ClientSet",
    "Controller",
    "ControllerManager",
    "HTTPClient",
    "Informer",
    "LeaderElector",
    "LocalClient",
    "ResourceClient",
    "ShutDown",
    "WatchEvent",
    "WorkQueue",
    "controller_user",
    "micro_time",
    "new_identity",
    "object_key",
]
