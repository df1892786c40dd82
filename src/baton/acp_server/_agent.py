"""``baton acp``: baton as an ACP agent, for editors (Zed, JetBrains …) that speak ACP.

The editor is the upstream ACP *client*; behind this agent every prompt is a baton run — the
Claude adapter by default, or a registry agent — with its session log, policy, gates and runner
events. An editor session maps onto a chain of runs: the first prompt starts one
(``Baton.start``), each later prompt continues the previous run's conversation in a new run
(``Baton.resume(run, prompt)``, ``resumed_from``).

- The run's ``session/update`` notifications from the agent are forwarded to the editor as
  they are committed to the log (history replayed by ``session/load``, tagged
  ``_meta.baton.replay``, is not), under the editor's session id.
- A permission the policy answers *ask* is forwarded to the editor as
  ``session/request_permission`` with the agent's own options and tool call; the editor's
  choice (by the option's kind) is the decision, logged with reason ``human`` and
  ``decided_by: "human"``. Allowed or denied by the policy, the editor is not asked.
- ``session/cancel`` cancels the running turn; the prompt answers ``cancelled``.
- A failed run answers the prompt with a JSON-RPC error whose ``data`` is ``{code, message}``.

stdout carries only ACP messages (the command points everything else at stderr).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, cast

from acp import PROTOCOL_VERSION, RequestError
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PermissionOption,
    PromptCapabilities,
    PromptResponse,
    SessionNotification,
)

from baton.acp.host import AskHuman
from baton.errors import BatonError
from baton.gates import Decision
from baton.runs import Baton, RunHandle, RunSpec

__all__ = ["AcpServerOptions", "BatonAcpAgent"]

_ALLOW_KINDS = ("allow_once", "allow_always")
_STOP_REASONS = ("end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled")


@dataclass(frozen=True)
class AcpServerOptions:
    """What every run behind ``baton acp`` is started with."""

    agent: str = "claude"
    model: str | None = None
    permission_mode: str = "default"
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()


@dataclass
class _Session:
    cwd: Path
    last_run: str | None = None  # the run whose conversation the next prompt continues
    handle: RunHandle | None = None  # the run executing the current prompt
    runs: list[str] = field(default_factory=list)


def _baton_version() -> str:
    try:
        return version("baton")
    except PackageNotFoundError:
        return "0"


class BatonAcpAgent:
    """The ACP agent the editor talks to (``acp.run_agent(BatonAcpAgent(...))``)."""

    def __init__(self, baton: Baton, options: AcpServerOptions) -> None:
        self._baton = baton
        self._options = options
        self._client: Any = None
        self._sessions: dict[str, _Session] = {}

    def on_connect(self, conn: Any) -> None:
        self._client = conn

    async def initialize(
        self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None, **kwargs: Any
    ) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=False, prompt_capabilities=PromptCapabilities(embedded_context=False, image=False)
            ),
            agent_info=Implementation(name="baton", title="baton", version=_baton_version()),
            auth_methods=[],
        )

    async def new_session(
        self, cwd: str, additional_directories: Any = None, mcp_servers: Any = None, **kwargs: Any
    ) -> NewSessionResponse:
        if not Path(cwd).is_dir():
            raise RequestError.invalid_params({"code": "invalid_argument", "message": f"cwd {cwd} is not a directory"})
        session_id = "baton-" + uuid.uuid4().hex
        self._sessions[session_id] = _Session(Path(cwd))
        return NewSessionResponse(session_id=session_id)

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        session = self._session(session_id)
        if session.handle is not None:
            raise RequestError.invalid_request({"code": "run_active", "message": "a prompt is already running"})
        text = "\n".join(str(block.text) for block in prompt if getattr(block, "type", None) == "text")
        ask = self._ask_editor(session_id)
        options = self._options
        try:
            if session.last_run is None:
                spec = RunSpec(
                    prompt=text,
                    repo=session.cwd,
                    agent=options.agent,
                    model=options.model,
                    permission_mode=options.permission_mode,
                    allow=options.allow,
                    deny=options.deny,
                )
                handle = await self._baton.start(spec, ask_human=ask)
            else:
                handle = await self._baton.resume(session.last_run, text, ask_human=ask)
        except BatonError as exc:
            raise RequestError.invalid_request(exc.to_dict()) from exc
        session.handle = handle
        session.runs.append(handle.run_id)
        forwarding = asyncio.create_task(self._forward(session_id, handle.run_id))
        try:
            outcome = await handle.wait()
            await forwarding  # ends when the run's log closes
        finally:
            session.handle = None
            forwarding.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await forwarding
        session.last_run = outcome.run_id
        if outcome.status == "failed":
            failure = {"code": outcome.code, "message": outcome.message, "run_id": outcome.run_id}
            raise RequestError.internal_error(failure)
        stop_reason = "cancelled" if outcome.status == "cancelled" else (outcome.stop_reason or "end_turn")
        if stop_reason not in _STOP_REASONS:
            stop_reason = "end_turn"
        return PromptResponse(stop_reason=cast(Any, stop_reason), field_meta={"baton": {"run_id": outcome.run_id}})

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self._sessions.get(session_id)
        if session is not None and session.handle is not None:
            session.handle.cancel()

    async def _forward(self, session_id: str, run_id: str) -> None:
        """The run's committed ``session/update`` notifications, to the editor under its session id."""
        async for entry in self._baton.entries(run_id):
            if entry["method"] != "session/update" or entry["direction"] != "from_agent":
                continue
            params = entry["payload"].get("params") or {}
            update = params.get("update")
            if not isinstance(update, dict) or _replayed(params, update):
                continue
            try:
                notification = SessionNotification.model_validate({"sessionId": session_id, "update": update})
            except ValueError:
                continue  # not an update the editor could read; it stays in the log
            await self._client.session_update(session_id=session_id, update=notification.update)

    def _ask_editor(self, session_id: str) -> AskHuman:
        async def ask(options: list[PermissionOption], tool_call: Any, decision: Decision) -> bool:
            response = await self._client.request_permission(
                options=options, session_id=session_id, tool_call=tool_call
            )
            outcome = response.outcome
            if getattr(outcome, "outcome", None) != "selected":
                return False
            chosen = next((option for option in options if option.option_id == outcome.option_id), None)
            return chosen is not None and chosen.kind in _ALLOW_KINDS

        return ask

    def _session(self, session_id: str) -> _Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise RequestError.invalid_params({"code": "invalid_argument", "message": f"unknown session {session_id}"})
        return session

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


def _replayed(params: dict[str, Any], update: dict[str, Any]) -> bool:
    for holder in (params, update):
        meta = holder.get("_meta")
        baton = meta.get("baton") if isinstance(meta, dict) else None
        if isinstance(baton, dict) and baton.get("replay") is True:
            return True
    return False
