"""Building a run's execution for start, restart and resume; nothing runs until it is submitted.

Each path checks everything that can refuse the run before it records the run or takes it over
(docs/runs.md, docs/resume.md), then prepares the agent through :mod:`baton.runs.launching` and
builds the :class:`~baton.runs.executor.RunExecution` that :class:`~baton.runs.Baton` submits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from baton.acp.extensions import ResumeParams
from baton.acp.host import AskHuman
from baton.acp.replay import AgentRestore
from baton.agents.base import AgentProcess
from baton.agents.registry import AGENTS, AgentEntry
from baton.config import McpServerConfig, Settings
from baton.errors import BatonError, RefusedError, UsageError
from baton.gates import Gatekeeper, Policy
from baton.gates.budget import Budget, require_supported, spend_from_log
from baton.mcp import repository_mcp_servers, resolve_mcp_servers
from baton.results import Results
from baton.runs.budgeting import continue_budget
from baton.runs.executor import RebuiltFallback, RunExecution
from baton.runs.executors import this_executor_id
from baton.runs.fleet import check_labels, check_priority, fleet_request
from baton.runs.handoff import restore_latest_snapshot
from baton.runs.launching import ClaudeSession, LaunchedAgent, Launcher, PreparedLaunch, agent_entry
from baton.runs.model_source import RunModel, scenario_source
from baton.runs.parking import pending_gates
from baton.runs.resume import ResumePlan, check_resumable, plan_resume, rebuilt_prompt, resume_spec
from baton.runs.resumed_cassettes import bind_resumed, keep_journal, recording_of
from baton.runs.sandboxing import check_run_sandbox
from baton.runs.setup_gate import setup_gate_pending
from baton.runs.spec import RunSpec, require_repo, run_request, spec_of_request
from baton.runs.workspaces import check_workspace_free, holds_workspace
from baton.runs.workspacing import (
    discarded,
    forwarded_ports,
    instructions_of,
    made_workspace,
    recreated_workspace,
    setup_of,
)
from baton.snapshots import recorder_for
from baton.store import RunRecord, SessionLog, Store
from baton.store.redact import MIN_SECRET_LENGTH
from baton.workspaces.create import recreate_workspace
from baton.workspaces.instructions import RepoInstructions
from baton.workspaces.record import WorkspaceRecord, workspace_of
from baton.workspaces.setup import WorkspaceSetup
from baton.workspaces.trust import is_trusted

if TYPE_CHECKING:
    from baton.observability import Telemetry

__all__ = ["Preparer"]


class Preparer:
    """The executions of one :class:`~baton.runs.Baton`'s runs."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        log: SessionLog,
        launcher: Launcher,
        *,
        telemetry: Telemetry | None = None,
    ) -> None:
        self.telemetry = telemetry  # the process's (baton.observability), handed to each execution
        self.settings = settings
        self.store = store
        self.log = log
        self.launcher = launcher

    async def start(self, spec: RunSpec, ask_human: AskHuman | None) -> RunExecution:
        """Make the run's workspace (docs/workspaces.md), check the request, record the run
        (``workspace_busy`` atomically with it), build its execution."""
        if spec.labels or spec.priority is not None:
            raise UsageError(
                "invalid_argument", "labels and priority are for runs queued for the fleet (baton run --queue)"
            )
        spec, workspace = await made_workspace(self.settings, self.store, spec)
        try:
            entry, gatekeeper = await self._admit(spec)
            launch, model = await self.launcher.prepare_new(spec, entry, gatekeeper)
            try:
                return await self._start(spec, ask_human, launch, model, workspace)
            except BaseException:
                await model.aclose()
                raise
        except BaseException:
            await discarded(self.settings, workspace, str(spec.run_id))
            raise

    async def _start(
        self,
        spec: RunSpec,
        ask_human: AskHuman | None,
        launch: PreparedLaunch,
        model: RunModel,
        workspace: WorkspaceRecord,
    ) -> RunExecution:
        repo = str(Path(spec.repo).resolve())
        record = await self.store.create_run(
            agent=spec.agent,
            model=spec.model,
            permission_mode=spec.permission_mode,
            run_mode=spec.run_mode,
            repo=repo,
            cwd=repo,
            task_id=spec.task_id,
            budget_usd=spec.budget_usd,
            budget_turns=spec.budget_turns,
            budget_seconds=spec.budget_seconds,
            owner=spec.owner,
            run_id=spec.run_id,
            request=run_request(spec, launch.source, workspace.to_json()),
            executor_id=this_executor_id(),
            exclusive=holds_workspace,
        )
        return self._with_model(record, spec, launch, model, ask_human)

    def mcp_servers(self, spec: RunSpec, source_repo: str | None = None) -> tuple[McpServerConfig, ...]:
        """The run's MCP servers (baton.mcp.servers): configured ones, those its entries define,
        and those the repository commits when the configuration trusts it (``source_repo``: the
        user's repository a worktree or clone was made from)."""
        if not spec.mcp:
            return ()
        configured = list(self.settings.mcp_servers)
        repo = Path(spec.repo).resolve()
        if is_trusted(self.settings, source_repo or str(repo)):
            names = {server.name for server in configured}
            configured += [server for server in repository_mcp_servers(repo) if server.name not in names]
        servers = resolve_mcp_servers(spec.mcp, configured)
        for server in servers:  # its env and headers never reach the log (a value too short for a secret aside)
            for secret in server.secrets():
                if len(secret) >= MIN_SECRET_LENGTH:
                    self.launcher.redactor.add(secret)
        return servers

    def _with_model(
        self, record: RunRecord, spec: RunSpec, launch: PreparedLaunch, model: RunModel, ask_human: AskHuman | None
    ) -> RunExecution:
        """The execution of a run starting from its beginning (its workspace's setup first), which
        closes the run's own model when it ends."""
        run_id = record.id
        model.bind(workspace=Path(spec.repo).resolve(), agent_home=self.settings.run_dir(run_id) / "agent-home")
        keep_journal(model, self.settings, run_id)  # what a resume of a replayed run skips
        instructions = self._instructions(record, launch, spec)
        execution = self._execution(
            run_id,
            spec,
            launch.start(run_id, spec, instructions=_given(instructions), ports=forwarded_ports(record)),
            ask_human,
            model_source=launch.source,
            setup=setup_of(self.settings, record),
            instructions=instructions,
            mcp=self.mcp_servers(spec, _source_repo(record)),
        )
        execution.run_model = model
        return execution

    def _instructions(self, record: RunRecord, launch: PreparedLaunch, spec: RunSpec) -> RepoInstructions | None:
        """The repository's instructions for this execution's agent (docs/agents.md)."""
        return instructions_of(self.settings, record, launch.entry, Path(spec.repo).resolve())

    async def resume(
        self,
        run_id: str,
        prompt: str | None,
        repo: Path | None,
        ask_human: AskHuman | None,
        executing: set[str],
        scenario: str | None = None,
    ) -> tuple[ResumePlan | None, RunExecution]:
        """Check, take the run over (docs/resume.md), and build its execution.

        A run still ``queued`` never started (its process died first): it starts from its
        beginning, with no plan (``prompt`` and ``repo`` do not apply to it).
        """
        record = await self.store.get_run(run_id)
        check_resumable(record, prompt, executing)
        if record.status == "queued":
            return None, await self._restart(record, ask_human, scenario)
        if not record.is_terminal and (pending := await pending_gates(self.store, run_id)):
            raise RefusedError(
                "run_paused",
                f"run {run_id} waits for a decision on {', '.join(gate.id for gate in pending)}; decide it first",
                details={"gates": [gate.id for gate in pending]},
            )
        # Everything that can refuse is checked before the run is taken over.
        recreated = await recreated_workspace(self.settings, record) if repo is None else None
        spec = await resume_spec(self.log, record, repo)
        if scenario is not None:
            spec = replace(spec, scenario=scenario)
        if record.agent not in AGENTS and not spec.agent_command:
            raise RefusedError("run_not_resumable", f"baton does not know the agent {record.agent!r}")
        entry = agent_entry(spec)  # an --agent-cmd run starts its recorded command again
        if repo is not None or recreated is not None:
            # Elsewhere (perhaps another machine sharing the store), or a workspace made again:
            # the tree of the latest snapshot.
            await restore_latest_snapshot(self.store, self.settings, record.id, Path(spec.repo))
        policy = Policy.build(spec.permission_mode, allow=spec.allow, deny=spec.deny, ask=spec.ask, repo=spec.repo)
        gatekeeper = Gatekeeper(policy, Path(spec.repo))
        # A run replaying a cassette replays the rest of it, a recorded one records on
        # (baton.runs.resumed_cassettes); --scenario leaves both.
        recording = recording_of(_requested_source(record)) if scenario is None else None
        model: RunModel | None = None
        if scenario is None and (spec.replay is not None or recording is not None):
            launch, model = await self.launcher.prepare_resumed(
                spec, entry, gatekeeper, run_id=run_id, record=recording
            )
        else:
            launch = self.launcher.prepare(spec, entry, gatekeeper)
        try:
            await continue_budget(self.store, run_id)  # a continued resource_limit gate: the raised budget
            await check_workspace_free(self.store, Path(spec.repo), except_run=run_id)  # last: it reads other runs
            plan = await plan_resume(
                self.store, self.log, self.settings, run_id, prompt, repo=repo, executing=executing
            )
        except BaseException:
            if model is not None:
                await model.aclose()
            raise
        plan = replace(
            plan,
            spec=replace(plan.spec, scenario=spec.scenario, replay=spec.replay if model is not None else None),
            params={**plan.params, "model_source": launch.source},
        )
        if model is not None:
            bind_resumed(model, self.settings, source_run=run_id, run_id=plan.run_id, workspace=Path(plan.spec.repo))
        await self._record_model_source(plan.run_id, launch.source)
        session = None
        if launch.in_process:
            spent = spend_from_log(await self.log.read(plan.run_id))
            session = ClaudeSession(plan.resume_session_id, plan.continues_deferred, spent)
        instructions = self._instructions(record, launch, plan.spec)
        # A run that parked on its setup's gate (or whose process ended while it waited) gates it again first.
        gated = plan.run_id == run_id and setup_gate_pending(await self.log.read(run_id))
        task = plan.conversation.task
        if gated and prompt is None and task and not plan.conversation.view():
            # its agent never had a turn: it gets the task itself, not a continuation of nothing
            plan = replace(plan, spec=replace(plan.spec, prompt=task), params={**plan.params, "prompt": task})
        execution = self._execution(
            plan.run_id,
            plan.spec,
            launch.start(
                plan.run_id, plan.spec, claude=session, instructions=_given(instructions), ports=forwarded_ports(record)
            ),
            ask_human,
            resume=plan.params,
            resumed_from=plan.resumed_from,
            restore=None if launch.in_process else plan.restore,
            model_source=launch.source,
            instructions=instructions,
            mcp=self.mcp_servers(plan.spec, _source_repo(record)),
            setup=setup_of(self.settings, record) if gated else None,
        )
        if launch.in_process and plan.resume_session_id is not None:
            ports = forwarded_ports(record)
            execution.rebuilt_fallback = self._rebuilt_fallback(plan, launch, _given(instructions), ports)
        execution.run_model = model
        return plan, execution

    # The fleet (baton.runs.fleet, docs/fleet.md).

    async def queue(self, spec: RunSpec) -> RunRecord:
        """Record a fleet run ``queued`` with its whole request and no executor; nothing is made
        here (its worker clones the repository and starts the agent)."""
        if spec.workspace not in (None, "clone"):
            raise UsageError(
                "invalid_argument", "a fleet run works in a clone of its own on its worker (workspace clone)"
            )
        if spec.record is not None or spec.replay is not None or spec.include_uncommitted or spec.forked_from:
            raise UsageError("invalid_argument", "a fleet run cannot record, replay, fork or carry uncommitted files")
        labels = check_labels(spec.labels)
        priority = check_priority(spec.priority)
        repository = spec.repo_url or str(Path(spec.repo).absolute())
        entry = agent_entry(spec)  # an unknown agent is refused now
        budget = Budget.from_json({"usd": spec.budget_usd, "turns": spec.budget_turns, "seconds": spec.budget_seconds})
        require_supported(budget, agent=entry.name, reports_cost=entry.reports_cost)
        source = scenario_source(spec.scenario) if spec.scenario else {"kind": "endpoint", "url": None}
        fleet = {
            "repo": repository,
            "base": spec.base,
            "ref": spec.ref,
            "setup": spec.setup,
            "labels": labels,
            "priority": priority,
        }
        return await self.store.create_run(
            agent=spec.agent,
            model=spec.model,
            permission_mode=spec.permission_mode,
            run_mode=spec.run_mode,
            repo=repository,
            task_id=spec.task_id,
            budget_usd=spec.budget_usd,
            budget_turns=spec.budget_turns,
            budget_seconds=spec.budget_seconds,
            owner=spec.owner,
            run_id=spec.run_id,
            request={**run_request(spec, source), "fleet": fleet},
            executor_id=None,
        )

    async def dequeued(self, run_id: str, executing: set[str]) -> RunExecution:
        """The execution of a fleet run this worker dequeued, prepared from the store: a queued run
        starts in a new clone; one taken over from a dead worker continues from its log and its
        latest snapshot (``Baton.resume``'s path, in a workspace of this worker's)."""
        record = await self.store.get_run(run_id)
        fleet = fleet_request(record)
        if fleet is None:
            raise RefusedError("run_not_resumable", f"run {run_id} is not a fleet run")
        if record.is_terminal:
            raise RefusedError("run_ended", f"run {run_id} is {record.status}")
        if record.status == "queued":
            return await self._dequeued_start(record, fleet)
        workspace = workspace_of(record.request)
        if workspace is None:
            raise RefusedError("run_not_resumable", f"run {run_id} has no workspace to continue in")
        repo = await asyncio.to_thread(recreate_workspace, self.settings, workspace, run_id)
        if str(repo) != workspace.path:
            request = dict(record.request) if isinstance(record.request, dict) else {}
            request["workspace"] = {**workspace.to_json(), "path": str(repo)}
            await self.store.update_run(run_id, repo=str(repo), cwd=str(repo), request=request)
        _, execution = await self.resume(run_id, None, repo, None, executing)
        return execution

    async def _dequeued_start(self, record: RunRecord, fleet: Mapping[str, Any]) -> RunExecution:
        """Claim the queued run (compare-and-set), clone its repository here, start its agent; a
        refusal ends the run ``failed`` with the code and message (``clone_failed`` and git's words)."""
        run_id = record.id
        if not await self.store.claim_run(run_id, expected_executor=record.executor_id, executor_id=this_executor_id()):
            raise RefusedError("run_active", f"run {run_id} was taken by another worker")
        spec = spec_of_request(record)
        if spec is None:
            await self._refused(run_id, RefusedError("run_not_resumable", f"run {run_id} has no recorded request"))
            raise RefusedError("run_not_resumable", f"run {run_id} has no recorded request")
        spec = replace(
            spec,
            repo=Path(),
            repo_url=str(fleet["repo"]),
            workspace="clone",
            base=fleet.get("base"),
            ref=fleet.get("ref"),
            setup=fleet.get("setup"),
        )
        try:
            spec, workspace = await made_workspace(self.settings, self.store, spec)
        except BatonError as exc:
            await self._refused(run_id, exc)
            raise
        try:
            request = {**record.request, "workspace": workspace.to_json()} if isinstance(record.request, dict) else {}
            await self.store.update_run(run_id, repo=workspace.path, cwd=workspace.path, request=request)
            entry, gatekeeper = await self._admit(spec, except_run=run_id)
            launch, model = await self.launcher.prepare_new(spec, entry, gatekeeper)
        except BatonError as exc:
            await self._refused(run_id, exc)
            await discarded(self.settings, workspace, run_id)
            raise
        try:
            await self.store.update_run(run_id, request={**request, "model_source": launch.source})
            record = await self.store.get_run(run_id)
            return self._with_model(record, spec, launch, model, None)
        except BaseException:
            await model.aclose()
            raise

    async def _refused(self, run_id: str, exc: BatonError) -> None:
        """A dequeued run that cannot start here: ``failed`` with the refusal, visible in the run object."""
        await self.store.update_run(
            run_id,
            status="failed",
            status_reason=exc.code,
            error_code=exc.code,
            error_message=exc.message,
            executor_id=None,
        )

    async def _restart(self, record: RunRecord, ask_human: AskHuman | None, scenario: str | None) -> RunExecution:
        """A queued run whose process died before it started: take it over and start it from its
        beginning (its spec from ``runs.request``), as ``start`` would have."""
        spec = spec_of_request(record)
        if spec is None:
            raise RefusedError(
                "run_not_resumable",
                f"run {record.id} was queued by a process that died before it started, and its request "
                "was not recorded; start the task again",
            )
        if scenario is not None:
            spec = replace(spec, scenario=scenario)
        entry, gatekeeper = await self._admit(spec, except_run=record.id)
        # A restart replays its cassette again, but never records over one.
        launch, model = await self.launcher.prepare_new(replace(spec, record=None), entry, gatekeeper)
        try:
            if not await self.store.claim_run(
                record.id,
                expected_executor=record.executor_id,
                executor_id=this_executor_id(),
                exclusive=holds_workspace,
            ):
                raise RefusedError("run_active", f"run {record.id} was taken over by another process")
            return self._with_model(record, spec, launch, model, ask_human)
        except BaseException:
            await model.aclose()
            raise

    async def _admit(self, spec: RunSpec, *, except_run: str | None = None) -> tuple[AgentEntry, Gatekeeper]:
        """Everything that refuses a start before anything is recorded: the repository, the agent,
        the budget, a busy workspace (early; the store's claim decides a race)."""
        repo = require_repo(spec.repo)
        entry = agent_entry(spec)
        await check_workspace_free(self.store, repo.resolve(), except_run=except_run)
        budget = Budget.from_json({"usd": spec.budget_usd, "turns": spec.budget_turns, "seconds": spec.budget_seconds})
        require_supported(budget, agent=entry.name, reports_cost=entry.reports_cost)
        policy = Policy.build(spec.permission_mode, allow=spec.allow, deny=spec.deny, ask=spec.ask, repo=repo.resolve())
        check_run_sandbox(self.settings, spec)
        self.mcp_servers(spec)  # a name no configuration defines: refused before anything is recorded
        return entry, Gatekeeper(policy, repo.resolve())

    async def _record_model_source(self, run_id: str, source: dict[str, Any]) -> None:
        """The run's ``runs.request`` names the model source it continues on (``resume --scenario``
        changes it; a run continuing an ended one records it here first)."""
        record = await self.store.get_run(run_id)
        request = record.request if isinstance(record.request, dict) else {}
        recorded = request.get("model_source")
        if recorded == source or (isinstance(recorded, dict) and recorded.get("kind") == source["kind"] == "endpoint"):
            return  # an endpoint run keeps the endpoint it started on as its record
        await self.store.update_run(run_id, request={**request, "model_source": source})

    def _rebuilt_fallback(
        self, plan: ResumePlan, launch: PreparedLaunch, instructions: str | None, ports: tuple[int, ...]
    ) -> RebuiltFallback:
        """For a native Claude resume: the rebuilt path, should Claude Code fail to load its session."""

        async def rebuilt() -> tuple[AgentProcess, ResumeParams, str]:
            params: ResumeParams = {**plan.params, "path": "rebuilt"}
            prompt = rebuilt_prompt(plan.conversation, params["prompt"])
            session = ClaudeSession(None, False, spend_from_log(await self.log.read(plan.run_id)))
            agent = launch.start(plan.run_id, plan.spec, claude=session, instructions=instructions, ports=ports).agent
            return agent, params, prompt

        return rebuilt

    def _execution(
        self,
        run_id: str,
        spec: RunSpec,
        launched: LaunchedAgent,
        ask_human: AskHuman | None,
        *,
        resume: ResumeParams | None = None,
        resumed_from: str | None = None,
        restore: AgentRestore | None = None,
        model_source: dict[str, Any] | None = None,
        setup: WorkspaceSetup | None = None,
        instructions: RepoInstructions | None = None,
        mcp: tuple[McpServerConfig, ...] = (),
    ) -> RunExecution:
        self.log.open_run(run_id)
        return RunExecution(
            run_id=run_id,
            spec=spec,
            store=self.store,
            log=self.log,
            gatekeeper=launched.gatekeeper,
            agent=launched.agent,
            start_timeout=self.settings.agent_start_timeout_seconds,
            entry=launched.entry,
            resume=resume,
            resumed_from=resumed_from,
            restore=restore,
            ask_human=ask_human,
            model_source=model_source,
            setup=setup,
            instructions=instructions.describe() if instructions is not None else None,
            telemetry=self.telemetry,
            results=Results(self.store, self.settings, self.log),
            inbox_poll_seconds=self.settings.inbox_poll_seconds,
            idle_seconds=self.settings.interactive_idle_seconds,
            gate_grace_seconds=self.settings.gate_grace_seconds,
            gate_expiry_seconds=self.settings.gate_expiry_seconds,
            mcp_servers=mcp,
            mcp_stderr_dir=self.settings.run_dir(run_id),
            snapshots=recorder_for(
                run_id=run_id,
                run_dir=self.settings.run_dir(run_id),
                repo=Path(spec.repo).resolve(),
                home=self.settings.home,
                log=self.log,
                store=self.store,
            ),
        )


def _source_repo(record: RunRecord | None) -> str | None:
    """The user's repository a run's worktree or clone was made from (None: it works in place)."""
    workspace = workspace_of(record.request) if record is not None else None
    return workspace.repo if workspace is not None else None


def _given(instructions: RepoInstructions | None) -> str | None:
    """What the agent is given of the repository's instructions (None: nothing)."""
    return instructions.text() if instructions is not None else None


def _requested_source(record: RunRecord) -> Any:
    """The ``model_source`` in the run's ``runs.request`` (None when it has none)."""
    return record.request.get("model_source") if isinstance(record.request, dict) else None
