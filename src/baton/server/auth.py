"""Who is calling: RS256 JWTs against configured public keys, or the local token.

With keys configured (``BATON_JWT_PUBLIC_KEYS``: PEM or JWKS files), every request carries
``Authorization: Bearer <JWT>`` signed RS256 by one of them: ``kid`` picks the key (a PEM
file's key is named by the file's stem; with a single key ``kid`` is optional), ``aud`` must
be the configured audience, ``iss`` the configured issuer when one is set, ``exp`` and
``sub`` are required. Without keys the server is loopback-only and the bearer is the random
local token in ``BATON_HOME/api-token`` (0600), which grants every scope to ``sub`` ``local``.

Each failure is an :class:`~baton.errors.AuthError` with its own code.
"""

from __future__ import annotations

import abc
import hmac
import json
import os
import secrets
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import jwt
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from baton.errors import AuthError, UsageError

__all__ = [
    "ALL_SCOPES",
    "Authenticator",
    "JwtAuthenticator",
    "LocalTokenAuthenticator",
    "Principal",
    "ensure_local_token",
    "load_public_keys",
]

ALL_SCOPES: Final = frozenset({"runs:read", "runs:write", "gates:decide", "admin", "metrics:read"})
_ALGORITHM: Final = "RS256"
_CACHE_SIZE: Final = 4096


@dataclass(frozen=True)
class Principal:
    """The caller: its ``sub``, its scopes, and the one run (or task) it is limited to, if any."""

    sub: str
    scopes: frozenset[str]
    run_id: str | None = None
    task_id: str | None = None

    @property
    def is_admin(self) -> bool:
        return "admin" in self.scopes

    def require(self, scope: str) -> None:
        if scope not in self.scopes:
            raise AuthError("scope_missing", f"this needs the scope {scope!r}")

    def may_see(self, run_id: str, owner: str | None, task_id: str | None = None) -> bool:
        """A run: the caller's own (any for admin), and the one its token names, if it names one."""
        if self.run_id is not None and self.run_id != run_id:
            return False
        if self.task_id is not None and self.task_id != task_id:
            return False
        return self.is_admin or (owner is not None and owner == self.sub)

    def may_see_task(self, task_id: str, owner: str | None) -> bool:
        if self.task_id is not None and self.task_id != task_id:
            return False
        if self.run_id is not None:  # a token for one run reads no task through this door
            return False
        return self.is_admin or (owner is not None and owner == self.sub)


class Authenticator(abc.ABC):
    """Turns an ``Authorization`` header into the caller's :class:`Principal` (or ``AuthError``)."""

    @abc.abstractmethod
    def authenticate(self, authorization: str | None) -> Principal: ...


def _bearer(authorization: str | None) -> str:
    if not authorization:
        raise AuthError("token_missing", "send Authorization: Bearer <token>")
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise AuthError("token_missing", "send Authorization: Bearer <token>")
    return token


class LocalTokenAuthenticator(Authenticator):
    """The one random token of a loopback-only server."""

    def __init__(self, token: str) -> None:
        self._token = token.encode()
        self._principal = Principal(sub="local", scopes=ALL_SCOPES)

    def authenticate(self, authorization: str | None) -> Principal:
        if not hmac.compare_digest(_bearer(authorization).encode(), self._token):
            raise AuthError("token_invalid", "not this server's local token (see `baton token`)")
        return self._principal


class JwtAuthenticator(Authenticator):
    def __init__(
        self,
        keys: dict[str | None, RSAPublicKey],
        *,
        audience: str,
        issuer: str | None = None,
        leeway: float = 10.0,
    ) -> None:
        if not keys:
            raise UsageError("config_invalid", "no JWT public keys")
        self._keys = keys
        self._only = next(iter(keys.values())) if len(keys) == 1 else None
        self._audience = audience
        self._issuer = issuer
        self._leeway = leeway
        self._jwt = jwt.PyJWT(options={"require": ["exp", "sub"]})
        # Verified tokens (a client sends the same one on every request): only the time
        # claims are checked again on a hit. ~1 µs instead of ~100 µs for parse + RS256.
        self._verified: OrderedDict[str, tuple[Principal, float, float | None]] = OrderedDict()

    def authenticate(self, authorization: str | None) -> Principal:
        token = _bearer(authorization)
        hit = self._verified.get(token)
        if hit is not None:
            principal, expires, not_before = hit
            now = time.time()
            if now > expires + self._leeway:
                del self._verified[token]
                raise AuthError("token_expired", "the token has expired")
            if not_before is not None and now < not_before - self._leeway:
                raise AuthError("token_not_yet_valid", "the token is not valid yet")
            self._verified.move_to_end(token)
            return principal
        principal, claims = self._verify(token)
        expires = claims["exp"]
        not_before = claims.get("nbf")
        if isinstance(expires, int | float) and (not_before is None or isinstance(not_before, int | float)):
            self._verified[token] = (principal, float(expires), None if not_before is None else float(not_before))
            if len(self._verified) > _CACHE_SIZE:
                self._verified.popitem(last=False)
        return principal

    def _verify(self, token: str) -> tuple[Principal, dict[str, Any]]:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.DecodeError as exc:
            raise AuthError("token_invalid", f"malformed token: {exc}") from exc
        if header.get("alg") != _ALGORITHM:
            raise AuthError("token_algorithm", f"only {_ALGORITHM} tokens are accepted, not {header.get('alg')!r}")
        key = self._key_for(header.get("kid"))
        try:
            claims = self._jwt.decode(
                token,
                key,
                algorithms=[_ALGORITHM],
                audience=self._audience,
                issuer=self._issuer,
                leeway=self._leeway,
            )
        except jwt.ExpiredSignatureError as exc:
            raise AuthError("token_expired", "the token has expired") from exc
        except jwt.ImmatureSignatureError as exc:
            raise AuthError("token_not_yet_valid", "the token is not valid yet") from exc
        except (jwt.InvalidAudienceError, jwt.MissingRequiredClaimError) as exc:
            if isinstance(exc, jwt.InvalidAudienceError) or exc.claim == "aud":
                raise AuthError("token_audience", f"the token is not for audience {self._audience!r}") from exc
            raise AuthError("token_invalid", f"the token has no {exc.claim!r} claim") from exc
        except jwt.InvalidIssuerError as exc:
            raise AuthError("token_invalid", "the token's issuer is not the configured one") from exc
        except jwt.InvalidTokenError as exc:
            raise AuthError("token_invalid", f"invalid token: {exc}") from exc
        return _principal(claims), claims

    def _key_for(self, kid: Any) -> RSAPublicKey:
        if kid is None:
            if self._only is None:
                raise AuthError("token_kid", "the token names no key (kid) and several keys are configured")
            return self._only
        key = self._keys.get(str(kid))
        if key is None:
            raise AuthError("token_kid", f"no configured key has kid {kid!r}")
        return key


