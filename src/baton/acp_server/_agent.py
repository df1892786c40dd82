"""``baton acp``: baton as an ACP agent, for editors (Zed, JetBrains …) that speak ACP.

The editor is the upstream ACP *client*; behind this agent is baton — the Claude adapter by
default, or a registry agent — with its session log, policy, gates and runner events.

- **An editor session is a baton task** (``session/new`` creates it; its id is the session id)
  and maps onto **one interactive run** whose turns are the editor's prompts: the first prompt
  starts it (``Baton.start``, ``run_mode: interactive``), each later one is sent to it through
  its inbox (``RunHandle.send``). When that run has ended — a cancelled turn ends it, so do
  the idle timeout and a failure — or is executed by no process (an earlier ``baton acp``
  exited), the next prompt continues it (``Baton.resume(run, prompt)``: in place, or in a new
  run with ``resumed_from``; every run of the session carries the session's ``task_id``).
- ``session/load {sessionId}`` (any process, same ``BATON_HOME``) finds the session's runs,
  shows the editor its conversation again from the log (:mod:`baton.acp_server._history`),
  and the next prompt continues the newest run; ``session/resume`` does the same without the
  replay; ``session/list`` lists the sessions that have a run (newest first, a page at a time:
  ``nextCursor``; for one ``cwd`` when asked); ``session/close`` closes the session's run here
  and forgets the session (a load or resume brings it back). An unknown session is the
  JSON-RPC error -32002 with ``data: {code: "session_not_found", message}``; a session whose
  run another live process executes is refused with ``run_active``.
- The session's first prompt names it: ``session_info_update`` with that prompt's first line
  as the title (``session/list`` gives the same title, and ``session/load`` sends it again after
  the conversation).
- The run's ``session/update`` notifications from the agent are forwarded to the editor as
  they are committed to the log (history an agent replays on ``session/load``, tagged
  ``_meta.baton.replay``, is not; nor the agent's ``config_option_update``, options the editor
  cannot set through baton, nor its ``session_info_update``: baton names the session), under
  the editor's session id; what the agent says after its turn
  ended reaches the editor too, after that prompt's answer. The answer carries the turn's token
  counts (``usage``) when the run reports them.
- A permission the policy answers *ask* is forwarded to the editor as
  ``session/request_permission`` with the agent's own options and tool call; the editor's
  choice (by the option's kind) is the decision, logged with reason ``human`` and
  ``decided_by: "human"``. Allowed or denied by the policy, the editor is not asked. Claude's
  ``AskUserQuestion`` is asked one question per request (the title is the question, the options
  its answers plus "Don't answer"; a multi-select question takes one answer there), and the
  answers reach Claude as its own ``answers``; ``ExitPlanMode`` is asked with Claude's options
  and an approval hands Claude its plan back.
- ``session/cancel`` cancels the running turn; the prompt answers ``cancelled``.
- ``$/cancel_request`` (:mod:`baton.acp.cancel`): for a ``session/prompt``, as ``session/cancel``;
  for a ``session/load``, the replay stops and the load answers -32800. A permission forwarded
  to the editor that the agent withdraws (or whose turn is cancelled) is withdrawn from the
  editor with ``$/cancel_request`` too.
- A failed run answers the prompt with a JSON-RPC error whose ``data`` is ``{code, message}``.
- When the editor goes away (stdin closes), each session's run is closed (``finished``; a turn
  still running is cancelled), so a later ``session/load`` continues it in a new run.

stdout carries only ACP messages (the command points everything else at stderr).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Literal, cast

from acp import PROTOCOL_VERSION, RequestError
from acp.schema import (
    AgentCapabilities,
    AllowedOutcome,
    CloseSessionResponse,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PermissionOption,
    PromptCapabilities,
    PromptResponse,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionInfo,
    SessionInfoUpdate,
    SessionListCapabilities,
    SessionNotification,
    SessionResumeCapabilities,
    Usage,
)

from baton.acp.cancel import CancellableTransport, cancel_if_abandoned, current_request, request_cancelled
from baton.acp.host import AskHuman
from baton.acp_server._history import (
    SESSION_SOURCE,
    history_updates,
    is_replayed,
    last_seq,
    session_runs,
    session_task,
)
from baton.errors import BatonError, NotFoundError, RefusedError
from baton.gates import Decision
from baton.runs import Baton, RunHandle, RunSpec
from baton.runs.executors import executor_alive
from baton.runs.spec import RunOutcome

__all__ = ["AcpServerOptions", "BatonAcpAgent"]

_STOP_REASONS = ("end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled")
_LIVE = ("queued", "running", "paused", "interrupted")
_CLOSE_SECONDS = 15.0  # how long leaving waits for a session's run to end
_LIST_PAGE = 50  # sessions per session/list answer
_TITLE_LIMIT = 80  # characters of the first prompt's first line that name a session
# Not forwarded: the agent's config options (the editor cannot set them through baton) and its
# session's title (baton names the editor's session, which outlives the agent's sessions).
_NOT_FORWARDED = ("config_option_update", "session_info_update")


@dataclass(frozen=True)
class AcpServerOptions:
    """What every run behind ``baton acp`` is started with."""

    agent: str = "claude"
    model: str | None = None
    permission_mode: str = "default"
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()


_Turn = tuple[Literal["turn", "end"], dict[str, Any]]


@dataclass
class _Session:
    session_id: str
    cwd: Path
    last_run: str | None = None  # the newest run of the session: the one the next prompt continues
    handle: RunHandle | None = None  # the session's run, when this process executes it
    accepting: bool = False  # the handle's run takes the next prompt through its inbox
    turns: asyncio.Queue[_Turn] | None = None  # the handle's turn ends and its end, from the log
    forwarding: asyncio.Task[None] | None = None
    taken: set[int] = field(default_factory=set)  # inbox ids of the messages the run took (``_baton/inbox``)
    busy: bool = False  # a prompt is being answered
    cancelled: bool = False  # the editor cancelled the prompt being answered


def _baton_version() -> str:
    try:
        return version("baton")
    except PackageNotFoundError:
        return "0"


def _request_error(exc: BatonError) -> RequestError:
    if isinstance(exc, NotFoundError):
        return RequestError(-32002, "Resource not found", exc.to_dict())
    return RequestError.invalid_request(exc.to_dict())


class BatonAcpAgent:
    """The ACP agent the editor talks to (``acp.run_agent(BatonAcpAgent(...))``)."""

    def __init__(self, baton: Baton, options: AcpServerOptions) -> None:
        self._baton = baton
        self._options = options
        self._client: Any = None
        self._sessions: dict[str, _Session] = {}
        # The connection to the editor, when it keeps requests for $/cancel_request (serve_stdio's).
        self.editor_transport: CancellableTransport | None = None

    def on_connect(self, conn: Any) -> None:
        self._client = conn

    async def initialize(
        self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None, **kwargs: Any
    ) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(embedded_context=False, image=False),
                session_capabilities=SessionCapabilities(
                    list=SessionListCapabilities(), resume=SessionResumeCapabilities(), close=SessionCloseCapabilities()
                ),
            ),
            agent_info=Implementation(name="baton", title="baton", version=_baton_version()),
            auth_methods=[],
        )

    async def new_session(
        self, cwd: str, additional_directories: Any = None, mcp_servers: Any = None, **kwargs: Any
    ) -> NewSessionResponse:
        workspace = _workspace(cwd)
        task = await self._baton.store.create_task(
            "", repo=str(workspace), metadata={"source": SESSION_SOURCE, "cwd": str(workspace)}
        )
        self._sessions[task.id] = _Session(task.id, workspace)
        return NewSessionResponse(session_id=task.id)

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: Any = None, additional_directories: Any = None, **kwargs: Any
    ) -> LoadSessionResponse:
        runs = await self._reopen(session_id, cwd)
        pending = current_request()  # the editor may give up on the replay with $/cancel_request
        async for update in history_updates(self._baton.log, runs):
            if pending is not None and pending.cancelled.is_set():
                raise request_cancelled(pending.method)
            if update.get("sessionUpdate") in _NOT_FORWARDED:
                continue
            try:
                notification = SessionNotification.model_validate({"sessionId": session_id, "update": update})
            except ValueError:
                continue  # not an update the editor could read; it stays in the log
            await self._client.session_update(session_id=session_id, update=notification.update)
        records = await session_runs(self._baton.store, session_id)
        if records:  # the session's name again, after its conversation
            title = _title(str((records[0].request or {}).get("prompt") or ""))
            newest = records[-1]
            updated = newest.finished_at or newest.started_at or newest.created_at
            await self._send_title(session_id, title, updated)
        return LoadSessionResponse()

    async def resume_session(
        self, session_id: str, cwd: str, additional_directories: Any = None, mcp_servers: Any = None, **kwargs: Any
    ) -> ResumeSessionResponse:
        await self._reopen(session_id, cwd)
        return ResumeSessionResponse()

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        """The sessions with a run, newest activity first, :data:`_LIST_PAGE` at a time; the
        cursor is the offset of the next page (opaque to the editor)."""
        start = _cursor_offset(cursor)
        newest: dict[str, Any] = {}
        first: dict[str, Any] = {}
        for record in await self._baton.store.list_runs():  # oldest first: the last one of a task wins
            if record.task_id:
                newest[record.task_id] = record
                first.setdefault(record.task_id, record)
        sessions = []
        for task_id, record in newest.items():
            try:
                task = await session_task(self._baton.store, task_id)
            except BatonError:
                continue  # a task of another front end
            where = str(task.metadata.get("cwd") or task.repo or record.cwd)
            if cwd is not None and Path(where) != Path(cwd).resolve():
                continue
            updated = record.finished_at or record.started_at or record.created_at
            title = _title(str((first[task_id].request or {}).get("prompt") or ""))
            sessions.append(SessionInfo(session_id=task_id, cwd=where, updated_at=updated, title=title))
        sessions.sort(key=lambda info: (info.updated_at or "", info.session_id), reverse=True)
        page = sessions[start : start + _LIST_PAGE]
        more = start + _LIST_PAGE < len(sessions)
        return ListSessionsResponse(sessions=page, next_cursor=str(start + _LIST_PAGE) if more else None)

    async def close_session(self, session_id: str, **kwargs: Any) -> CloseSessionResponse:
        """Close the session's run if this process executes it (a turn still running is
        cancelled), and forget the session: a prompt needs a load or resume first."""
        session = self._sessions.get(session_id)
        if session is None:
            try:
                await session_task(self._baton.store, session_id)
            except BatonError as exc:
                raise _request_error(exc) from exc
            return CloseSessionResponse()  # known, but not open here: nothing to close
        await _close_run(session)
        del self._sessions[session_id]
        return CloseSessionResponse()

    async def _reopen(self, session_id: str, cwd: str) -> list[str]:
        """The session (from the store when this process does not know it); its run ids, oldest first."""
        workspace = _workspace(cwd)
        try:
            await session_task(self._baton.store, session_id)
            runs = await session_runs(self._baton.store, session_id)
        except BatonError as exc:
            raise _request_error(exc) from exc
        session = self._sessions.get(session_id)
        if session is not None and session.busy:
            raise _request_error(RefusedError("run_active", f"session {session_id} is answering a prompt"))
        newest = runs[-1] if runs else None
        here = session is not None and session.handle is not None and session.handle.executing
        live = newest is not None and newest.status in _LIVE and executor_alive(newest.executor_id, newest.heartbeat_at)
        if newest is not None and live and not here:
            message = f"run {newest.id} of session {session_id} is executed by {newest.executor_id}"
            raise _request_error(RefusedError("run_active", message))
        if session is None:
            session = self._sessions[session_id] = _Session(session_id, workspace)
        session.cwd = workspace
        if newest is not None and not here:
            session.last_run = newest.id
        return [record.id for record in runs]

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        session = self._session(session_id)
        if session.busy:
            raise _request_error(RefusedError("run_active", "a prompt is already running"))
        text = "\n".join(str(block.text) for block in prompt if getattr(block, "type", None) == "text")
        session.busy, session.cancelled = True, False
        pending = current_request()
        watch = asyncio.ensure_future(self._cancel_on_request(session_id, pending)) if pending is not None else None
        try:
            if session.last_run is None and session.handle is None:
                await self._name(session, text)
            return await self._prompt(session, text)
        finally:
            session.busy = False
            if watch is not None:
                watch.cancel()

    async def _cancel_on_request(self, session_id: str, pending: Any) -> None:
        """``$/cancel_request`` for a prompt is ``session/cancel``: the prompt answers ``cancelled``."""
        await pending.cancelled.wait()
        await self.cancel(session_id)

    async def _name(self, session: _Session, text: str) -> None:
        """The session's first prompt names it for the editor."""
        now = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        await self._send_title(session.session_id, _title(text), now)

    async def _send_title(self, session_id: str, title: str | None, updated_at: str | None) -> None:
        if title and self._client is not None:
            update = SessionInfoUpdate(session_update="session_info_update", title=title, updated_at=updated_at)
            await self._client.session_update(session_id=session_id, update=update)

    async def _prompt(self, session: _Session, text: str) -> PromptResponse:
        handle = session.handle
        if handle is not None and session.accepting and session.turns is not None:
            try:
                inbox_id: int | None = await handle.send(text)
            except BatonError:
                inbox_id = None  # the run ended meanwhile: continue it below
            if inbox_id is not None:
                kind, params = await session.turns.get()
                if kind == "turn":
                    return self._answer(session, handle, params)
                # The run ended: during this turn (its failure is the answer), or before it took
                # the message (idle timeout, a cancel) — then the message continues it below.
                taken = inbox_id in session.taken
                outcome = await self._ended(session, handle, failed_only=not taken)
                if taken or session.cancelled:
                    return _ended_response(outcome)
        if session.handle is not None:
            await self._ended(session, session.handle, failed_only=True)
        handle = await self._continue(session, text)
        assert session.turns is not None
        kind, params = await session.turns.get()
        if kind == "turn":
            return self._answer(session, handle, params)
        return _ended_response(await self._ended(session, handle, failed_only=False))

    async def _continue(self, session: _Session, text: str) -> RunHandle:
        """Start the session's run, or continue its newest one, with ``text`` as the first turn."""
        ask = self._ask_editor(session.session_id)
        options = self._options
        after = 0
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
                    task_id=session.session_id,
                    run_mode="interactive",
                    workspace="in-place",  # the editor's own files (docs/workspaces.md)
                )
                handle = await self._baton.start(spec, ask_human=ask)
            else:
                record = await self._baton.store.get_run(session.last_run)
                if not record.is_terminal:  # continues in place: only what it logs from now on is new
                    after = await last_seq(self._baton.log, record.id)
                repo = None if Path(record.cwd or "") == session.cwd else session.cwd
                handle = await self._baton.resume(record.id, text, repo=repo, ask_human=ask)
                if handle.run_id != record.id:
                    after = 0
        except BatonError as exc:
            raise _request_error(exc) from exc
        session.handle, session.last_run, session.accepting = handle, handle.run_id, True
        session.turns, session.taken = asyncio.Queue(), set()
        session.forwarding = asyncio.create_task(self._forward(session, handle.run_id, after, session.turns))
        return handle

    def _answer(self, session: _Session, handle: RunHandle, params: dict[str, Any]) -> PromptResponse:
        stop_reason = str(params.get("stop_reason") or "end_turn")
        if stop_reason == "cancelled":
            session.accepting = False  # a cancelled turn ends the run
        return _response(stop_reason, handle.run_id, _usage(params.get("usage")))

    async def _ended(self, session: _Session, handle: RunHandle, *, failed_only: bool) -> RunOutcome:
        """Wait for the session's run to end; a failure answers the prompt with an error."""
        session.accepting = False
        outcome = await handle.wait()
        if session.forwarding is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(session.forwarding, 10)
        session.handle, session.forwarding, session.last_run = None, None, outcome.run_id
        if outcome.status == "failed" and not failed_only:
            failure = {"code": outcome.code, "message": outcome.message, "run_id": outcome.run_id}
            raise RequestError.internal_error(failure)
        return outcome

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self._sessions.get(session_id)
        if session is not None and session.handle is not None and session.busy:
            session.cancelled = True
            session.handle.cancel()

    async def aclose(self) -> None:
        """The editor left: close every session's run (cancel a turn still running)."""
        await asyncio.gather(*(_close_run(session) for session in self._sessions.values()))

    async def _forward(self, session: _Session, run_id: str, after: int, turns: asyncio.Queue[_Turn]) -> None:
        """The run's committed ``session/update`` notifications, to the editor under its session id;
        each ``_baton/turn_complete`` and the end of the run's log, to the prompt waiting for them."""
        try:
            async for entry in self._baton.entries(run_id, after=after):
                params = entry["payload"].get("params") or {}
                if entry["method"] == "_baton/turn_complete":
                    turns.put_nowait(("turn", params))
                    continue
                if entry["method"] == "_baton/inbox" and isinstance(params.get("id"), int):
                    session.taken.add(params["id"])
                    continue
                if entry["method"] != "session/update" or entry["direction"] != "from_agent":
                    continue
                update = params.get("update")
                if not isinstance(update, dict) or is_replayed(params) or is_replayed(update):
                    continue
                if update.get("sessionUpdate") in _NOT_FORWARDED:
                    continue
                try:
                    notification = SessionNotification.model_validate(
                        {"sessionId": session.session_id, "update": update}
                    )
                except ValueError:
                    continue  # not an update the editor could read; it stays in the log
                await self._client.session_update(session_id=session.session_id, update=notification.update)
        finally:
            turns.put_nowait(("end", {}))

    def _ask_editor(self, session_id: str) -> AskHuman:
        async def ask(options: list[PermissionOption], tool_call: Any, decision: Decision) -> str | None:
            request = self._client.request_permission(options=options, session_id=session_id, tool_call=tool_call)
            editor = self.editor_transport
            # Nobody needs the answer any more (the agent withdrew its request, the turn was
            # cancelled): the editor is told with $/cancel_request.
            response = await (cancel_if_abandoned(editor.send, request) if editor is not None else request)
            outcome = response.outcome
            return outcome.option_id if isinstance(outcome, AllowedOutcome) else None

        return ask

    def _session(self, session_id: str) -> _Session:
        session = self._sessions.get(session_id)
        if session is None:
            message = f"unknown session {session_id} (session/load or session/resume it first)"
            raise _request_error(NotFoundError("session_not_found", message))
        return session

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


