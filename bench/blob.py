"""The S3 blob store moving a 50 MB snapshot archive to and from moto's server on loopback.

The entry points production uses: :meth:`S3BlobStore.put_file` (the archive's sha256, a
``HEAD``, then a multipart upload in 16 MiB parts, 4 at a time, since 50 MB is above the 32 MiB
threshold) and :meth:`S3BlobStore.fetch` (a streaming ``GET`` hashed as it is written, renamed
into place). ``blob_put_single_mb_s`` raises the threshold so the same archive goes up in one
``PutObject``, as the hand-written client did. Medians of 5 rounds after a warm-up; each
round's put sends a fresh archive (a blob already stored is not sent again). ``_cpu_ms``: this
process's CPU time per archive (the client's share: hashing, signing, copying).

The server is moto's (``baton.testing.s3``, signatures checked), a Python process sharing the
machine's two cores with the client: these figures measure the client plus that server, and
real S3 or MinIO would move faster. References: the hand-written SigV4 client over ``urllib``
that boto3 replaced, measured on the same machine against the same server (2026-12-02).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from baton.snapshots.s3 import S3BlobStore, S3Location
from baton.testing.s3 import TemporaryS3

from . import Metric

__all__ = ["METRICS", "run"]

METRICS = ("blob_put_mb_s", "blob_put_single_mb_s", "blob_get_mb_s", "blob_put_cpu_ms", "blob_get_cpu_ms")
SIZE = 50 * (1 << 20)
RUNS = 5
# The hand-written client (SigV4 over urllib, one PUT), same machine and server, 2026-12-02:
# medians of its 5–8 runs at load 2–8 (the wall-clock figures moved by 2–4× between runs).
REFERENCE_PUT_MB_S = 62.0
REFERENCE_GET_MB_S = 280.0
REFERENCE_PUT_CPU_MS = 63.0
REFERENCE_GET_CPU_MS = 57.0


def _rate(prepare: Callable[[int], Path], work: Callable[[Path], object]) -> tuple[float, float]:
    """The median MB/s of ``RUNS`` rounds of ``work`` after a warm-up, and its median CPU ms
    in this process (its threads included: the client's share, which the server's load and the
    neighbours' disturb much less than the wall clock)."""
    seconds, cpu = [], []
    for round_ in range(RUNS + 1):
        argument = prepare(round_)
        start, start_cpu = time.perf_counter(), time.process_time()
        work(argument)
        if round_:
            seconds.append(time.perf_counter() - start)
            cpu.append((time.process_time() - start_cpu) * 1000)
    return SIZE / (1 << 20) / statistics.median(seconds), statistics.median(cpu)


def _metric(value: float, unit: str, target: float, reference: float) -> Metric:
    if unit == "MB/s":
        return {"value": round(value, 1), "unit": unit, "target": target, "better": "higher", "reference": reference}
    return {"value": round(value, 1), "unit": unit, "target": target, "better": "lower", "reference": reference}


def run() -> dict[str, Metric]:
    with tempfile.TemporaryDirectory(prefix="baton-bench-blob-") as tmp, TemporaryS3() as s3:
        root = Path(tmp)
        location = S3Location.parse(s3.blob_url("baton-bench"))
        store = S3BlobStore(location, s3.access_key, s3.secret_key)
        single = S3BlobStore(location, s3.access_key, s3.secret_key, multipart_threshold=2 * SIZE)
        store.create_bucket()

        def archive(round_: int) -> Path:
            path = root / "archive.bin"
            path.write_bytes(os.urandom(SIZE))
            return path

        put = _rate(archive, store.put_file)
        put_single = _rate(archive, single.put_file)
        key = store.put_file(archive(0))

        def destination(round_: int) -> Path:
            (root / "fetched.bin").unlink(missing_ok=True)
            return root / "fetched.bin"

        get = _rate(destination, lambda path: store.fetch(key, path))
    return {
        "blob_put_mb_s": _metric(put[0], "MB/s", 40, REFERENCE_PUT_MB_S),
        "blob_put_single_mb_s": _metric(put_single[0], "MB/s", 50, REFERENCE_PUT_MB_S),
        "blob_get_mb_s": _metric(get[0], "MB/s", 200, REFERENCE_GET_MB_S),
        "blob_put_cpu_ms": _metric(put[1], "ms", 250, REFERENCE_PUT_CPU_MS),
        "blob_get_cpu_ms": _metric(get[1], "ms", 120, REFERENCE_GET_CPU_MS),
    }
