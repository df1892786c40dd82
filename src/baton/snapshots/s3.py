"""An S3-compatible blob store (AWS S3, MinIO, moto …) over plain HTTP with SigV4 signing.

``BATON_BLOB_URL=s3://BUCKET[/PREFIX][?endpoint=http://host:port&region=R]``; the credentials
come from baton's configuration environment (``BATON_S3_ACCESS_KEY_ID``,
``BATON_S3_SECRET_ACCESS_KEY``, else ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``) and are
never handed to agents (their environment is an allow-list). Path-style requests, one ``PUT``
per blob (archives are far below S3's 5 GB single-request limit), the blob's sha256 doubling as
the payload hash SigV4 needs.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import shutil
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from baton.errors import NotFoundError, UsageError
from baton.snapshots.blobs import digest_of

__all__ = ["S3BlobStore", "S3Location"]

_UNSIGNED_EMPTY: Final = hashlib.sha256(b"").hexdigest()
_CHUNK: Final = 1 << 20


@dataclass(frozen=True)
class S3Location:
    bucket: str
    prefix: str
    endpoint: str
    region: str

    @classmethod
    def parse(cls, url: str) -> S3Location:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme != "s3" or not parsed.netloc:
            raise UsageError("config_invalid", f"not an s3:// blob URL: {url!r}")
        query = dict(urllib.parse.parse_qsl(parsed.query))
        region = query.get("region", "us-east-1")
        endpoint = query.get("endpoint", f"https://s3.{region}.amazonaws.com").rstrip("/")
        return cls(parsed.netloc, parsed.path.strip("/"), endpoint, region)


class S3BlobStore:
    """Blobs as objects ``PREFIX/sha256/<hex>`` of a bucket."""

    def __init__(self, location: S3Location, access_key: str, secret_key: str, *, timeout: float = 60.0) -> None:
        self.location = location
        self._access_key = access_key
        self._secret_key = secret_key
        self._timeout = timeout

    @classmethod
    def from_url(cls, url: str, environ: Mapping[str, str]) -> S3BlobStore:
        access = environ.get("BATON_S3_ACCESS_KEY_ID") or environ.get("AWS_ACCESS_KEY_ID")
        secret = environ.get("BATON_S3_SECRET_ACCESS_KEY") or environ.get("AWS_SECRET_ACCESS_KEY")
        if not access or not secret:
            raise UsageError(
                "config_invalid", "an s3:// blob_url needs BATON_S3_ACCESS_KEY_ID and BATON_S3_SECRET_ACCESS_KEY"
            )
        return cls(S3Location.parse(url), access, secret)

    # -- the BlobStore protocol ------------------------------------------------------------------

    def put_file(self, path: Path) -> str:
        key = digest_of(path)
        if self.exists(key):
            return key
        payload_hash = key.partition(":")[2]
        with (
            path.open("rb") as body,
            self._request("PUT", self._object(key), body=body, size=path.stat().st_size, payload_hash=payload_hash),
        ):
            pass
        return key

    def fetch(self, key: str, destination: Path) -> None:
        try:
            with self._request("GET", self._object(key)) as response, destination.open("wb") as out:
                shutil.copyfileobj(response, out, _CHUNK)
        except urllib.error.HTTPError as exc:
            exc.close()
            if exc.code == 404:
                raise NotFoundError("snapshot_not_found", f"no blob {key} in s3://{self.location.bucket}") from exc
            raise
        if digest_of(destination) != key:
            destination.unlink(missing_ok=True)
            raise NotFoundError("snapshot_not_found", f"blob {key} in s3://{self.location.bucket} is damaged")

    def exists(self, key: str) -> bool:
        try:
            with self._request("HEAD", self._object(key)):
                return True
        except urllib.error.HTTPError as exc:
            exc.close()  # it holds the response's socket
            if exc.code == 404:
                return False
            raise

    def create_bucket(self) -> None:
        """Create the bucket (tests and first set-up); an existing one is fine."""
        body = b""
        if self.location.region != "us-east-1":
            body = (
                '<CreateBucketConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><LocationConstraint>'
                f"{self.location.region}</LocationConstraint></CreateBucketConfiguration>"
            ).encode()
        payload_hash = hashlib.sha256(body).hexdigest()
        try:
            with self._request("PUT", f"/{self.location.bucket}", body=body, size=len(body), payload_hash=payload_hash):
                pass
        except urllib.error.HTTPError as exc:
            exc.close()
            if exc.code != 409:
                raise

    # -- HTTP and SigV4 --------------------------------------------------------------------------

    def _object(self, key: str) -> str:
        algorithm, _, hexdigest = key.partition(":")
        if algorithm != "sha256" or len(hexdigest) != 64:
            raise UsageError("invalid_argument", f"not a blob key: {key!r}")
        parts = [self.location.bucket, *([self.location.prefix] if self.location.prefix else []), "sha256", hexdigest]
        return "/" + "/".join(urllib.parse.quote(part, safe="/") for part in parts)

    def _request(
        self, method: str, path: str, *, body: object = None, size: int = 0, payload_hash: str = _UNSIGNED_EMPTY
    ) -> urllib.request._UrlopenRet:
        url = self.location.endpoint + path
        host = urllib.parse.urlsplit(url).netloc
        now = datetime.datetime.now(datetime.UTC)
        amz_date = now.strftime("%Y%m%dT%H%M%SZ")
        headers = {"host": host, "x-amz-content-sha256": payload_hash, "x-amz-date": amz_date}
        if body is not None:
            headers["content-length"] = str(size)
        signed = ";".join(sorted(headers))
        canonical = "\n".join(
            [
                method,
                path,
                "",
                "".join(f"{name}:{headers[name]}\n" for name in sorted(headers)),
                signed,
                payload_hash,
            ]
        )
        scope = f"{amz_date[:8]}/{self.location.region}/s3/aws4_request"
        to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
        key = ("AWS4" + self._secret_key).encode()
        for part in (amz_date[:8], self.location.region, "s3", "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        headers["authorization"] = (
            f"AWS4-HMAC-SHA256 Credential={self._access_key}/{scope}, SignedHeaders={signed}, Signature={signature}"
        )
        del headers["host"]
        if body is not None:  # else urllib says form-urlencoded, and some servers parse the body away
            headers["content-type"] = "application/octet-stream"
        request = urllib.request.Request(url, data=body, method=method, headers=headers)  # type: ignore[arg-type]
        return urllib.request.urlopen(request, timeout=self._timeout)
