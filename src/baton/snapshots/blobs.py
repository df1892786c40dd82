"""Content-addressed blob storage for snapshot archives.

A blob's key is ``sha256:<hex>`` of its bytes, so storing the same archive twice stores it
once, and a blob read back can be checked against its key. ``LocalBlobStore`` keeps blobs in
a folder (``BATON_HOME/blobs`` by default) as ``sha256/ab/cdef…``, written to a temporary
file and renamed into place, so a reader never sees half a blob.
"""

# ruff: noqa: PTH105
# (os.replace on a mkstemp name)
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Final, Protocol

from baton.errors import NotFoundError, UsageError

__all__ = ["BlobStore", "LocalBlobStore", "blob_store_for", "digest_of"]

_CHUNK: Final = 1 << 20


class BlobStore(Protocol):
    def put_file(self, path: Path) -> str:
        """Store the file's bytes; returns their key ``sha256:<hex>``."""
        ...

    def fetch(self, key: str, destination: Path) -> None:
        """Write the blob to ``destination`` (checked against its key)."""
        ...

    def exists(self, key: str) -> bool: ...


def digest_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()


def _hex_of(key: str) -> str:
    algorithm, _, hexdigest = key.partition(":")
    if algorithm != "sha256" or len(hexdigest) != 64 or any(c not in "0123456789abcdef" for c in hexdigest):
        raise UsageError("invalid_argument", f"not a blob key: {key!r}")
    return hexdigest


class LocalBlobStore:
    """Blobs in a local folder."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path_of(self, key: str) -> Path:
        hexdigest = _hex_of(key)
        return self.root / "sha256" / hexdigest[:2] / hexdigest[2:]

    def put_file(self, path: Path) -> str:
        key = digest_of(path)
        target = self.path_of(key)
        if target.is_file():
            return key
        target.parent.mkdir(parents=True, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(dir=target.parent, prefix=".incoming-")
        try:
            with os.fdopen(descriptor, "wb") as out, path.open("rb") as source:
                shutil.copyfileobj(source, out, _CHUNK)
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        return key

    def fetch(self, key: str, destination: Path) -> None:
        source = self.path_of(key)
        if not source.is_file():
            raise NotFoundError("snapshot_not_found", f"no blob {key} in {self.root}")
        shutil.copyfile(source, destination)
        if digest_of(destination) != key:
            destination.unlink(missing_ok=True)
            raise NotFoundError("snapshot_not_found", f"blob {key} in {self.root} is damaged")

    def exists(self, key: str) -> bool:
        return self.path_of(key).is_file()


def blob_store_for(url: str | None, home: Path, environ: Mapping[str, str] | None = None) -> BlobStore:
    """The store a ``blob_url`` names (default: ``BATON_BLOB_URL``): unset → ``BATON_HOME/blobs``,
    ``file://DIR``, or ``s3://BUCKET[/PREFIX]?endpoint=…&region=…`` (see :mod:`baton.snapshots.s3`)."""
    env = os.environ if environ is None else environ
    url = url or env.get("BATON_BLOB_URL")
    if not url:
        return LocalBlobStore(home / "blobs")
    if url.startswith("file://"):
        return LocalBlobStore(Path(url[len("file://") :]))
    if url.startswith("s3://"):
        from baton.snapshots.s3 import S3BlobStore

        return S3BlobStore.from_url(url, env)
    raise UsageError("config_invalid", f"unsupported blob_url {url!r} (file:// or s3://)")
