"""The one error tree of baton.

Every error a user can see carries a stable ``code`` (docs/design.md "Error codes") that the CLI,
the HTTP server and the Python API print as-is. Foreign exceptions are translated at the edge
where a library is called (``raise BatonX(...) from exc``).

    BatonError (code)
    ├── UsageError            invalid_argument, config_invalid, request_invalid, cassette_invalid,
    │                         webhook_url_invalid, webhook_secret_invalid, webhook_event_unknown,
    │                         invalid_labels, invalid_priority
    ├── RefusedError          model_credentials_missing, bypass_refused_as_root,
    │                         mode_not_enforceable, budget_not_supported, workspace_busy,
    │                         repository_not_allowed, workspace_dirty, run_active,
    │                         run_not_running, run_not_interactive, run_paused, run_ended,
    │                         run_not_resumable, run_exists, base_commit_missing,
    │                         rate_limited, body_too_large, headers_too_large, sse_limit,
    │                         net_not_allowed,
    │                         sandbox_unavailable, invalid_transition, branch_exists,
    │                         merge_conflict, push_failed, branch_not_merged,
    │                         run_not_recorded, output_exists, cassette_exhausted,
│                         fleet_requires_postgres
    ├── NotFoundError         run_not_found, task_not_found, gate_not_found, snapshot_not_found,
    │                         session_not_found, branch_not_found
    ├── AgentError            agent_not_installed, agent_start_timeout, agent_exited, agent_error,
    │                         budget_exhausted, replay_mismatch, sandbox_network_failed
    ├── GateError             gate_not_pending, gate_kind_mismatch, gate_not_resumable,
    │                         gate_ambiguous, approval_binding_mismatch, answer_invalid,
    │                         plan_edit_invalid, edit_not_supported
    ├── WorkspaceError        path_outside_workspace, archive_unsafe_entry, archive_too_large,
    │                         archive_corrupt, archive_version_unsupported, workspace_failed,
    │                         ref_not_found, clone_failed, workspace_setup_failed
    ├── AuthError             token_missing, token_invalid, token_expired, token_not_yet_valid,
    │                         token_audience, token_algorithm, token_kid, scope_missing,
    │                         session_expired, csrf_failed
    ├── UpstreamError         upstream_unreachable, upstream_tls, upstream_failed
    └── StorageError          storage_unavailable, storage_busy, storage_conflict, storage_error,
                              log_write_failed (baton.store.storage_errors maps the database's),
                              blob_store_denied, blob_bucket_missing, blob_store_unavailable,
                              blob_store_error (baton.snapshots.s3 maps the S3 client's)
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "CODES",
    "AgentError",
    "AuthError",
    "BatonError",
    "GateError",
    "NotFoundError",
    "RefusedError",
    "StorageError",
    "UpstreamError",
    "UsageError",
    "WorkspaceError",
    "error_class",
]


class BatonError(Exception):
    """Root of every error baton reports; ``code`` is stable and machine-readable."""

    family_codes: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, code: str, message: str, *, details: dict[str, Any] | None = None) -> None:
        if code not in CODES:
            raise ValueError(f"unknown error code {code!r}")
        if self.family_codes and code not in self.family_codes:
            raise ValueError(f"{code!r} does not belong to {type(self).__name__}")
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details or {}

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            body["details"] = self.details
        return body

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class UsageError(BatonError):
    family_codes = frozenset(
        {
            "invalid_argument",
            "config_invalid",
            "request_invalid",
            "cassette_invalid",
            "webhook_url_invalid",
            "webhook_secret_invalid",
            "webhook_event_unknown",
            "invalid_labels",
            "invalid_priority",
        }
    )


class RefusedError(BatonError):
    family_codes = frozenset(
        {
            "model_credentials_missing",
            "bypass_refused_as_root",
            "mode_not_enforceable",
            "mcp_not_supported",
            "budget_not_supported",
            "workspace_busy",
            "repository_not_allowed",
            "workspace_dirty",
            "run_active",
            "run_taken_over",
            "run_not_running",
            "run_not_interactive",
            "run_paused",
            "run_ended",
            "run_not_resumable",
            "run_exists",
            "base_commit_missing",
            "rate_limited",
            "body_too_large",
            "headers_too_large",
            "sse_limit",
            "net_not_allowed",
            "sandbox_unavailable",
            "invalid_transition",
            "branch_not_merged",
            "branch_exists",
            "merge_conflict",
            "push_failed",
            "run_not_recorded",
            "output_exists",
            "fleet_requires_postgres",
            "cassette_exhausted",
        }
    )


class NotFoundError(BatonError):
    family_codes = frozenset(
        {
            "run_not_found",
            "task_not_found",
            "gate_not_found",
            "snapshot_not_found",
            "session_not_found",
            "branch_not_found",
        }
    )


class AgentError(BatonError):
    family_codes = frozenset(
        {
            "agent_not_installed",
            "agent_start_timeout",
            "agent_exited",
            "agent_error",
            "budget_exhausted",
            "replay_mismatch",
            "sandbox_network_failed",
            "mcp_server_failed",
        }
    )


class GateError(BatonError):
    family_codes = frozenset(
        {
            "gate_not_pending",
            "gate_kind_mismatch",
            "gate_not_resumable",
            "gate_ambiguous",
            "approval_binding_mismatch",
            "answer_invalid",
            "plan_edit_invalid",
            "edit_not_supported",
        }
    )


class WorkspaceError(BatonError):
    family_codes = frozenset(
        {
            "path_outside_workspace",
            "archive_unsafe_entry",
            "archive_too_large",
            "archive_corrupt",
            "archive_version_unsupported",
            "workspace_failed",
            "ref_not_found",
            "clone_failed",
            "workspace_setup_failed",
        }
    )


class AuthError(BatonError):
    family_codes = frozenset(
        {
            "token_missing",
            "token_invalid",
            "token_expired",
            "token_not_yet_valid",
            "token_audience",
            "token_algorithm",
            "token_kid",
            "scope_missing",
            "session_expired",
            "csrf_failed",
        }
    )


class UpstreamError(BatonError):
    """A server baton forwards to (the model endpoint, an allowed host) failed or was not reached."""

    family_codes = frozenset({"upstream_unreachable", "upstream_tls", "upstream_failed"})


class StorageError(BatonError):
    """The database or the blob store failed; each translates its client's errors into this at its boundary."""

    family_codes = frozenset(
        {
            "storage_unavailable",
            "storage_busy",
            "storage_conflict",
            "storage_error",
            "log_write_failed",
            "blob_store_denied",
            "blob_bucket_missing",
            "blob_store_unavailable",
            "blob_store_error",
        }
    )


_FAMILIES: tuple[type[BatonError], ...] = (
    UsageError,
    RefusedError,
    NotFoundError,
    AgentError,
    GateError,
    WorkspaceError,
    AuthError,
    UpstreamError,
    StorageError,
)

CODES: frozenset[str] = frozenset().union(*(family.family_codes for family in _FAMILIES))


def error_class(code: str) -> type[BatonError]:
    """The family a code belongs to (so a code alone can be raised as the right type)."""
    for family in _FAMILIES:
        if code in family.family_codes:
            return family
    raise ValueError(f"unknown error code {code!r}")
