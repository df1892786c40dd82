"""Executing one run in this process: the agent, the host, the tapping transport, the log.

The order of what the log records is the contract of docs/internals.md: ``run_started``,
``status running``, the ACP conversation, ``agent_session``, per turn ``turn_complete``, and
last a ``status`` that ends the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from acp import PROTOCOL_VERSION, RequestError, connect_to_agent, text_block
from acp.schema import ClientCapabilities, FileSystemCapabilities, HttpMcpServer

from baton.acp.extensions import ResumeParams, RunStartedParams, StatusParams, notification
from baton.acp.host import AgentNormalizer, AskHuman, BatonHost, HumanGates
from baton.acp.replay import AgentRestore, ReplayTagger, restore_session
from baton.acp.tap import TappingTransport
from baton.acp.transport import sdk_spans_where_seen
from baton.acp.workspace import Workspace
from baton.agents.base import AgentProcess
from baton.agents.processes import kill_run_processes, run_process_ids
from baton.agents.registry import AgentEntry, NativeSetting, choose_setting
from baton.agents.subprocess import SubprocessAgent
from baton.config import McpServerConfig
from baton.errors import AgentError, RefusedError, WorkspaceError
from baton.gates import Decision, Gatekeeper, ToolCall
from baton.gates.budget import Budget, Spend
from baton.mcp import McpProxy, McpVerdict, PolicyDecider
from baton.observability.baton_logs import CURRENT_RUN
from baton.results import Results
from baton.runs.budgeting import RunBudget
from baton.runs.executors import this_executor_id
from baton.runs.gating import RunGates
from baton.runs.inbox import InboxReader, RunCommands
from baton.runs.lifecycle import RunLifecycle
from baton.runs.model_source import RunModel
from baton.runs.setup_gate import gate_setup
from baton.runs.spec import RunOutcome, RunSpec
from baton.sandbox.network import MCP_PORT
from baton.snapshots.recorder import SnapshotRecorder
from baton.store import SessionLog, Store
from baton.workspaces.setup import WorkspaceSetup, run_setup

if TYPE_CHECKING:
    from baton.observability import RunTelemetry, Telemetry

__all__ = ["RebuiltFallback", "RunExecution"]

# A new agent, the ``_baton/resume`` params and the first prompt of the rebuilt path.
RebuiltFallback = Callable[[], Awaitable[tuple[AgentProcess, ResumeParams, str]]]


@dataclass
class _TurnUsage:
    params: dict[str, Any] | None = None


class _UsageRecordingHost(BatonHost):
    """Keeps the agent's last ``_baton/usage`` so baton can close the turn with it."""

    def __init__(
        self,
        gatekeeper: Gatekeeper,
        tap: TappingTransport,
        log: SessionLog,
        run_id: str,
        entry: AgentEntry | None,
        ask_human: AskHuman | None = None,
        gates: HumanGates | None = None,
        on_mode: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        async def wait_logged() -> None:
            await log.wait_committed(run_id, tap.last_seq)

        workspace = Workspace(gatekeeper.workspace, wait_logged)
        super().__init__(
            gatekeeper, wait_logged, agent=entry, workspace=workspace, ask_human=ask_human, gates=gates, on_mode=on_mode
        )
        self.turn = _TurnUsage()

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        if method in ("baton/usage", "_baton/usage"):
            self.turn.params = params


class RunExecution:
    """One run executing here; ``await execution.run()`` drives it to its end."""

    def __init__(
        self,
        *,
        run_id: str,
        spec: RunSpec,
        store: Store,
        log: SessionLog,
        gatekeeper: Gatekeeper,
        agent: AgentProcess,
        start_timeout: float,
        resume: ResumeParams | None = None,
        resumed_from: str | None = None,
        restore: AgentRestore | None = None,
        entry: AgentEntry | None = None,
        snapshots: SnapshotRecorder | None = None,
        ask_human: AskHuman | None = None,
        inbox_poll_seconds: float = 0.02,
        idle_seconds: float = 1800.0,
        gate_grace_seconds: float = 30.0,
        gate_expiry_seconds: float = 86400.0,
        model_source: dict[str, Any] | None = None,
        setup: WorkspaceSetup | None = None,
        instructions: dict[str, Any] | None = None,
        telemetry: Telemetry | None = None,
        results: Results | None = None,
        mcp_servers: tuple[McpServerConfig, ...] = (),
        mcp_stderr_dir: Path | None = None,
    ) -> None:
        self.run_id = run_id
        self._mcp_servers = mcp_servers  # the run's MCP servers (baton.mcp), behind its proxy
        self._mcp_stderr_dir = mcp_stderr_dir  # where its stdio servers' stderr goes
        self._mcp: McpProxy | None = None
        # the workspace's setup, run before the agent starts (a new run; a resume that parked on its gate)
        self._setup = setup
        self._instructions = instructions  # the ``_baton/instructions`` note: what the agent was given
        self._results = results  # the branch the run leaves at its end (baton.results)
        self._telemetry = telemetry  # the process's (baton.observability); None when nothing is exported
        self._run_telemetry: RunTelemetry | None = None
        self._model_source = model_source  # logged in ``_baton/run_started``
        self._gate_grace = gate_grace_seconds  # a gate waits in-process this long, then the run parks
        self._gate_expiry = gate_expiry_seconds
        self._gates: RunGates | None = None
        self._budget: RunBudget | None = None  # the run's budget, when it has one (baton.runs.budgeting)
        self._set_mode: Any = None  # the run's mode switch (set while its turns run)
        self._inbox_poll_seconds = inbox_poll_seconds
        self._idle_seconds = idle_seconds  # an interactive run with no message for this long ends
        self._ask_human = ask_human  # answers what the policy says to ask (baton acp: the editor)
        self._snapshots = snapshots
        self.spec = spec
        self._store = store
        self._log = log
        self._gatekeeper = gatekeeper
        self._agent = agent
        self._entry = entry  # a registry entry: the host maps its tools and binds its calls
        self._start_timeout = start_timeout
        self._cancel = asyncio.Event()
        self._session_id: str | None = None
        # A resume logs ``_baton/resume`` instead of ``_baton/run_started``, unless it starts a
        # new run (``resumed_from``) that continues the conversation of an ended one.
        self._resume = resume
        self._resumed_from = resumed_from
        self.restore = restore  # an ACP agent's own session to resume or load (baton.acp.replay)
        # A native resume whose agent cannot start (Claude Code: "No conversation found" for a
        # session a killed resume left half-written) continues on the rebuilt path instead.
        self.rebuilt_fallback: RebuiltFallback | None = None
        # The run's own model proxy or replaying server (record/replay), closed when the run ends.
        self.run_model: RunModel | None = None

    @property
    def _lifecycle(self) -> RunLifecycle:
        return RunLifecycle(self._store, self._log, self.run_id, self._note)

    def _note(self, name: str, params: Any) -> int:
        message = notification(name, params)
        return self._log.append(self.run_id, "baton", message["method"], message)

    @property
    def store(self) -> Store:
        return self._store

    def request_cancel(self) -> None:
        self._cancel.set()

    async def run(self) -> RunOutcome:
        # baton's own log records of this run (and of the tasks it starts) carry its id.
        CURRENT_RUN.set(self.run_id)
        spec, run_id = self.spec, self.run_id
        cwd = str(Path(spec.repo).resolve())
        if self._telemetry is not None:  # the run's trace starts with its execution
            self._run_telemetry = self._telemetry.begin_run(
                run_id, task_id=spec.task_id, agent=spec.agent, owner=spec.owner
            )
        reason = "started" if self._resume is None else "resumed"
        opening: dict[str, Any] = {}
        if self._resume is None or self._resumed_from is not None:
            run_started: RunStartedParams = {
                "run_id": run_id,
                "task_id": spec.task_id,
                "agent": spec.agent,
                "model": spec.model,
                "cwd": cwd,
                "permission_mode": spec.permission_mode,
                "run_mode": spec.run_mode,
                "allow": list(spec.allow),
                "deny": list(spec.deny),
                "ask": list(spec.ask),
                # The task, for a resume that finds no prompt in the log (the user's, never a rebuilt transcript).
                "prompt": self._resume["prompt"] if self._resume is not None else spec.prompt,
            }
            if self._resumed_from is not None:
                run_started["resumed_from"] = self._resumed_from
            if spec.forked_from is not None:
                run_started["forked_from"] = dict(spec.forked_from)
            if spec.agent_command:
                run_started["agent_command"] = list(spec.agent_command)
                run_started["trust_agent_permissions"] = spec.trust_agent_permissions
            if self._model_source is not None:
                run_started["model_source"] = self._model_source
            if spec.sandbox is not None:
                run_started["sandbox"] = spec.sandbox
            if spec.mount_ro:
                run_started["mount_ro"] = list(spec.mount_ro)
            if spec.mount_rw:
                run_started["mount_rw"] = list(spec.mount_rw)
            if spec.allow_net:
                run_started["allow_net"] = list(spec.allow_net)
            if spec.mcp:
                run_started["mcp"] = list(spec.mcp)
            opening["run_started"] = run_started
        if self._resume is not None:
            opening["resume"] = self._resume
        await self._lifecycle.start(reason, this_executor_id(), opening)  # docs/resume.md: the row first
        trace = self._run_telemetry.trace_note() if self._run_telemetry is not None else None
        if trace is not None:  # where this execution's trace is (docs/observability.md)
            self._note("trace", trace)
        if self._agent.sandbox is not None:  # where this execution's agent runs (docs/sandbox.md)
            self._note("sandbox", self._agent.sandbox.describe())
        if self._instructions is not None:  # the repository's instructions (docs/agents.md)
            self._note("instructions", self._instructions)
        network = self._agent.network
        if network is not None:  # every connection its allow-list proxy sees; its model requests as spans
            network.report_to(lambda decision: self._note("net", decision.to_dict()))
            if network.observer is None and self._run_telemetry is not None:
                network.observer = self._run_telemetry.model_observer()
        started = time.monotonic()
        try:
            # A new run's setup; a resumed one's only when it parked on its setup's gate (the preparer).
            parked = await self._setup_workspace(self._setup) if self._setup is not None else None
            if parked is not None:  # nobody decided the setup's gate in time: the run parks on it
                outcome = RunOutcome(run_id, "paused", stop_reason="parked", gate_id=parked)
            else:
                async with self._snapshots or contextlib.nullcontext():
                    outcome = await self._converse_or_rebuild(cwd)
        except asyncio.CancelledError:
            outcome = RunOutcome(run_id, "cancelled", stop_reason="cancelled", message="the run was interrupted")
            await asyncio.shield(self._close_network())
            await asyncio.shield(self._close_model(outcome))
            await asyncio.shield(self._finish(outcome, started))
            raise
        except Exception as exc:  # the run must end in the log whatever happened
            # A baton error's code is the outcome's, so its own message (str() says the code again).
            if isinstance(exc, AgentError | WorkspaceError | RefusedError):
                code, message = exc.code, exc.message
            else:
                code, message = "agent_error", str(exc)
            outcome = RunOutcome(run_id, "failed", code=code, message=message)
        await self._close_network()
        outcome = await self._close_model(outcome)
        await self._finish(outcome, started)
        return outcome

    async def _setup_workspace(self, setup: WorkspaceSetup) -> str | None:
        """The workspace's setup (baton.workspaces.setup), or the note that says why it was
        skipped; the gate's id when the run must park on its setup's gate (baton.runs.setup_gate)."""
        step, skipped = setup.step, setup.skipped
        if step is not None and step.gated:  # an untrusted repository's script: a human approves it first
            verdict = await gate_setup(
                step,
                store=self._store,
                lifecycle=self._lifecycle,
                run_id=self.run_id,
                note=self._note,
                base_commit=(step.env or {}).get("BATON_BASE_COMMIT") or None,
                grace_seconds=self._gate_grace,
                expiry_seconds=self._gate_expiry,
                cancelled=self._cancel,
            )
            if verdict.parked:
                return verdict.gate_id
            step, skipped = verdict.step, verdict.reason
            if skipped is not None:
                self._note("setup", {"status": "skipped", "reason": skipped, "gate_id": verdict.gate_id})
                return None
        if skipped is not None:
            self._note("setup", {"status": "skipped", "reason": skipped, "hint": setup.hint})
        if step is not None:
            await run_setup(
                step, self._note, script_dir=setup.script_dir, sandbox=self._agent.sandbox, network=self._agent.network
            )
        return None

    async def _close_network(self) -> None:
        """End the sandbox network's proxies (the agent closes them when it ends; a run whose
        setup step failed never started its agent, and its setup's proxies still listen)."""
        if self._agent.network is not None:
            await self._agent.network.aclose()

    async def _close_model(self, outcome: RunOutcome) -> RunOutcome:
        """Close the run's own model (the cassette is whole then); a replay that met a request
        the cassette did not hold fails the run with ``replay_mismatch``, whatever the agent said."""
        model, self.run_model = self.run_model, None
        if model is None:
            return outcome
        await model.aclose()
        mismatch = model.mismatch()
        if mismatch is None or outcome.status == "cancelled":
            return outcome
        return replace(outcome, status="failed", code=mismatch.code, message=mismatch.message, gate_id=None)

    async def _converse_or_rebuild(self, cwd: str) -> RunOutcome:
        try:
            return await self._converse(cwd)
        except AgentError:
            fallback, self.rebuilt_fallback = self.rebuilt_fallback, None
            if fallback is None or self._session_id is not None:
                raise  # not a native resume, or its session had started: a real failure
            self._agent, self._resume, prompt = await fallback()
            self.spec = replace(self.spec, prompt=prompt)
            self._note("resume", self._resume)  # the rebuilt path, logged before its prompt
            return await self._converse(cwd)

    async def _finish(self, outcome: RunOutcome, started: float) -> None:
        if self._gates is not None:
            with contextlib.suppress(Exception):
                await self._gates.settle()
        if outcome.status == "paused":
            await self._park(outcome)
            return
        if self._results is not None:  # the run's branch, logged before its final status
            try:
                await self._results.at_end(self.run_id, self._note, result=outcome.result)
            except Exception as exc:  # the run ends whatever happened to its branch
                self._note("error", {"code": "branch_failed", "message": f"{type(exc).__name__}: {exc}"[:4000]})
        params: StatusParams = {
            "status": outcome.status,
            "reason": outcome.code or outcome.stop_reason or "ended",
        }
        if outcome.status == "failed":
            params["code"] = outcome.code or "agent_error"
            params["message"] = outcome.message or ""
        else:
            params["stop_reason"] = outcome.stop_reason or "end_turn"
            params["num_turns"] = outcome.num_turns
            params["result"] = outcome.result
        params["usage"] = outcome.usage
        params["total_cost_usd"] = outcome.total_cost_usd
        params["duration_ms"] = outcome.duration_ms or int((time.monotonic() - started) * 1000)
        await self._lifecycle.end(params, code=outcome.code, message=outcome.message)
        self._log.close_run(self.run_id)

    async def _park(self, outcome: RunOutcome) -> None:
        """The run parked on a gate: no agent process is left and no executor holds it; only its
        rows remain until the gate is decided (baton.runs.parking)."""
        if run_process_ids(self.run_id):  # the agent is stopped; nothing of it may outlive the park
            await asyncio.to_thread(kill_run_processes, self.run_id)
        await self._lifecycle.park(outcome.gate_id or "", outcome.total_cost_usd)
        self._log.close_run(self.run_id)

    async def _start_mcp(self) -> None:
        """The run's MCP proxy (baton.mcp), before the agent starts: a sandboxed agent's network
        serves its endpoints in the namespace too."""
        if not self._mcp_servers or self._mcp is not None:
            return
        self._note("mcp_servers", {"servers": [server.describe() for server in self._mcp_servers]})
        proxy = McpProxy(
            self._mcp_servers,
            PolicyDecider(self._gatekeeper, self._mcp_gate),
            self._note,
            stderr_dir=self._mcp_stderr_dir,
        )
        await proxy.start()
        self._mcp = proxy
        network = self._agent.network
        if network is not None:
            network.mcp_serve = proxy.serve_socket

    async def _close_mcp(self) -> None:
        proxy, self._mcp = self._mcp, None
        if proxy is not None:
            await proxy.aclose()

    def _mcp_endpoints(self) -> list[HttpMcpServer]:
        """The endpoints handed to the agent in ``session/new``: one per server, baton's."""
        proxy = self._mcp
        if proxy is None:
            return []
        network = self._agent.network
        port = MCP_PORT if network is not None and network.plan.isolated else None
        return [
            HttpMcpServer(name=server.name, url=proxy.url(server.name, port=port), headers=[], type="http")
            for server in self._mcp_servers
        ]

    async def _mcp_gate(self, call: ToolCall, decision: Decision, bound_hash: str) -> McpVerdict:
        """An MCP call the policy asks about: the run's gates decide it (bound to its input)."""
        gates = self._gates
        if gates is None:
            return McpVerdict("deny", "no_human", f"{decision.message} (nobody can be asked here, so this is denied)")
        answer = await gates.decide(
            [call], decision, None, bound_call_id=call.tool_call_id, bound_input_hash=bound_hash, cancelled=self._cancel
        )
        message = answer.message
        if answer.behavior == "park":
            message = f"{call.tool_name} waits for a decision on gate {answer.gate_id}; the run parks"
        return McpVerdict(answer.behavior, answer.reason, message, gate_id=answer.gate_id)

    async def _converse(self, cwd: str) -> RunOutcome:
        try:
            await self._start_mcp()
            # An agent that traces joins the run's trace (W3C TRACEPARENT, docs/observability.md).
            environment = self._run_telemetry.environment() if self._run_telemetry is not None else None
            transport = await self._agent.start(environment=environment)
            if self._entry is not None:
                transport = ReplayTagger(AgentNormalizer(transport, self._entry))
            sink = self._snapshots.sink(self._log) if self._snapshots is not None else self._log
            stamp = self._run_telemetry.stamp if self._run_telemetry is not None else None
            tap = TappingTransport(transport, sink, self.run_id, stamp=stamp)
            self._gates = RunGates(
                self._store,
                self._lifecycle,
                self.run_id,
                self._note,
                self._gatekeeper,
                grace_seconds=self._gate_grace,
                expiry_seconds=self._gate_expiry,
                on_mode=self._mode_from_gate,
            )
            await self._gates.load()
            host = _UsageRecordingHost(
                self._gatekeeper,
                tap,
                self._log,
                self.run_id,
                self._entry,
                self._ask_human,
                self._gates,
                on_mode=self._mode_from_gate,
            )
            host.mcp_servers = frozenset(server.name for server in self._mcp_servers)
            sdk_spans_where_seen()
            conn = connect_to_agent(cast(Any, host), tap)
            try:
                return await self._drive(conn, host, cwd)
            except ConnectionError as exc:
                raise await self._exited() from exc
            finally:
                with contextlib.suppress(Exception):
                    await conn.close()
        finally:
            await self._agent.aclose()
            await self._close_mcp()

    async def _start_budget(self) -> None:
        budget = Budget(self.spec.budget_usd, self.spec.budget_turns, self.spec.budget_seconds)
        if not budget.empty:
            self._budget = RunBudget(
                self._store, self._lifecycle, self.run_id, budget, self._note, expiry_seconds=self._gate_expiry
            )
            await self._budget.start(await self._log.read(self.run_id))

    async def _mode_from_gate(self, mode: str) -> None:
        """A plan decision moves the run to another mode (baton.gates.kinds)."""
        if self._set_mode is not None:
            await self._set_mode(mode)
        else:
            self._gatekeeper.set_mode(mode)

    async def _drive(self, conn: Any, host: _UsageRecordingHost, cwd: str) -> RunOutcome:
        # Honest: the host serves fs/* (confined to the workspace) and no terminals.
        # (Gemini CLI 0.61 cannot create a file through a client's fs: its registry entry says no.)
        fs = self._entry is None or self._entry.client_fs
        capabilities = ClientCapabilities(
            fs=FileSystemCapabilities(read_text_file=fs, write_text_file=fs), terminal=False
        )
        try:
            async with asyncio.timeout(self._start_timeout):
                init = await conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=capabilities)
                mcp_servers = self._mcp_endpoints()
                if mcp_servers:
                    _check_mcp_supported(init.agent_capabilities, self._agent.name)
                command = self._agent.command if isinstance(self._agent, SubprocessAgent) else None
                meta = dict((command and command.session_meta) or {})
                session = None
                if self.restore is not None:
                    session = await restore_session(
                        conn, init.agent_capabilities, self.restore.session_id, cwd, meta, mcp_servers=mcp_servers
                    )
                    if session is None:  # the agent's session is gone: the rebuilt conversation instead
                        self.spec = replace(self.spec, prompt=self.restore.fallback_prompt)
                        self._note("resume", self.restore.fallback)
                if session is None:
                    session = await conn.new_session(cwd=cwd, mcp_servers=mcp_servers, **meta)
                if command is not None and command.session_mode is not None:
                    # The agent may pick its starting mode from the repository's settings: set ours.
                    await conn.set_session_mode(session_id=session.session_id, mode_id=command.session_mode)
        except TimeoutError as exc:
            raise AgentError("agent_start_timeout", f"the agent did not start in {self._start_timeout:g} s") from exc
        except RequestError as exc:
            raise _agent_error(exc) from exc
        self._session_id = session.session_id
        self._note("agent_session", {"agent_session_id": session.session_id, "adapter": self._agent.name})
        if self.spec.model:
            await _select_model(conn, session, self.spec.model)
        await self._store.update_run(self.run_id, agent_session_id=session.session_id)
        return await self._turns(conn, host, session.session_id)

    async def _turns(self, conn: Any, host: _UsageRecordingHost, session_id: str) -> RunOutcome:
        """The task's turn, then (interactive) one turn per message until a close, a cancel or
        the idle timeout; the run's inbox is read throughout (baton.runs.inbox)."""
        # The native setting a subprocess agent runs under: a later mode must stay enforceable on it.
        setting = _setting_of(self._entry, self._gatekeeper)

        async def set_mode(mode: str) -> None:
            policy = self._gatekeeper.policy.with_mode(mode)  # invalid_argument, bypass_refused_as_root
            if setting is not None:
                _check_enforceable(self._entry, setting, Gatekeeper(policy, self._gatekeeper.workspace))
            self._gatekeeper.set_mode(mode)
            await self._store.update_run(self.run_id, permission_mode=mode)
            if self._entry is None:  # baton's Claude adapter takes baton's modes; others keep their native one
                await conn.set_session_mode(session_id=session_id, mode_id=mode)

        self._set_mode = set_mode
        commands = RunCommands(
            run_mode=self.spec.run_mode, note=self._note, cancel=self.request_cancel, set_mode=set_mode
        )
        reader = InboxReader(
            self._store,
            self.run_id,
            taken_by=this_executor_id(),
            interval=self._inbox_poll_seconds,
            on_command=commands.handle,
        )
        async with reader:
            try:
                await self._start_budget()
                if self._budget is not None and self._budget.stopped is not None:
                    return _budget_exhausted(self.run_id, self._budget.stopped.id, self._budget.spend)
                outcome = await self._turn(conn, host, session_id, self.spec.prompt)
                while self.spec.run_mode == "interactive" and outcome.status == "finished" and not self._parked:
                    prompt = await commands.next_prompt(self._idle_seconds)
                    if prompt is None:
                        break
                    outcome = await self._turn(conn, host, session_id, prompt)
            finally:
                commands.end()  # what the reader's exit still hands on is refused in the log
        if outcome.status == "finished" and self._cancel.is_set():  # cancelled between turns
            outcome = replace(outcome, status="cancelled", stop_reason="cancelled")
        return outcome

    async def _turn(self, conn: Any, host: _UsageRecordingHost, session_id: str, prompt: str) -> RunOutcome:
        host.turn.params = None
        host.turn_started()
        assert self._gates is not None
        gates = self._gates
        waited_before = gates.waited_seconds()
        if self._budget is not None:
            self._budget.turn_started()
        prompt_task = asyncio.ensure_future(conn.prompt(session_id=session_id, prompt=[text_block(prompt)]))
        cancel_task = asyncio.ensure_future(self._cancel.wait())
        park_task = asyncio.ensure_future(gates.park_event.wait())
        clock_task = asyncio.ensure_future(self._out_of_time(waited_before))
        out_of_time = False
        try:
            await asyncio.wait({prompt_task, cancel_task, park_task, clock_task}, return_when=asyncio.FIRST_COMPLETED)
            if park_task.done() and not prompt_task.done() and self._entry is not None:
                # An ACP agent cannot defer: it is stopped with its permission request unanswered,
                # and on resume it proposes the call again.
                prompt_task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await prompt_task
                return self._parked_outcome()
            if clock_task.done() and not prompt_task.done() and not cancel_task.done():
                # The seconds budget ran out mid-turn: the turn is interrupted now, and the run
                # parks on its resource_limit gate (never goes on spending past the budget).
                out_of_time = True
                if not await self._interrupt(conn, host, session_id, prompt_task):
                    return await self._out_of_time_outcome(host, gates.waited_seconds() - waited_before)
            elif cancel_task.done() and not prompt_task.done():
                host.cancel_pending()
                await conn.cancel(session_id=session_id)
            try:
                response = await prompt_task
            except ConnectionError as exc:
                raise await self._exited() from exc
            except RequestError as exc:
                error = _agent_error(exc)
                failed_usage: dict[str, Any] = host.turn.params or {}
                return RunOutcome(
                    self.run_id,
                    "failed",
                    code=error.code,
                    message=error.message,
                    total_cost_usd=failed_usage.get("total_cost_usd"),
                    usage=failed_usage.get("usage"),
                    duration_ms=failed_usage.get("duration_ms"),
                )
        finally:
            cancel_task.cancel()
            park_task.cancel()
            clock_task.cancel()
        gate_wait = gates.waited_seconds() - waited_before
        usage: dict[str, Any] = host.turn.params or host.turn_usage(response)
        stop_reason = str(response.stop_reason)
        if self._snapshots is not None:  # a turn's snapshots are logged before its end
            await self._snapshots.settle()
        self._note(
            "turn_complete",
            {
                "stop_reason": stop_reason,
                "usage": usage.get("usage"),
                "total_cost_usd": usage.get("total_cost_usd"),
                "duration_ms": usage.get("duration_ms"),
                "gate_wait_ms": int(gate_wait * 1000),
            },
        )
        if self._parked and not self._cancel.is_set():  # Claude deferred the call: the turn ended, the run parks
            return self._parked_outcome()
        # Only a cancel baton asked for cancels the run: Codex also ends a turn "cancelled"
        # when a permission is answered with its only reject option (abort).
        cancelled = stop_reason == "cancelled" and self._cancel.is_set()
        if self._budget is not None and not self._cancel.is_set():
            limit = await self._budget.after_turn(
                host.turn.params or usage, usage.get("duration_ms"), gate_wait=gate_wait, out_of_time=out_of_time
            )
            if limit is not None:  # a resource_limit gate: the run parks on it until it is continued
                spent = self._budget.spend
                return RunOutcome(
                    self.run_id, "paused", stop_reason="parked", gate_id=limit.id, total_cost_usd=spent.usd
                )
        return RunOutcome(
            self.run_id,
            "cancelled" if cancelled else "finished",
            stop_reason=stop_reason,
            total_cost_usd=usage.get("total_cost_usd"),
            duration_ms=usage.get("duration_ms"),
            num_turns=usage.get("num_turns"),
            result=usage.get("result"),
            usage=usage.get("usage"),
        )

    async def _out_of_time(self, waited_before: float) -> None:
        """Returns when the run's seconds budget runs out during this turn (never without one);
        the clock stands still while a gate waits for a human."""
        assert self._gates is not None
        while True:
            left = (
                None
                if self._budget is None
                else self._budget.seconds_left(self._gates.waited_seconds() - waited_before)
            )
            if left is None:
                await asyncio.Event().wait()  # no seconds budget: only the other ends of the turn
                return
            if left <= 0 and not self._gates.waiting:
                return
            await asyncio.sleep(min(max(left, 0.02), _CLOCK_TICK))

    async def _interrupt(
        self, conn: Any, host: _UsageRecordingHost, session_id: str, prompt: asyncio.Future[Any]
    ) -> bool:
        """Interrupt the agent's turn (as a cancel does); whether its turn ended within the wait."""
        host.cancel_pending()
        with contextlib.suppress(Exception):
            await conn.cancel(session_id=session_id)
        done, _ = await asyncio.wait({prompt}, timeout=_INTERRUPT_WAIT_SECONDS)
        if done:
            return True
        prompt.cancel()  # the agent did not stop: it is stopped with the park (no process outlives it)
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await prompt
        return False

    async def _out_of_time_outcome(self, host: _UsageRecordingHost, gate_wait: float) -> RunOutcome:
        """The seconds budget ran out and the agent did not end its turn when asked: the turn is
        counted as it stands, the resource_limit gate opened and the run parks on it."""
        assert self._budget is not None
        usage: dict[str, Any] = host.turn.params or {}
        self._note(
            "turn_complete",
            {
                "stop_reason": "cancelled",
                "usage": usage.get("usage"),
                "total_cost_usd": usage.get("total_cost_usd"),
                "duration_ms": None,
                "gate_wait_ms": int(gate_wait * 1000),
            },
        )
        limit = await self._budget.after_turn(usage, None, gate_wait=gate_wait, out_of_time=True)
        assert limit is not None  # out_of_time always reaches a seconds budget
        spent = self._budget.spend.usd
        return RunOutcome(self.run_id, "paused", stop_reason="parked", gate_id=limit.id, total_cost_usd=spent)

    @property
    def _parked(self) -> bool:
        return self._gates is not None and self._gates.parked is not None

    def _parked_outcome(self) -> RunOutcome:
        assert self._gates is not None and self._gates.parked is not None
        return RunOutcome(self.run_id, "paused", stop_reason="parked", gate_id=self._gates.parked.id)

    async def _exited(self) -> AgentError:
        """``agent_exited`` with the exit status and the last stderr lines, when the agent is a process."""
        if isinstance(self._agent, SubprocessAgent):
            report = await self._agent.exit_report()
            return AgentError(
                "agent_exited",
                report.describe(),
                details={"returncode": report.returncode, "stderr_tail": report.stderr_tail},
            )
        return AgentError("agent_exited", "the agent closed the connection")