def _workspace(cwd: str) -> Path:
    path = Path(cwd)
    if not path.is_absolute() or not path.is_dir():
        error = {"code": "invalid_argument", "message": f"cwd {cwd} is not an absolute path to a directory"}
        raise RequestError.invalid_params(error)
    return path.resolve()


async def _close_run(session: _Session) -> None:
    """End the session's run if this process executes it (cancel a turn still running), waiting
    up to :data:`_CLOSE_SECONDS`, and stop forwarding its updates."""
    handle = session.handle
    if handle is not None and handle.executing:
        if session.busy or not session.accepting:
            handle.cancel()
        else:
            with contextlib.suppress(BatonError):
                await handle.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(handle.wait(), _CLOSE_SECONDS)
    session.accepting = False
    if session.forwarding is not None:
        session.forwarding.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await session.forwarding
        session.forwarding = None


def _cursor_offset(cursor: str | None) -> int:
    if cursor is None:
        return 0
    if not cursor.isdigit():
        raise RequestError.invalid_params(
            {"code": "invalid_argument", "message": f"not a session/list cursor: {cursor!r}"}
        )
    return int(cursor)


def _title(prompt: str) -> str | None:
    line = next((line.strip() for line in prompt.splitlines() if line.strip()), "")
    if not line:
        return None
    return line if len(line) <= _TITLE_LIMIT else line[: _TITLE_LIMIT - 1] + "…"


