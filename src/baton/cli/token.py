"""``baton token``: print the local API token, or mint an RS256 JWT with ``--key``."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Annotated

import typer

from baton.cli._app import app
from baton.cli._errors import report_error
from baton.config import Settings
from baton.errors import BatonError, UsageError

__all__ = ["token_command"]

_TTL = re.compile(r"^(\d+)([smhd]?)$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def ttl_seconds(text: str) -> int:
    match = _TTL.match(text.strip())
    if not match or int(match.group(1)) <= 0:
        raise UsageError("invalid_argument", f"--ttl {text!r}: use e.g. 3600, 30m, 1h, 7d")
    return int(match.group(1)) * _UNITS[match.group(2)]


@app.command("token")
def token_command(
    key: Annotated[
        Path | None, typer.Option("--key", help="RSA private key (PEM): mint a JWT, not the local token.")
    ] = None,
    sub: Annotated[str | None, typer.Option("--sub", help="Whose token: runs created with it belong to SUB.")] = None,
    scope: Annotated[str, typer.Option("--scope", help="Space-separated scopes.")] = "runs:read runs:write",
    run: Annotated[str | None, typer.Option("--run", help="Limit the token to this run.")] = None,
    ttl: Annotated[str, typer.Option("--ttl", help="Lifetime: 3600, 30m, 1h, 7d.")] = "1h",
    audience: Annotated[str | None, typer.Option("--audience", help="aud (default: the server's).")] = None,
    issuer: Annotated[str | None, typer.Option("--issuer", help="iss (default: the server's, if any).")] = None,
    kid: Annotated[str | None, typer.Option("--kid", help="kid header (default: the key file's stem).")] = None,
) -> None:
    """Print the token a client sends as ``Authorization: Bearer …``."""
    from baton.server.auth import ensure_local_token
    from baton.server.config import ServerConfig

    try:
        settings = Settings.load()
        config = ServerConfig.load(settings)
        if key is None:
            typer.echo(ensure_local_token(config.local_token_path(settings)))
            return
        if not sub:
            raise UsageError("invalid_argument", "--sub is required with --key")
        typer.echo(
            mint_token(
                key,
                sub=sub,
                scope=scope,
                run_id=run,
                ttl=ttl_seconds(ttl),
                audience=audience or config.jwt_audience,
                issuer=issuer or config.jwt_issuer,
                kid=kid or key.stem,
            )
        )
    except BatonError as exc:
        raise typer.Exit(report_error(exc, False)) from None


def mint_token(
    key_path: Path,
    *,
    sub: str,
    scope: str,
    run_id: str | None,
    ttl: int,
    audience: str,
    issuer: str | None,
    kid: str | None,
) -> str:
    import jwt
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        private_key = load_pem_private_key(key_path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise UsageError("invalid_argument", f"--key {key_path}: not a readable unencrypted PEM private key") from exc
    now = int(time.time())
    claims: dict[str, object] = {"sub": sub, "scope": scope, "aud": audience, "iat": now, "exp": now + ttl}
    if issuer:
        claims["iss"] = issuer
    if run_id:
        claims["run_id"] = run_id
    try:
        return jwt.encode(claims, private_key, algorithm="RS256", headers={"kid": kid} if kid else None)  # type: ignore[arg-type]
    except (TypeError, ValueError, jwt.PyJWTError) as exc:
        raise UsageError("invalid_argument", f"--key {key_path}: cannot sign RS256 with it: {exc}") from exc
