"""``@pytest.mark.kubechain_crds("config/crd/bases", "extra/widget.yaml")``: CustomResourceDefinitions
from files installed before the test, as envtest's ``CRDDirectoryPaths`` does in a suite's set-up.

Paths are files (every YAML document in them a CRD) or directories (their ``.yaml``, ``.yml`` and
``.json`` files, not recursive); relative paths are taken from pytest's rootdir. Files are checked
before any chain starts, so a wrong path fails the test at once with the path it looked at.

Lifetime: a CRD is created the first time a test needs it (or replaced when its file changed since),
waited for until Established and its versions are served, and then kept for the rest of the session,
the way envtest installs CRDs once per suite. Tests stay apart through their namespaces; with
``--kubechain-kubeconfig`` the CRDs stay on that server after the session.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pytest
import yaml

from .cluster import kubernetes_client

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

MARKER = "kubechain_crds"
_SUFFIXES = (".yaml", ".yml", ".json")
_CRD_API_VERSION = "apiextensions.k8s.io/v1"


class CRDFileError(ValueError):
    """A marker argument that is not a readable file of CustomResourceDefinitions."""


@dataclass(frozen=True)
class CRDDocument:
    name: str
    source: str  # "path/to/file.yaml, document 2"
    body: dict[str, Any]


def load_crds(paths: list[object], rootdir: Path) -> list[CRDDocument]:
    """Every CRD the marker's paths hold, in order; ``CRDFileError`` for the first path or document
    that is wrong, naming it."""
    if not paths:
        raise CRDFileError(f"@pytest.mark.{MARKER}() needs at least one file or directory")
    documents: list[CRDDocument] = []
    for arg in paths:
        if not isinstance(arg, str | os.PathLike):
            raise CRDFileError(f"@pytest.mark.{MARKER}: {arg!r} ({type(arg).__name__}) is not a path")
        path = Path(arg)
        resolved = path if path.is_absolute() else rootdir / path
        if not resolved.exists():
            raise CRDFileError(f"@pytest.mark.{MARKER}: {os.fspath(arg)!r}: no such file or directory ({resolved}; "
                               f"relative paths are taken from the rootdir {rootdir})")
        if resolved.is_dir():
            files = sorted(p for p in resolved.iterdir() if p.is_file() and p.suffix in _SUFFIXES)
            if not files:
                raise CRDFileError(f"@pytest.mark.{MARKER}: directory {resolved} has no .yaml, .yml or .json file")
        else:
            files = [resolved]
        for file in files:
            documents += _load_file(file)
    return documents


def _load_file(file: Path) -> list[CRDDocument]:
    try:
        loaded = list(yaml.safe_load_all(file.read_text()))
    except (OSError, UnicodeDecodeError) as err:
        raise CRDFileError(f"@pytest.mark.{MARKER}: cannot read {file}: {err}") from err
    except yaml.YAMLError as err:
        raise CRDFileError(f"@pytest.mark.{MARKER}: {file} is not valid YAML: {err}") from err
    found = []
    for index, doc in enumerate(loaded, start=1):
        if doc is None:  # an empty document (a leading or trailing ---)
            continue
        where = f"{file}, document {index}"
        if not isinstance(doc, dict):
            raise CRDFileError(f"@pytest.mark.{MARKER}: {where} is a {type(doc).__name__}, not an object")
        api_version, kind = doc.get("apiVersion"), doc.get("kind")
        if kind != "CustomResourceDefinition" or api_version != _CRD_API_VERSION:
            hint = (" (apiextensions.k8s.io/v1beta1 was removed in Kubernetes 1.22)"
                    if api_version == "apiextensions.k8s.io/v1beta1" else "")
            raise CRDFileError(f"@pytest.mark.{MARKER}: {where} is apiVersion {api_version!r} kind {kind!r}, "
                               f"not an {_CRD_API_VERSION} CustomResourceDefinition{hint}")
        metadata = doc.get("metadata")
        name = metadata.get("name") if isinstance(metadata, dict) else None
        if not isinstance(name, str) or not name:
            raise CRDFileError(f"@pytest.mark.{MARKER}: {where}: metadata.name is missing")
        found.append(CRDDocument(name, where, doc))
    if not found:
        raise CRDFileError(f"@pytest.mark.{MARKER}: {file} holds no CustomResourceDefinition")
    return found


class CRDInstaller:
    """Creates (or replaces) CRDs once per session and waits until they are usable."""

    def __init__(self, client: ApiClient, timeout: float = 30.0) -> None:
        self._client = client
        self._timeout = timeout
        self._installed: dict[str, bytes] = {}  # name -> the body installed, canonical JSON

    def ensure(self, documents: list[CRDDocument]) -> None:
        kubernetes = kubernetes_client()
        api = kubernetes.client.ApiextensionsV1Api(self._client)
        pending = []
        for doc in documents:
            canonical = orjson.dumps(doc.body, option=orjson.OPT_SORT_KEYS)
            if self._installed.get(doc.name) == canonical:
                continue
            self._write(api, doc)
            pending.append((doc, canonical))
        deadline = time.monotonic() + self._timeout
        for doc, canonical in pending:
            self._wait_established(api, doc, deadline)
            self._wait_served(doc, deadline)
            self._installed[doc.name] = canonical

    def _write(self, api: Any, doc: CRDDocument) -> None:
        kubernetes = kubernetes_client()
        refused = ""
        try:
            _body(api.create_custom_resource_definition(doc.body, _preload_content=False))
            return
        except kubernetes.client.ApiException as err:
            if err.status != 409:
                refused = _refused(doc, err)
        if refused:  # failed outside the except block: the report shows our message, not the client's
            pytest.fail(refused, pytrace=False)
        # Already there (an earlier session on a kept server, another worker, a changed file): replace.
        for _ in range(5):
            current = orjson.loads(_body(api.read_custom_resource_definition(doc.name, _preload_content=False)))
            body = {**doc.body, "metadata": {**doc.body["metadata"],
                                             "resourceVersion": current["metadata"]["resourceVersion"]}}
            try:
                _body(api.replace_custom_resource_definition(doc.name, body, _preload_content=False))
                return
            except kubernetes.client.ApiException as err:
                if err.status != 409:
                    refused = _refused(doc, err)
            if refused:
                pytest.fail(refused, pytrace=False)
        pytest.fail(f"@pytest.mark.{MARKER}: {doc.source}: CustomResourceDefinition {doc.name} kept changing "
                    "while being replaced", pytrace=False)

    def _wait_established(self, api: Any, doc: CRDDocument, deadline: float) -> None:
        while True:
            crd = orjson.loads(_body(api.read_custom_resource_definition(doc.name, _preload_content=False)))
            conditions = {c.get("type"): c for c in (crd.get("status") or {}).get("conditions") or []}
            names = conditions.get("NamesAccepted", {})
            if names.get("status") == "False":
                pytest.fail(f"@pytest.mark.{MARKER}: {doc.source}: CustomResourceDefinition {doc.name}: "
                            f"names not accepted: {names.get('message', '')}", pytrace=False)
            if conditions.get("Established", {}).get("status") == "True":
                return
            if time.monotonic() > deadline:
                pytest.fail(f"@pytest.mark.{MARKER}: CustomResourceDefinition {doc.name} not Established after "
                            f"{self._timeout}s (conditions: {list(conditions.values())})", pytrace=False)
            time.sleep(0.05)

    def _wait_served(self, doc: CRDDocument, deadline: float) -> None:
        """Until a list of each served version answers 200 (the gateway learns new routes a moment
        after the CRD is Established)."""
        kubernetes = kubernetes_client()
        objects = kubernetes.client.CustomObjectsApi(self._client)
        spec = doc.body.get("spec") or {}
        plural = (spec.get("names") or {}).get("plural", "")
        for version in spec.get("versions") or []:
            if not version.get("served", True):
                continue
            while True:
                try:
                    _body(objects.list_cluster_custom_object(spec.get("group", ""), version.get("name", ""), plural,
                                                             limit=1, _preload_content=False))
                    break
                except kubernetes.client.ApiException as err:
                    problem = f"{err.status} {err.reason}" if err.status != 404 or time.monotonic() > deadline else ""
                if problem:
                    pytest.fail(f"@pytest.mark.{MARKER}: {doc.name} version {version.get('name')} is not "
                                f"served: {problem}", pytrace=False)
                time.sleep(0.05)


def _body(response: Any) -> bytes:
    """A raw (``_preload_content=False``) response's body, its connection handed back to the pool:
    one left checked out stays open past ``ApiClient.close`` and holds the gateway's stop up."""
    try:
        data: bytes = response.data
        return data
    finally:
        response.release_conn()


