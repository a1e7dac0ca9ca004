"""The log backend: ``--audit-log-path`` as JSON lines (or kube's legacy one-line text), with
``--audit-log-maxsize/-maxbackup/-maxage/-compress`` rotation named as kube's (lumberjack) names it.

kube-apiserver writes through lumberjack: a file past ``maxsize`` MB (100 when 0) is renamed to
``<name>-<UTC time 2006-01-02T15-04-05.000><ext>`` and a new one started; old backups beyond
``maxbackup`` or older than ``maxage`` days are removed, others gzipped with ``compress``. This
module does the same in the sink's writer thread (never on the event loop). ``-`` is stdout.
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from genericapi.apimachinery import deepjson

from .event import legacy_line

MEGABYTE = 1024 * 1024
#: lumberjack's size when MaxSize is 0.
DEFAULT_MAX_SIZE_MB = 100
BACKUP_TIME_FORMAT = "%Y-%m-%dT%H-%M-%S"
FORMATS = ("json", "legacy")


def backup_name(path: Path, when: float) -> Path:
    """lumberjack's ``backupName``: ``<dir>/<stem>-<time><ext>``, UTC, milliseconds."""
    moment = datetime.fromtimestamp(when, UTC)
    stamp = f"{moment.strftime(BACKUP_TIME_FORMAT)}.{moment.microsecond // 1000:03d}"
    return path.with_name(f"{path.stem}-{stamp}{path.suffix}")


class RotatingFile:
    """lumberjack.Logger: append to ``path``, rotating by size and pruning backups."""

    def __init__(self, path: str, max_size_mb: int = 0, max_backups: int = 0, max_age_days: int = 0,
                 compress: bool = False) -> None:
        self.path = Path(path)
        self.max_bytes = (max_size_mb or DEFAULT_MAX_SIZE_MB) * MEGABYTE
        self.max_backups = max_backups
        self.max_age_days = max_age_days
        self.compress = compress
        self._file: IO[bytes] | None = None
        self._size = 0

    def write(self, data: bytes) -> None:
        if len(data) > self.max_bytes:
            raise OSError(f"write length {len(data)} exceeds maximum file size {self.max_bytes}")
        if self._file is None:
            self._open_existing_or_new(len(data))
        elif self._size + len(data) > self.max_bytes:
            self.rotate()
        assert self._file is not None
        self._file.write(data)
        self._file.flush()
        self._size += len(data)

    def _open_existing_or_new(self, incoming: int) -> None:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            self._open_new()
            return
        if size + incoming >= self.max_bytes:
            self.rotate()
            return
        self._file = open(self.path, "ab")
        self._size = size

    def _open_new(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        mode = 0o600
        if self.path.exists():
            mode = self.path.stat().st_mode & 0o777
            os.replace(self.path, backup_name(self.path, time.time()))
        fd = os.open(self.path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, mode)
        self._file = os.fdopen(fd, "wb")
        self._size = 0

    def rotate(self) -> None:
        self.close()
        self._open_new()
        self._mill()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def backups(self) -> list[tuple[float, Path]]:
        """Old log files, newest first, by the time in their names."""
        pattern = re.compile(re.escape(self.path.stem) + r"-(\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d\.\d{3})"
                             + re.escape(self.path.suffix) + r"(\.gz)?$")
        out = []
        for entry in self.path.parent.iterdir():
            m = pattern.match(entry.name)
            if m:
                stamp = datetime.strptime(m.group(1)[:-4], BACKUP_TIME_FORMAT).replace(tzinfo=UTC)
                out.append((stamp.timestamp() + int(m.group(1)[-3:]) / 1000, entry))
        out.sort(key=lambda t: t[0], reverse=True)
        return out

    def _mill(self) -> None:
        """lumberjack's millRunOnce: drop backups past maxbackup / maxage, compress the rest."""
        files = self.backups()
        remove: list[Path] = []
        if self.max_backups > 0:
            kept: set[str] = set()
            keep_files = []
            for stamp, f in files:
                base = f.name.removesuffix(".gz")
                if base in kept or len(kept) < self.max_backups:
                    kept.add(base)
                    keep_files.append((stamp, f))
                else:
                    remove.append(f)
            files = keep_files
        if self.max_age_days > 0:
            cutoff = time.time() - self.max_age_days * 86400
            remove.extend(f for stamp, f in files if stamp < cutoff)
            files = [(s, f) for s, f in files if s >= cutoff]
        for f in remove:
            f.unlink(missing_ok=True)
        if self.compress:
            for _, f in files:
                if f.suffix != ".gz" and not f.with_name(f.name + ".gz").exists():
                    with open(f, "rb") as src, gzip.open(f.with_name(f.name + ".gz"), "wb") as dst:
                        shutil.copyfileobj(src, dst)
                    f.unlink()


class LogBackend:
    """Events as lines on a file (rotated) or stdout."""

    name = "log"

    def __init__(self, path: str, fmt: str = "json", max_size_mb: int = 0, max_backups: int = 0,
                 max_age_days: int = 0, compress: bool = False) -> None:
        if fmt not in FORMATS:
            raise ValueError(f"invalid audit log format {fmt}, allowed formats are \"{','.join(FORMATS)}\"")
        self.format = fmt
        self.stdout = path == "-"
        self.file = None if self.stdout else RotatingFile(path, max_size_mb, max_backups, max_age_days, compress)

    def write(self, docs: Sequence[dict[str, Any]]) -> None:
        if self.format == "json":
            data = b"".join(deepjson.dumps(d) + b"\n" for d in docs)
        else:
            data = "".join(legacy_line(d) + "\n" for d in docs).encode()
        if self.file is None:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
            return
        if len(data) <= self.file.max_bytes:
            self.file.write(data)
            return
        for d in docs:  # a batch bigger than one file: line by line, so rotation splits it
            self.file.write(deepjson.dumps(d) + b"\n" if self.format == "json" else (legacy_line(d) + "\n").encode())

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
