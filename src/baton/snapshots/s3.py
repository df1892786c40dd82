"""An S3-compatible blob store (AWS S3, MinIO, moto …) through boto3 (docs/snapshots.md).

``BATON_BLOB_URL=s3://BUCKET[/PREFIX][?endpoint=http://host:port&region=R]``; blobs are objects
``PREFIX/sha256/<hex>``. The credentials come from baton's own environment
(``BATON_S3_ACCESS_KEY_ID``/``BATON_S3_SECRET_ACCESS_KEY``/``BATON_S3_SESSION_TOKEN``, else
``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN``) and are handed to the
client explicitly, so botocore never searches ``~/.aws`` or instance metadata for others; agents
never see them (their environment is an allow-list).

- **put**: content-addressed, so a blob already there is not sent again. Below
  ``multipart_threshold`` one ``PutObject`` carrying ``x-amz-checksum-sha256`` = the key's own
  digest (S3 refuses bytes that do not hash to it); above, a multipart upload (s3transfer),
  each part with its SHA-256, aborted on failure: an object appears whole or not at all.
- **fetch**: one streaming ``GET`` into a temporary file beside the destination, hashed as it
  is written; a body cut short resumes with a ``Range`` request, bytes that do not hash to the
  key are read again from the start, and the file is renamed into place only once it matches.
- **retries**: botocore's ``standard`` mode (exponential backoff with jitter) on every request;
  fetch's own attempts on top for a body cut mid-way.

Errors, translated here and only here (:meth:`S3BlobStore._errors`):

    bad key                           UsageError    invalid_argument
    bad URL, bucket name, profile     UsageError    config_invalid
    credentials refused               StorageError  blob_store_denied
    bucket missing                    StorageError  blob_bucket_missing
    unreachable, 5xx, cut after all   StorageError  blob_store_unavailable
      retries
    any other S3 error                StorageError  blob_store_error
    no such blob, or damaged          NotFoundError snapshot_not_found
"""

# ruff: noqa: PTH105
# (os.replace on a mkstemp name)
from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import os
import random
import tempfile
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

import boto3
from boto3.s3.transfer import TransferConfig, create_transfer_manager
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    FlexibleChecksumError,
    HTTPClientError,
    IncompleteReadError,
    NoCredentialsError,
    ParamValidationError,
    PartialCredentialsError,
    ProfileNotFound,
)
from botocore.exceptions import (
    ConnectionError as BotoConnectionError,
)

from baton.errors import BatonError, NotFoundError, StorageError, UsageError
from baton.snapshots.blobs import _hex_of, digest_of

__all__ = ["S3BlobStore", "S3Location"]

_CHUNK: Final = 1 << 20
_MiB: Final = 1 << 20
# A body that does not hash to its key is read once more (it may have been damaged in transit).
_DAMAGED_READS: Final = 2
# S3's own names for a request whose credentials it does not accept.
_DENIED: Final = frozenset(
    {
        "AccessDenied",
        "AuthorizationHeaderMalformed",
        "ExpiredToken",
        "InvalidAccessKeyId",
        "InvalidClientTokenId",
        "InvalidToken",
        "SignatureDoesNotMatch",
        "TokenRefreshRequired",
    }
)
_UNAVAILABLE: Final = frozenset({"InternalError", "RequestTimeout", "ServiceUnavailable", "SlowDown", "Throttling"})


@dataclass(frozen=True)
class S3Location:
    bucket: str
    prefix: str
    endpoint: str | None  # None: AWS itself, the endpoint botocore resolves for the region
    region: str

    @classmethod
    def parse(cls, url: str) -> S3Location:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme != "s3" or not parsed.netloc:
            raise UsageError("config_invalid", f"not an s3:// blob URL: {url!r}")
        prefix = parsed.path.strip("/")
        if prefix and any(part in ("", ".", "..") for part in prefix.split("/")):
            raise UsageError("config_invalid", f"the prefix of blob URL {url!r} has an empty, '.' or '..' part")
        query = dict(urllib.parse.parse_qsl(parsed.query))
        endpoint = query.get("endpoint", "").rstrip("/") or None
        if endpoint is not None and urllib.parse.urlsplit(endpoint).scheme not in ("http", "https"):
            raise UsageError("config_invalid", f"the endpoint of blob URL {url!r} is not an http(s) URL")
        return cls(parsed.netloc, prefix, endpoint, query.get("region", "us-east-1"))

    def __str__(self) -> str:
        where = f"s3://{self.bucket}" + (f"/{self.prefix}" if self.prefix else "")
        return where + (f" at {self.endpoint}" if self.endpoint else "")


