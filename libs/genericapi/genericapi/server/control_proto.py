"""The generated modules of the control channel (``proto/kubechain/control/v1``), loaded once.

Generated code is build output (see ``genericapi.protogen``): this makes sure it exists before
importing it, so the backends' server (``control.py``) and the gateway's client import the
contract from one place.
"""

from __future__ import annotations

from types import ModuleType

from genericapi.protogen import ensure_generated

ensure_generated()

from genericapi.generated.kubechain.control.v1 import (  # noqa: E402  (generated just above)
    control_pb2 as _control_pb2,
)
from genericapi.generated.kubechain.control.v1 import (  # noqa: E402
    control_pb2_grpc as _control_pb2_grpc,
)

#: Messages: ``WatchDiscoveryRequest``, ``DiscoveryUpdate``.
pb: ModuleType = _control_pb2
#: ``ControlServicer``, ``ControlStub``, ``add_ControlServicer_to_server``.
rpc: ModuleType = _control_pb2_grpc
#: Full name of the service (the name clients may ask ``grpc.health.v1.Health`` about).
SERVICE_NAME = "kubechain.control.v1.Control"