_CLOCK_TICK = 0.25  # how often a seconds budget is looked at during a turn
_INTERRUPT_WAIT_SECONDS = 10.0  # an interrupted agent gets this long to end its turn before it is stopped


def _budget_exhausted(run_id: str, gate_id: str, spend: Spend) -> RunOutcome:
    """The run ends at its budget: what it spent over all its turns is its cost and usage."""
    message = f"the run reached its budget and its resource_limit gate {gate_id} was not continued"
    usage = dict(spend.usage) if spend.usage else None
    return RunOutcome(run_id, "failed", code="budget_exhausted", message=message, total_cost_usd=spend.usd, usage=usage)


def _setting_of(entry: AgentEntry | None, gatekeeper: Gatekeeper) -> NativeSetting | None:
    if entry is None or not entry.settings:
        return None
    try:
        return choose_setting(entry, gatekeeper)
    except RefusedError:
        return None


def _check_enforceable(entry: AgentEntry | None, setting: NativeSetting, gatekeeper: Gatekeeper) -> None:
    """Refuse a mode under which the agent would do, without asking, what the policy gates."""
    escaping = [
        probe.description
        for probe in setting.unasked
        if gatekeeper.decide(probe.call(gatekeeper.workspace)).behavior != "allow"
    ]
    if escaping:
        name = entry.name if entry is not None else "the agent"
        raise RefusedError(
            "mode_not_enforceable",
            f"{name} runs under {setting.name}, where it would do without asking: " + "; ".join(escaping),
            details={"mode": gatekeeper.policy.mode, "escaping": escaping},
        )


