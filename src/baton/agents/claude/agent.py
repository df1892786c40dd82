"""Claude Code as an in-process ACP agent, over claude-agent-sdk.

The adapter speaks ACP to baton's host and drives the real Claude Code through the SDK. It
never decides a permission: a ``PreToolUse`` hook on every tool sends the call to the host as
``session/request_permission`` and returns the host's answer, so every decision is an ACP
message in the log. ``can_use_tool`` is configured only as a deny-by-default fallback (without
it a resumed deferred call is judged by Claude's own rules).

Raw SDK messages (dicts, as the CLI printed them) are read from the SDK's query so that
``_meta.baton.source`` carries the agent's own message unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from acp import PROTOCOL_VERSION, RequestError
from acp.core import AgentSideConnection
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    McpCapabilities,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    SetSessionModeResponse,
)
from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, HookMatcher
from claude_agent_sdk._errors import CLIJSONDecodeError
from claude_agent_sdk._internal.transport import subprocess_cli
from claude_agent_sdk.types import (
    HookContext,
    HookInput,
    HookJSONOutput,
    PermissionResultAllow,
    PermissionResultDeny,
    ToolPermissionContext,
)

from baton.acp.transport import Transport, memory_transport_pair
from baton.acp.wire import decode_json
from baton.agents.claude.convert import ClaudeConverter, stop_reason_for, usage_params
from baton.agents.claude.launcher import MALFORMED_PREFIX, write_launch_files
from baton.config import VERSION
from baton.errors import AgentError
from baton.gates.budget import LIMIT_SUBTYPES
from baton.gates.kinds import PLAN_TOOL
from baton.sandbox.netns import open_door
from baton.sandbox.network import SandboxNetwork
from baton.sandbox.plan import SandboxPlan

__all__ = ["ClaudeAgent", "ClaudeLaunch", "InProcessClaude"]

_CONSOLE_LIMIT = 8192
_PERMISSION_OPTIONS: list[dict[str, str]] = [
    {"optionId": "allow", "kind": "allow_once", "name": "Allow"},
    {"optionId": "reject", "kind": "reject_once", "name": "Reject"},
]


@dataclass(frozen=True)
class ClaudeLaunch:
    """How to start Claude Code for one run (built by the runtime, never by the agent)."""

    run_id: str
    binary: Path
    env: dict[str, str]
    launch_dir: Path
    model: str | None = None
    max_budget_usd: float | None = None
    # Claude's max_turns: its model round trips in one prompt turn; it then ends the turn with
    # ``error_max_turns`` before another model request (baton's --max-turns, baton.gates.budget).
    max_turns: int | None = None
    # baton's permission mode: Claude runs in `plan` while baton plans (ExitPlanMode exists only
    # there), in `default` otherwise; the hook asks the host for every call in both.
    permission_mode: str = "default"
    hook_timeout_seconds: float = 90.0
    # Resume this Claude session (in the run's agent home), forked to the new pinned session id.
    resume_session_id: str | None = None
    # The resumed session ended on a deferred call (the run parked on a gate): Claude Code
    # re-evaluates that call as it starts and continues the turn by itself ("Continue from where
    # you left off."), so the first prompt is not sent: it waits for that turn instead.
    continues_deferred: bool = False
    # The run's sandbox (baton.sandbox): Claude Code and its tools run inside it.
    sandbox: SandboxPlan | None = None
    # The sandbox's own network (baton serves its model and allow-list proxies), when isolated.
    network: SandboxNetwork | None = None
    # The repository's instructions (baton.workspaces.instructions), appended to Claude Code's
    # system prompt; Claude Code reads no CLAUDE.md itself (setting_sources=[]).
    instructions: str | None = None


class ClaudeAgent:
    """One ACP agent = one Claude Code process (one session; prompts one at a time)."""

    def __init__(self, launch: ClaudeLaunch) -> None:
        self._launch = launch
        self.environment: dict[str, str] = {}  # added to Claude Code's (InProcessClaude.start)
        self._conn: Any = None
        self._client: ClaudeSDKClient | None = None
        self._converter: ClaudeConverter | None = None
        self._session_id: str | None = None
        self._reader: asyncio.Task[None] | None = None
        self._console: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue()
        self._console_sender: asyncio.Task[None] | None = None
        self._turn: asyncio.Future[dict[str, Any]] | None = None
        self._turn_lock = asyncio.Lock()
        self._cancel_requested = False
        self._launch_continued = False  # the continued deferred turn (ClaudeLaunch.continues_deferred) was awaited
        self._announced: dict[str, dict[str, Any]] = {}
        self._send_lock = asyncio.Lock()
        self._closed = False
        self._claude_mode = _claude_mode(launch.permission_mode)  # Claude's own, as it last said
        self._planning_exit: set[str] = set()  # ExitPlanMode calls being decided
        self._plan_edits: dict[str, dict[str, Any]] = {}  # tool_use_id → the edited plan's input

    # -- ACP plumbing -------------------------------------------------------------------

    def on_connect(self, conn: Any) -> None:
        self._conn = conn

    async def _notify(self, method: str, params: dict[str, Any]) -> None:
        # Plain dicts on the hot path: the host validates what it reads; the log keeps the wire.
        await self._conn._conn.send_notification(method, params)

    async def _send_updates(self, updates: list[dict[str, Any]]) -> None:
        assert self._session_id is not None
        for update in updates:
            if update.get("sessionUpdate") == "tool_call":
                call_id = str(update.get("toolCallId"))
                if call_id in self._announced:
                    continue
                self._announced[call_id] = update
            await self._notify("session/update", {"sessionId": self._session_id, "update": update})

    # -- ACP agent methods --------------------------------------------------------------

    async def initialize(self, protocol_version: int, **_: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(
                load_session=False,
                prompt_capabilities=PromptCapabilities(image=False, embedded_context=True),
                # The run's MCP servers, as baton's proxy endpoints: handed to Claude Code (SDK mcp_servers).
                mcp_capabilities=McpCapabilities(http=True, sse=False),
            ),
            agent_info=Implementation(name="baton-claude", title="Claude Code (baton)", version=VERSION),
        )

    async def new_session(self, cwd: str, mcp_servers: Any = None, **_: Any) -> NewSessionResponse:
        if self._client is not None:
            raise RequestError.invalid_request({"message": "this agent serves one session"})
        session_id = str(uuid.uuid4())
        self._session_id = session_id
        self._converter = ClaudeConverter(cwd)
        launch = self._launch
        network = launch.network if launch.sandbox is not None and launch.sandbox.network.isolated else None
        door = open_door(launch.launch_dir) if network is not None else None
        cli_path = write_launch_files(
            launch.launch_dir,
            binary=launch.binary,
            env={**launch.env, **self.environment},
            run_id=launch.run_id,
            sandbox=launch.sandbox,
            cwd=Path(cwd),
            door=door,
        )
        options = ClaudeAgentOptions(
            cwd=cwd,
            cli_path=cli_path,
            model=launch.model,
            session_id=session_id,
            setting_sources=[],
            mcp_servers=_claude_mcp_servers(mcp_servers),  # only the run's (baton's proxy), never a settings file's
            strict_mcp_config=True,
            permission_mode=self._claude_mode,  # type: ignore[arg-type]
            system_prompt=_system_prompt(launch.instructions),
            hooks={
                "PreToolUse": [
                    HookMatcher(matcher=None, hooks=[self._pre_tool_use], timeout=launch.hook_timeout_seconds)
                ]
            },
            can_use_tool=self._fallback_can_use_tool,
            stderr=self._on_stderr,
            max_budget_usd=launch.max_budget_usd,
            max_turns=launch.max_turns,
            resume=launch.resume_session_id,
            fork_session=launch.resume_session_id is not None,
        )
        client = ClaudeSDKClient(options)
        self._console_sender = asyncio.create_task(self._send_console())
        try:
            # The SDK runs the wrapper, whose bubblewrap waits behind the door until the proxies listen.
            async with network.serving(door) if network is not None and door is not None else contextlib.nullcontext():
                await client.connect()
        except AgentError as exc:
            with contextlib.suppress(Exception):
                await client.disconnect()  # ends the wrapper's bubblewrap, still waiting behind the door
            raise RequestError.internal_error({"code": exc.code, "message": exc.message}) from exc
        except Exception as exc:
            raise RequestError.internal_error({"code": "agent_start_timeout", "message": str(exc)}) from exc
        finally:
            if door is not None:
                door.close()
        self._client = client
        if launch.continues_deferred:  # the turn Claude continues by itself (see ClaudeLaunch)
            self._turn = asyncio.get_running_loop().create_future()
        self._reader = asyncio.create_task(self._read_messages(client))
        return NewSessionResponse(session_id=session_id)

    async def prompt(self, prompt: list[Any], session_id: str, **_: Any) -> PromptResponse:
        client = self._require_client(session_id)
        text = "\n".join(_block_text(block) for block in prompt)
        async with self._turn_lock:
            self._cancel_requested = False
            if self._turn is not None and not self._launch_continued:  # Claude already continues a deferred turn
                self._launch_continued = True
                turn = self._turn
            else:
                turn = asyncio.get_running_loop().create_future()
                self._turn = turn
                await client.query(text, session_id=session_id)
            result = await turn
            self._turn = None
        params = usage_params(result, session_id=session_id)
        await self._notify("_baton/usage", params)
        stop_reason = stop_reason_for(result, cancel_requested=self._cancel_requested)
        # A budget Claude was given (max_budget_usd, max_turns) ends the turn, not the run: baton's budget
        # check opens a resource_limit gate (baton.gates.budget); ``_baton/usage`` says which.
        limit = result.get("subtype") in LIMIT_SUBTYPES
        if params.get("is_error") and stop_reason != "cancelled" and not limit:
            message = str(result.get("result") or result.get("subtype") or "the agent's turn failed")
            raise RequestError(-32603, message, {"code": "agent_error", "message": message})
        return PromptResponse(stop_reason=stop_reason)  # type: ignore[arg-type]

    async def cancel(self, session_id: str, **_: Any) -> None:
        client = self._require_client(session_id)
        if self._turn is not None and not self._turn.done():
            self._cancel_requested = True
            await client.interrupt()

    async def set_session_mode(self, mode_id: str, session_id: str, **_: Any) -> SetSessionModeResponse:
        self._require_client(session_id)
        # The host's Gatekeeper holds the policy; Claude follows only plan vs not plan (see
        # ClaudeLaunch.permission_mode). An approved ExitPlanMode moves Claude out of plan itself.
        claude_mode = _claude_mode(mode_id)
        if claude_mode != self._claude_mode and not self._planning_exit and self._client is not None:
            await self._client.set_permission_mode(claude_mode)  # type: ignore[arg-type]
            self._claude_mode = claude_mode
        await self._notify(
            "session/update",
            {
                "sessionId": session_id,
                "update": {"sessionUpdate": "current_mode_update", "currentModeId": mode_id},
            },
        )
        return SetSessionModeResponse()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.disconnect()
        for task in (self._reader, self._console_sender):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if self._turn is not None and not self._turn.done():
            self._turn.set_exception(_exited("the agent was closed"))

    # -- Claude side --------------------------------------------------------------------

    def _require_client(self, session_id: str) -> ClaudeSDKClient:
        if self._client is None or session_id != self._session_id:
            raise RequestError.invalid_params({"message": f"unknown session {session_id}"})
        return self._client

    async def _read_messages(self, client: ClaudeSDKClient) -> None:
        assert self._converter is not None
        try:
            async for message in _raw_messages(client):
                await self._send_updates(self._converter.convert(message))
                if message.get("type") == "system" and isinstance(message.get("permissionMode"), str):
                    self._claude_mode = message["permissionMode"]
                if message.get("type") == "system" and message.get("subtype") == "compact_boundary":
                    await self._notify_compaction(message)
                if message.get("type") == "result" and self._turn is not None and not self._turn.done():
                    self._turn.set_result(message)
        except Exception as exc:
            if self._turn is not None and not self._turn.done():
                self._turn.set_exception(_exited(f"Claude Code stopped: {exc}"))
            return
        if self._turn is not None and not self._turn.done():
            self._turn.set_exception(_exited("Claude Code exited during the turn"))

    async def _notify_compaction(self, message: dict[str, Any]) -> None:
        metadata = message.get("compact_metadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        params = {
            "sessionId": self._session_id,
            "trigger": metadata.get("trigger"),
            "pre_tokens": metadata.get("pre_tokens"),
        }
        await self._notify("_baton/compact_boundary", {**params, "_meta": {"baton": {"source": message}}})

    async def _pre_tool_use(self, hook_input: HookInput, tool_use_id: str | None, _ctx: HookContext) -> HookJSONOutput:
        data: dict[str, Any] = dict(hook_input)
        tool_name = str(data.get("tool_name", ""))
        tool_input = data.get("tool_input") or {}
        call_id = tool_use_id or str(data.get("tool_use_id") or uuid.uuid4())
        if tool_name == PLAN_TOOL:  # Claude leaves plan by itself if this is approved
            self._planning_exit.add(call_id)
        try:
            answer = await self._ask_host(call_id, tool_name, tool_input)
        finally:
            self._planning_exit.discard(call_id)
        if answer.decision == "allow" and _is_plan_edit(tool_name, tool_input, answer.updated_input):
            # Claude Code drops a hook's edited plan (it reads its plan file again) but takes one
            # from can_use_tool: the hook leaves the call undecided and can_use_tool allows it.
            self._plan_edits[call_id] = answer.updated_input or {}
            return {}
        # "defer": the run parks; the turn ends with stop_reason tool_deferred and Claude
        # re-evaluates this same call when the session is resumed.
        output: dict[str, Any] = {"hookEventName": "PreToolUse", "permissionDecision": answer.decision}
        if answer.decision == "deny":
            output["permissionDecisionReason"] = answer.message
        if answer.decision == "allow" and answer.updated_input is not None:
            output["updatedInput"] = answer.updated_input
        hook: dict[str, Any] = {"hookSpecificOutput": output}
        if answer.interrupt:  # the human said to stop: the turn ends after the denial
            hook["continue_"] = False
            hook["stopReason"] = answer.message
        return hook  # type: ignore[return-value]

    async def _fallback_can_use_tool(
        self, tool_name: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResultAllow | PermissionResultDeny:
        # Claude asks here when the hook did not decide: a deferred call re-evaluated as a resumed
        # session starts is judged here rather than by the hook (seen with Claude Code 2.1). The
        # host decides it like any call; never fail open.
        call_id = getattr(context, "tool_use_id", None)
        edited = self._plan_edits.pop(str(call_id), None) if call_id else None
        if edited is not None:  # an edited plan, decided by the host when the hook asked
            return PermissionResultAllow(updated_input=edited)
        if not call_id:
            return PermissionResultDeny(message="baton: no decision from the PreToolUse hook", interrupt=False)
        answer = await self._ask_host(str(call_id), tool_name, tool_input)
        if answer.decision == "allow":
            return PermissionResultAllow(updated_input=answer.updated_input)
        return PermissionResultDeny(message=answer.message or "denied by baton", interrupt=answer.interrupt)

    async def _ask_host(self, call_id: str, tool_name: str, tool_input: dict[str, Any]) -> HostAnswer:
        """Announce the call (the hook can run before the stream shows it), then ask the host."""
        assert self._converter is not None and self._session_id is not None
        synthetic = {
            "type": "assistant",
            "message": {"content": [{"type": "tool_use", "id": call_id, "name": tool_name, "input": tool_input}]},
        }
        await self._send_updates(self._converter.convert(synthetic))
        tool_call = self._announced.get(call_id)
        kind = str(tool_call.get("kind", "other")) if tool_call else "other"
        params = {
            "sessionId": self._session_id,
            "toolCall": {
                "toolCallId": call_id,
                "title": tool_call.get("title") if tool_call else tool_name,
                "kind": kind,
                "status": "pending",
                "rawInput": tool_input,
            },
            "options": _PERMISSION_OPTIONS,
            "_meta": {"baton": {"tool_name": tool_name, "input": tool_input, "tool_use_id": call_id, "kind": kind}},
        }
        try:
            response = await self._conn._conn.send_request("session/request_permission", params)
        except Exception as exc:
            return HostAnswer("deny", f"baton: the permission request failed ({exc})")
        return _decision_from(response)

    def _on_stderr(self, line: str) -> None:
        if line.startswith(MALFORMED_PREFIX):
            try:
                text = json.loads(line[len(MALFORMED_PREFIX) :])
            except ValueError:
                text = line[len(MALFORMED_PREFIX) :]
            self._console.put_nowait(("_baton/malformed_line", {"line": str(text)[:65536], "stream": "stdout"}))
            return
        self._console.put_nowait(("_baton/console", {"level": "stderr", "message": line[:_CONSOLE_LIMIT]}))

    async def _send_console(self) -> None:
        while True:
            method, params = await self._console.get()
            await self._notify(method, params)


@dataclass(frozen=True)
class HostAnswer:
    """The host's answer to one permission request, as the hook gives it to Claude."""

    decision: str  # allow, deny, defer
    message: str = ""
    updated_input: dict[str, Any] | None = None
    interrupt: bool = False