def _refused(doc: CRDDocument, err: Any) -> str:
    try:
        message = orjson.loads(err.body).get("message", err.body)
    except (orjson.JSONDecodeError, TypeError, AttributeError):
        message = err.body
    return f"@pytest.mark.{MARKER}: {doc.source}: the server refused CustomResourceDefinition {doc.name}: {message}"


@pytest.fixture(scope="session")
def kubechain_crd_installer(kubechain_session_client: ApiClient) -> CRDInstaller:
    """Installs CRD documents once per session (what the marker uses; call ``ensure`` yourself for
    CRDs built in code)."""
    return CRDInstaller(kubechain_session_client)


@pytest.fixture(autouse=True)
def _kubechain_crds(request: pytest.FixtureRequest) -> None:
    """Installs what the test's ``kubechain_crds`` markers name (function, class and module level).
    Does nothing, and starts no chain, for a test without the marker."""
    markers = list(request.node.iter_markers(MARKER))
    if not markers:
        return
    paths: list[object] = []
    try:
        for marker in reversed(markers):  # module, class, then function: broader first
            if not marker.args:
                raise CRDFileError(f"@pytest.mark.{MARKER}() needs at least one file or directory")
            paths += [arg for arg in marker.args if arg not in paths]
        documents = load_crds(paths, request.config.rootpath)
    except CRDFileError as err:
        pytest.fail(str(err), pytrace=False)
    installer: CRDInstaller = request.getfixturevalue("kubechain_crd_installer")
    installer.ensure(documents)