@dataclass(frozen=True)
class _Credentials:
    access_key: str
    secret_key: str = ""
    session_token: str | None = None

    def __repr__(self) -> str:  # never the secret, whatever prints it
        return f"_Credentials(access_key={self.access_key!r})"


class S3BlobStore:
    """Blobs as objects ``PREFIX/sha256/<hex>`` of a bucket."""

    def __init__(
        self,
        location: S3Location,
        access_key: str,
        secret_key: str,
        *,
        session_token: str | None = None,
        timeout: float = 60.0,
        max_attempts: int = 5,
        multipart_threshold: int = 32 * _MiB,
        part_size: int = 16 * _MiB,
        max_concurrency: int = 4,
    ) -> None:
        self.location = location
        self._credentials = _Credentials(access_key, secret_key, session_token)
        self._timeout = timeout
        self._max_attempts = max_attempts
        self._transfer = TransferConfig(
            multipart_threshold=multipart_threshold, multipart_chunksize=part_size, max_concurrency=max_concurrency
        )

    @classmethod
    def from_url(cls, url: str, environ: Mapping[str, str]) -> S3BlobStore:
        if environ.get("BATON_S3_ACCESS_KEY_ID") or environ.get("BATON_S3_SECRET_ACCESS_KEY"):
            access, secret = environ.get("BATON_S3_ACCESS_KEY_ID"), environ.get("BATON_S3_SECRET_ACCESS_KEY")
            token = environ.get("BATON_S3_SESSION_TOKEN")
        else:
            access, secret = environ.get("AWS_ACCESS_KEY_ID"), environ.get("AWS_SECRET_ACCESS_KEY")
            token = environ.get("AWS_SESSION_TOKEN")
        if not access or not secret:
            raise UsageError(
                "config_invalid",
                "an s3:// blob_url needs BATON_S3_ACCESS_KEY_ID and BATON_S3_SECRET_ACCESS_KEY "
                "(or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)",
            )
        return cls(S3Location.parse(url), access, secret, session_token=token or None)

    # -- the BlobStore protocol ------------------------------------------------------------------

    def put_file(self, path: Path) -> str:
        key = digest_of(path)
        if self.exists(key):
            return key
        name, size = self._object(key), path.stat().st_size
        with self._errors(f"store blob {key}"):
            if size < self._transfer.multipart_threshold:
                checksum = base64.b64encode(bytes.fromhex(_hex_of(key))).decode()
                with path.open("rb") as body:
                    self._client.put_object(
                        Bucket=self.location.bucket,
                        Key=name,
                        Body=body,
                        ContentLength=size,
                        ContentType="application/octet-stream",
                        ChecksumSHA256=checksum,
                    )
            else:
                extra = {"ChecksumAlgorithm": "SHA256", "ContentType": "application/octet-stream"}
                with create_transfer_manager(self._client, self._transfer) as manager:
                    manager.upload(str(path), self.location.bucket, name, extra_args=extra).result()
        return key

    def fetch(self, key: str, destination: Path) -> None:
        name = self._object(key)
        descriptor, temporary = tempfile.mkstemp(dir=destination.parent, prefix=f".{destination.name}.incoming-")
        try:
            with os.fdopen(descriptor, "wb") as out:
                self._download(key, name, out)
            os.replace(temporary, destination)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    def exists(self, key: str) -> bool:
        name = self._object(key)
        with self._errors(f"look up blob {key}"):
            try:
                self._client.head_object(Bucket=self.location.bucket, Key=name)
            except ClientError as exc:
                if _status(exc) == 404:  # a HEAD has no body: a missing bucket shows at put or fetch
                    return False
                raise
        return True

    def create_bucket(self) -> None:
        """Create the bucket (tests and first set-up); an existing one is fine."""
        configuration = {}
        if self.location.region != "us-east-1":
            configuration = {"CreateBucketConfiguration": {"LocationConstraint": self.location.region}}
        with self._errors("create the bucket"):
            try:
                self._client.create_bucket(Bucket=self.location.bucket, **configuration)
            except ClientError as exc:
                if _code(exc) not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                    raise

    # -- the client, the body of a GET, and the one door to botocore's errors ----------------------

    @property
    def _client(self) -> Any:
        return _client_for(
            self.location.endpoint, self.location.region, self._credentials, self._timeout, self._max_attempts
        )

    def _object(self, key: str) -> str:
        """The object name of ``key``, which must be ``sha256:`` and 64 lowercase hex digits."""
        hexdigest = _hex_of(key)  # refuses anything else: no '/', '..' or other bytes reach a name
        return "/".join([*([self.location.prefix] if self.location.prefix else []), "sha256", hexdigest])

    def _download(self, key: str, name: str, out: IO[bytes]) -> None:
        """Stream the object into ``out`` until its bytes hash to ``key``; resume a body cut short."""
        expected, digest, written = _hex_of(key), hashlib.sha256(), 0
        cut: Exception | None = None
        damaged = 0
        for attempt in range(self._max_attempts):
            if attempt:
                time.sleep(min(2.0, 0.1 * 2**attempt) * random.uniform(0.5, 1.0))
            with self._errors(f"read blob {key}"):
                try:
                    ranged = {"Range": f"bytes={written}-"} if written else {}
                    response = self._client.get_object(Bucket=self.location.bucket, Key=name, **ranged)
                except ClientError as exc:
                    if _code(exc) in ("NoSuchKey", "404"):
                        raise NotFoundError("snapshot_not_found", f"no blob {key} in {self.location}") from exc
                    raise
            if written and not response.get("ContentRange"):  # the whole object again: start over
                out.seek(0)
                out.truncate()
                digest, written = hashlib.sha256(), 0
            try:
                with contextlib.closing(response["Body"]) as body:
                    for chunk in body.iter_chunks(_CHUNK):
                        out.write(chunk)
                        digest.update(chunk)
                        written += len(chunk)
            except (HTTPClientError, IncompleteReadError) as exc:  # cut short: the next GET asks for the rest
                cut = exc
                if digest.hexdigest() != expected:
                    continue
            except FlexibleChecksumError:  # the object's stored checksum did not match either
                pass
            if digest.hexdigest() == expected:
                return
            damaged += 1
            if damaged == _DAMAGED_READS:
                raise NotFoundError(
                    "snapshot_not_found",
                    f"blob {key} in {self.location} is damaged: its bytes do not hash to its key ({damaged} reads)",
                )
            out.seek(0)
            out.truncate()
            digest, written = hashlib.sha256(), 0
        raise StorageError(
            "blob_store_unavailable",
            f"could not read blob {key} in {self.location}: cut off {self._max_attempts} times (last: {cut})",
        ) from cut

    @contextlib.contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        try:
            yield
        except BatonError:
            raise
        except (BotoCoreError, ClientError) as exc:
            raise _translated(exc, f"could not {action} in {self.location}") from exc


