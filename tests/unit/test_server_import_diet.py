"""Each service's server module loads without the packages only some requests need (start-up CPU).

Cold start is mostly import work; these packages are loaded where they are used instead, and this
keeps a top-level import from bringing them back unnoticed: httpx (the admission webhook client's
optional HTTP/2 path), kubernetes_validate and jsonschema (the Table printers need only its schema
file), the CEL interpreter and its bindings (only a CRD with ``x-kubernetes-validations``, a
ValidatingAdmissionPolicy or a webhook's ``matchConditions`` needs them). Each module is imported
in a fresh interpreter, then the lazy paths are taken to show the packages still load when needed.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

#: Loaded on demand only (each was several percent of a service's import instructions under callgrind).
_LAZY = ("httpx", "kubernetes_validate", "jsonschema", "cel", "genericapi.apimachinery.cel.binding",
         "genericapi.apimachinery.cel.compiler", "genericapi.apimachinery.cel.validator",
         "genericapi.apimachinery.cel.admission", "genericapi.apimachinery.cel.library",
         # never needed: the shell is Starlette (FastAPI and its pydantic models were ~0.45 s of every
         # cold start's CPU) and uvicorn serves no WebSocket (ws="none")
         "fastapi", "pydantic", "wsproto", "websockets")

_PROBE = """
import sys
import {module}
print(sorted(name for name in {lazy!r} if name in sys.modules))
"""


@pytest.mark.parametrize("module", ["coreapi.server", "extensionsapi.server", "aggregator.server"])
def test_server_module_does_not_import_lazy_packages(module: str) -> None:
    out = subprocess.run([sys.executable, "-c", _PROBE.format(module=module, lazy=_LAZY)],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


_LAZY_PATHS = """
import asyncio, ssl, sys
from genericapi.admission.client import WebhookClient, _transport_errors
from genericapi.apimachinery.tables_common import doc
from genericapi.httpclient import client_errors
assert doc("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "name").startswith("Name must be unique")
assert "kubernetes_validate" not in sys.modules
assert _transport_errors() == (OSError,) and "httpx" not in sys.modules and "aiohttp" not in sys.modules
assert client_errors(ValueError) == (TimeoutError, OSError, ValueError) and "aiohttp" not in sys.modules

async def main():
    client = WebhookClient({"url": "https://127.0.0.1:1/hook"}, None)
    client._session_for()
    import aiohttp
    assert aiohttp.ClientError in _transport_errors() and aiohttp.ClientError in client_errors()
    client._client_for()
    import httpx
    assert httpx.HTTPError in _transport_errors()
    await client.close()

asyncio.run(main())

from genericapi.apimachinery import cel
from genericapi.apimachinery.policy.compiled import CompiledPolicy
assert "genericapi.apimachinery.cel.validator" not in sys.modules
rule = {"rule": "self.replicas <= 5", "message": "too many"}
schema = {"type": "object", "properties": {"replicas": {"type": "integer"}}, "x-kubernetes-validations": [rule]}
validator, errs = cel.compile_schema(schema, "spec.validation.openAPIV3Schema")
assert errs == [] and isinstance(validator, cel.CELValidator)
policy = CompiledPolicy.compile({"metadata": {"name": "p"}, "spec": {"validations": [{"expression": "true"}]}})
assert policy.validations[0].expression.program is not None
print("ok")
"""


def test_lazy_paths_still_work() -> None:
    out = subprocess.run([sys.executable, "-c", _LAZY_PATHS], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "ok"
