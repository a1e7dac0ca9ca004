"""Opt-in start-up tracing for bench/coldstart_timeline.py (loaded only through that script's
PYTHONPATH; nothing else in the tree imports it). With ``CSTRACE_DIR`` set, each Python process
writes ``<dir>/<pid>.jsonl``: one ``{"t": wall-clock seconds, "ev": name, ...}`` line per event.

Events: this file running (interpreter and site ready),
the import of each server module begun and done, ``GenericAPIServer.start`` and its phases (waiting
for etcd, each store's watch cache started, each post-start hook, the control server), uvicorn's
``startup`` (it binds the socket when it ends), the aggregator's start pieces and control-channel
sessions (one per connection attempt to a member, and each SERVING change), and every etcd call by
method. Methods are wrapped after their module is imported (a meta path finder), so the services run
their own code unchanged.
"""

from __future__ import annotations

import os

if os.environ.get("CSTRACE_DIR"):
    import functools
    import importlib.abc
    import importlib.machinery
    import inspect
    import json
    import sys
    import time
    from collections.abc import Callable
    from typing import Any

    def _open() -> Any:
        return open(os.path.join(os.environ["CSTRACE_DIR"], f"{os.getpid()}.jsonl"), "a", buffering=1)

    _out = _open()

    def _ev(name: str, **extra: Any) -> None:
        _out.write(json.dumps({"t": time.time(), "ev": name, **extra}) + "\n")

    def _forked() -> None:  # a child of the fork server (or its intermediate): a file of its own
        global _out
        _out = _open()
        _ev("forked")

    os.register_at_fork(after_in_child=_forked)
    _ev("site", argv=sys.argv)

    def _timed(label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def awrapper(*args: Any, **kwargs: Any) -> Any:
                _ev(label + ":begin")
                try:
                    return await fn(*args, **kwargs)
                finally:
                    _ev(label + ":end")
            return awrapper

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            _ev(label + ":begin")
            try:
                return fn(*args, **kwargs)
            finally:
                _ev(label + ":end")
        return wrapper

    def _wrap(module: Any, qualname: str, label: str = "") -> None:
        owner_name, _, attr = qualname.rpartition(".")
        owner = getattr(module, owner_name) if owner_name else module
        setattr(owner, attr, _timed(label or qualname, getattr(owner, attr)))

    def _hook_label(hook: Any) -> str:
        inner: Any = hook
        for cell in getattr(hook, "__closure__", None) or ():
            value = cell.cell_contents
            if callable(value) and hasattr(value, "__qualname__"):
                inner = value
                break
        return getattr(inner, "__qualname__", repr(inner))

    def _patch_apiserver(module: Any) -> None:
        cls = module.GenericAPIServer
        original_start = cls.start

        async def start(self: Any) -> None:
            self.post_start = [_timed(f"hook {_hook_label(h)}", h) for h in self.post_start]
            if self.control is not None:
                self.control.start = _timed("control-server.start", self.control.start)
            _ev("GenericAPIServer.start:begin", stores=len(self.stores), hooks=len(self.post_start))
            try:
                await original_start(self)
            finally:
                _ev("GenericAPIServer.start:end")

        cls.start = start
        _wrap(module, "GenericAPIServer._wait_for_etcd")
        _wrap(module, "GenericAPIServer.publish")

    def _patch_store(module: Any) -> None:
        original = module.Store.start

        async def start(self: Any) -> None:
            _ev("store.start:begin", resource=f"{self.info.plural}.{self.info.group}")
            try:
                await original(self)
            finally:
                _ev("store.start:end", resource=f"{self.info.plural}.{self.info.group}")

        module.Store.start = start

    def _patch_etcd(module: Any) -> None:
        original = module.EtcdClient._call

        async def _call(self: Any, method: str, *args: Any, **kwargs: Any) -> object:
            started = time.time()
            try:
                return await original(self, method, *args, **kwargs)
            finally:
                _out.write(json.dumps({"t": started, "ev": "etcd", "method": method,
                                       "seconds": time.time() - started}) + "\n")

        module.EtcdClient._call = _call

    def _patch_control(module: Any) -> None:
        original_session = module.ReplicaClient._session
        original_serving = module.ReplicaClient._set_serving

        async def _session(self: Any) -> bool:
            _ev("control-session:begin", member=self.member.name)
            try:
                return bool(await original_session(self))
            finally:
                _ev("control-session:end", member=self.member.name, error=self.last_error)

        def _set_serving(self: Any, serving: bool) -> None:
            if serving != self.serving:
                _ev("control-serving", member=self.member.name, serving=serving)
            original_serving(self, serving)

        module.ReplicaClient._session = _session
        module.ReplicaClient._set_serving = _set_serving

    _PATCHES: dict[str, Callable[[Any], None]] = {
        "genericapi.server.apiserver": _patch_apiserver,
        "genericapi.registry.store": _patch_store,
        "genericapi.storage.etcd": _patch_etcd,
        "aggregator.control": _patch_control,
        "uvicorn.server": lambda m: _wrap(m, "Server.startup", "uvicorn.startup"),
        "aggregator.apiservices.layer": lambda m: _wrap(m, "APIServiceLayer.start"),
        "aggregator.flowcontrol.wiring": lambda m: _wrap(m, "PriorityAndFairness.start"),
        "aggregator.secrets": lambda m: _wrap(m, "SecretView.start"),
        "aggregator.accounts": lambda m: _wrap(m, "ServiceAccountView.start"),
        "genericapi.registry.rbacview": lambda m: _wrap(m, "RBACView.start"),
        "aggregator.masterlease": lambda m: _wrap(m, "MasterLease.start"),
        "aggregator.server": lambda m: _wrap(m, "Gateway.start"),
    }
    #: Modules whose import is timed (begin and end), besides those patched.
    _IMPORTS = {"coreapi.server", "aggregator.server", "extensionsapi.server", "genericapi.server.apiserver",
                "fastapi", "grpc", "cryptography.x509", "aiohttp", "pydantic", "prometheus_client"}

    class _Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
            if name not in _PATCHES and name not in _IMPORTS:
                return None
            spec = importlib.machinery.PathFinder.find_spec(name, path, target)
            if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
                return spec
            _ev("import:begin", module=name)
            loader = spec.loader
            exec_module = loader.exec_module

            def exec_and_patch(module: Any) -> None:
                exec_module(module)
                _ev("import:end", module=name)
                patch = _PATCHES.get(name)
                if patch is not None:
                    patch(module)

            loader.exec_module = exec_and_patch  # type: ignore[method-assign]
            return spec

    sys.meta_path.insert(0, _Finder())
