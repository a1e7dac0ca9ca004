"""Wheel build step: put proto/, the generated protobuf/gRPC modules and the Kubernetes descriptor set
into the wheel (generated code is build output, never committed; see genericapi.protogen.build_into).

Everything else about the package is in pyproject.toml. Editable installs skip this: a checkout
generates into libs/genericapi/genericapi/generated/ on demand (./dev, genericapi.protogen).
"""

from __future__ import annotations

import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class BuildPyWithGenerated(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        sys.path.insert(0, str(ROOT / "libs" / "genericapi"))
        from genericapi import protogen

        descriptors = protogen.build_into(Path(self.build_lib) / "genericapi", ROOT / "proto")
        if descriptors is None:
            print("kubechain wheel: no Kubernetes descriptor set bundled; the installed package reads the "
                  "kubectl on PATH for protobuf request bodies", file=sys.stderr)


setup(cmdclass={"build_py": BuildPyWithGenerated})