async def _select_model(conn: Any, session: Any, model: str) -> None:
    """``--model`` through the agent's ``model`` config option, where it offers one with that value."""
    for option in getattr(session, "config_options", None) or ():
        data = option.model_dump(by_alias=True) if hasattr(option, "model_dump") else {}
        if data.get("id") != "model" and data.get("category") != "model":
            continue
        offered = [choice.get("value") for choice in data.get("options") or () if isinstance(choice, dict)]
        if data.get("currentValue") != model and model in offered:
            await conn.set_config_option(config_id=str(data["id"]), session_id=session.session_id, value=model)
        return


def _agent_error(exc: RequestError) -> AgentError:
    data = exc.data if isinstance(exc.data, dict) else {}
    code = str(data.get("code") or "agent_error")
    message = str(data.get("message") or exc)
    if code not in AgentError.family_codes:
        code = "agent_error"
    return AgentError(code, message)


def _check_mcp_supported(capabilities: Any, agent: str) -> None:
    """baton hands every MCP server to the agent as a streamable-HTTP endpoint of its proxy: an
    agent whose ``initialize`` does not offer ``mcpCapabilities.http`` cannot take them, and the
    run is refused rather than run without them."""
    mcp = getattr(capabilities, "mcp_capabilities", None)
    if mcp is None or not getattr(mcp, "http", False):
        raise RefusedError(
            "mcp_not_supported",
            f"the agent {agent} takes no MCP server over HTTP (its initialize offers no mcpCapabilities.http); "
            "run it without --mcp",
        )