def _decision_from(response: Any) -> HostAnswer:
    """Allow only on an explicitly selected allow option; defer only when baton says so; anything else denies."""
    if not isinstance(response, dict):
        return HostAnswer("deny", "baton: malformed permission response")
    meta = (response.get("_meta") or {}).get("baton") or {}
    reason = str(meta.get("reason") or "")
    message = str(meta.get("message") or reason or "denied by baton")
    outcome = response.get("outcome") or {}
    if outcome.get("outcome") == "selected" and outcome.get("optionId") == "allow":
        updated = meta.get("updated_input")
        return HostAnswer("allow", reason, updated if isinstance(updated, dict) else None)
    if meta.get("decision") == "defer":
        return HostAnswer("defer", message)
    return HostAnswer("deny", message, interrupt=meta.get("interrupt") is True)


def _is_plan_edit(tool_name: str, tool_input: dict[str, Any], updated: dict[str, Any] | None) -> bool:
    plan = (updated or {}).get("plan")
    return tool_name == PLAN_TOOL and isinstance(plan, str) and plan != tool_input.get("plan")


def _claude_mode(mode: str) -> str:
    return "plan" if mode == "plan" else "default"


def _exited(message: str) -> RequestError:
    return RequestError(-32603, message, {"code": "agent_exited", "message": message})