def _translated(exc: BotoCoreError | ClientError, context: str) -> BatonError:
    """The BatonError for a botocore exception (the most specific match wins)."""
    if isinstance(exc, ClientError):
        code, status = _code(exc), _status(exc)
        said = f"{context}: S3 said {code}: {exc.response.get('Error', {}).get('Message') or 'no message'}"
        details = {"s3_code": code, "http_status": status}
        if code in _DENIED or status == 403:
            return StorageError(
                "blob_store_denied",
                f"{said} (check BATON_S3_ACCESS_KEY_ID and BATON_S3_SECRET_ACCESS_KEY and what they may do)",
                details=details,
            )
        if code == "NoSuchBucket":
            return StorageError("blob_bucket_missing", f"{said} (create the bucket first)", details=details)
        if code in _UNAVAILABLE or (status is not None and status >= 500):
            return StorageError("blob_store_unavailable", f"{said} (after retries)", details=details)
        return StorageError("blob_store_error", said, details=details)
    if isinstance(exc, BotoConnectionError | HTTPClientError | IncompleteReadError):  # refused, reset, timed out
        return StorageError("blob_store_unavailable", f"{context}: {exc} (after retries)")
    if isinstance(exc, ParamValidationError | ProfileNotFound | NoCredentialsError | PartialCredentialsError):
        return UsageError("config_invalid", f"{context}: {exc}")
    return StorageError("blob_store_error", f"{context}: {exc}")


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _status(exc: ClientError) -> int | None:
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return status if isinstance(status, int) else None


@functools.lru_cache(maxsize=16)
def _client_for(endpoint: str | None, region: str, credentials: _Credentials, timeout: float, attempts: int) -> Any:
    """One boto3 client per store configuration and process (clients are thread-safe; ~0.1 s to make)."""
    session = boto3.session.Session(
        aws_access_key_id=credentials.access_key,
        aws_secret_access_key=credentials.secret_key,
        aws_session_token=credentials.session_token,
        region_name=region,
    )
    config = Config(
        s3={"addressing_style": "path" if endpoint else "auto"},
        retries={"mode": "standard", "max_attempts": attempts},
        connect_timeout=min(timeout, 10.0),
        read_timeout=timeout,
        signature_version="s3v4",
    )
    return session.client("s3", endpoint_url=endpoint, config=config)