def _principal(claims: dict[str, Any]) -> Principal:
    sub = claims.get("sub")
    if not isinstance(sub, str) or not sub:
        raise AuthError("token_invalid", "the token's sub must be a non-empty string")
    raw = claims.get("scope", "")
    if isinstance(raw, str):
        scopes = frozenset(raw.split())
    elif isinstance(raw, list) and all(isinstance(item, str) for item in raw):
        scopes = frozenset(raw)
    else:
        raise AuthError("token_invalid", "the token's scope must be a space-separated string")
    restricted: dict[str, str | None] = {}
    for claim in ("run_id", "task_id"):
        value = claims.get(claim)
        if value is not None and not isinstance(value, str):
            raise AuthError("token_invalid", f"the token's {claim} must be a string")
        restricted[claim] = value
    return Principal(sub=sub, scopes=scopes, run_id=restricted["run_id"], task_id=restricted["task_id"])


def load_public_keys(paths: Iterable[Path]) -> dict[str | None, RSAPublicKey]:
    """Keys by ``kid`` from PEM files (kid: the file's stem) and JWKS files (``.json``)."""
    keys: dict[str | None, RSAPublicKey] = {}
    for path in paths:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise UsageError("config_invalid", f"cannot read JWT key file {path}: {exc}") from exc
        found = _jwks_keys(path, data) if data.lstrip().startswith(b"{") else {path.stem: _pem_key(path, data)}
        for kid, key in found.items():
            if kid in keys:
                raise UsageError("config_invalid", f"two JWT keys have kid {kid!r}")
            keys[kid] = key
    return keys


def _pem_key(path: Path, data: bytes) -> RSAPublicKey:
    try:
        key = load_pem_public_key(data)
    except ValueError as exc:
        raise UsageError("config_invalid", f"{path} is not a PEM public key: {exc}") from exc
    if not isinstance(key, RSAPublicKey):
        raise UsageError("config_invalid", f"{path}: only RSA keys are accepted (RS256)")
    return key


def _jwks_keys(path: Path, data: bytes) -> dict[str | None, RSAPublicKey]:
    try:
        document = json.loads(data)
        entries = document["keys"]
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError("config_invalid", f"{path} is not a JWKS document ({{'keys': [...]}})") from exc
    keys: dict[str | None, RSAPublicKey] = {}
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("kty") != "RSA":
            continue
        try:
            key = jwt.PyJWK(entry, algorithm=_ALGORITHM).key
        except jwt.PyJWKError as exc:
            raise UsageError("config_invalid", f"{path}: bad key {entry.get('kid')!r}: {exc}") from exc
        if not isinstance(key, RSAPublicKey):
            raise UsageError("config_invalid", f"{path}: key {entry.get('kid')!r} is not an RSA public key")
        keys[entry.get("kid")] = key
    if not keys:
        raise UsageError("config_invalid", f"{path} holds no RSA key")
    return keys


def ensure_local_token(path: Path) -> str:
    """The local API token at ``path``, created (random, mode 0600) when missing."""
    try:
        return _read_token(path)
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    token = "baton-local-" + secrets.token_urlsafe(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first
        return _read_token(path)
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
    return token


def _read_token(path: Path) -> str:
    token = path.read_text().strip()
    if path.stat().st_mode & 0o077:
        raise UsageError("config_invalid", f"{path} must be readable by its owner only (chmod 600)")
    if len(token) < 16:
        raise UsageError("config_invalid", f"{path} holds no usable token; delete it to make a new one")
    return token