def _block_text(block: Any) -> str:
    if isinstance(block, dict):
        return str(block.get("text", ""))
    return str(getattr(block, "text", "") or "")


def _parse_stdout_line(line: str) -> dict[str, Any] | None:
    """The SDK's own ``_parse_stdout_line`` (claude-agent-sdk 0.2.189), through baton's decoder.

    The SDK parses every line Claude Code prints with ``json.loads``, half of the CPU of a
    streamed turn; baton puts this function in its place (the SDK is pinned; a test checks the
    SDK still calls it by that name): the same lines skipped, the same error, orjson's speed.
    """
    line = line.strip()
    if not line or not line.startswith("{"):
        return None  # a blank line, or the non-JSON noise some CLI builds print
    try:
        data: dict[str, Any] = decode_json(line)
    except ValueError as exc:
        raise CLIJSONDecodeError(line, exc) from exc
    return data


subprocess_cli._parse_stdout_line = _parse_stdout_line


async def _raw_messages(client: ClaudeSDKClient) -> AsyncIterator[dict[str, Any]]:
    # The SDK's public iterator parses messages into dataclasses and drops fields it does
    # not model; its query yields the CLI's own dicts (claude-agent-sdk is pinned).
    query = client._query
    assert query is not None
    async for message in query.receive_messages():
        yield message