def _usage(reported: Any) -> Usage | None:
    """The turn's token counts in ACP's shape, from an ACP agent's (camelCase) or Claude's
    (``input_tokens`` …) usage; None when it holds no input and output counts."""
    if not isinstance(reported, dict):
        return None

    def count(*names: str) -> int | None:
        for name in names:
            value = reported.get(name)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                return value
        return None

    tokens_in, tokens_out = count("inputTokens", "input_tokens"), count("outputTokens", "output_tokens")
    if tokens_in is None or tokens_out is None:
        return None
    cached_read = count("cachedReadTokens", "cache_read_input_tokens")
    cached_write = count("cachedWriteTokens", "cache_creation_input_tokens")
    total = count("totalTokens") or tokens_in + tokens_out + (cached_read or 0) + (cached_write or 0)
    return Usage(
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        total_tokens=total,
        thought_tokens=count("thoughtTokens"),
        cached_read_tokens=cached_read,
        cached_write_tokens=cached_write,
    )


def _ended_response(outcome: RunOutcome) -> PromptResponse:
    reason = "cancelled" if outcome.status == "cancelled" else outcome.stop_reason
    return _response(reason, outcome.run_id, _usage(outcome.usage))


def _response(stop_reason: str | None, run_id: str, usage: Usage | None = None) -> PromptResponse:
    reason = stop_reason if stop_reason in _STOP_REASONS else "end_turn"
    return PromptResponse(stop_reason=cast(Any, reason), usage=usage, field_meta={"baton": {"run_id": run_id}})