class InProcessClaude:
    """The Claude adapter as an :class:`~baton.agents.base.AgentProcess` (memory transport)."""

    name = "claude"

    def __init__(self, launch: ClaudeLaunch) -> None:
        self._agent = ClaudeAgent(launch)
        self._connection: AgentSideConnection | None = None
        self.sandbox = launch.sandbox
        self.network = launch.network

    async def start(self, *, environment: Mapping[str, str] | None = None) -> Transport:
        if environment:  # Claude Code starts with the session: its environment gets these then
            self._agent.environment.update(environment)
        agent_end, host_end = memory_transport_pair()
        self._connection = AgentSideConnection(cast(Any, self._agent), agent_end)
        return host_end

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):
            await self._agent.close()
        if self._connection is not None:
            with contextlib.suppress(Exception):
                await self._connection.close()
        if self.network is not None:
            await self.network.aclose()


def _claude_mcp_servers(servers: Any) -> dict[str, Any]:
    """ACP's ``mcpServers`` of ``session/new`` (baton's proxy endpoints, HTTP) as the SDK's
    ``mcp_servers``; anything but an HTTP server is refused (baton hands no other kind)."""
    found: dict[str, Any] = {}
    for server in servers or []:
        data = server.model_dump(by_alias=True) if hasattr(server, "model_dump") else dict(server)
        if data.get("type") != "http" or not isinstance(data.get("url"), str):
            raise RequestError.invalid_params({"message": f"baton's Claude takes HTTP MCP servers only: {data}"})
        headers = {str(h["name"]): str(h["value"]) for h in data.get("headers") or []}
        found[str(data["name"])] = {"type": "http", "url": data["url"], **({"headers": headers} if headers else {})}
    return found


def _system_prompt(instructions: str | None) -> Any:
    """Claude Code's own system prompt, with the repository's instructions after it."""
    if not instructions:
        return {"type": "preset", "preset": "claude_code"}
    return {"type": "preset", "preset": "claude_code", "append": instructions}
