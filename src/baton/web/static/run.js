// A run: its events live (GET /v1/runs/{id}/events, read by sse.js and resumed with
// Last-Event-ID; an event already shown is never shown again), its gates inline with their
// decisions, snapshots with a diff viewer, cost and tokens, and its controls.

import { api, command, describeError } from "./api.js";
import { EventReader } from "./sse.js";
import { setTitle } from "./app.js";
import { renderEditDiff, renderPatch } from "./diff.js";
import { gateCard, fillCard, gateStore } from "./gates.js";
import { renderMarkdown } from "./markdown.js";
import { h, clear, formatCost, formatDuration, formatTokens, runDuration, statusBadge, ACTIVE } from "./dom.js";

const MODES = ["default", "acceptEdits", "plan", "bypassPermissions"];
const FRAME_BUDGET_MS = 8; // events rendered per animation frame: never a long main-thread task
const BLOCK_SIZE = 100; // events per block of the list (see item())

export async function render(main) {
  const runId = decodeURIComponent(location.pathname.split("/")[2] || "");
  setTitle(runId);
  let run;
  try {
    run = await api("GET", `/v1/runs/${encodeURIComponent(runId)}`);
  } catch (error) {
    main.append(h("h1", {}, "Run"), h("p", { class: "error", role: "alert" }, describeError(error)));
    return;
  }
  const view = new RunView(main, run);
  view.start();
}

class RunView {
  constructor(main, run) {
    this.main = main;
    this.run = run;
    this.lastSeq = 0;
    this.queue = [];
    this.scheduled = false;
    this.tools = new Map(); // tool_call_id → its block
    this.gateCards = new Map(); // gate id → card
    this.message = null; // the agent message being streamed: {node, text}
    this.usage = { input: 0, output: 0 };
    this.cost = run.total_cost_usd;
    this.traceId = null; // its OpenTelemetry trace, once known (showTrace)
    this.traceAsked = false;
    this.ended = false;
    this.build();
  }

  build() {
    const run = this.run;
    this.summary = h("dl", { class: "facts" });
    this.controls = h("section", { class: "controls", "aria-label": "Controls" });
    this.events = h("ol", { class: "events", "aria-label": "Events", "aria-live": "off" });
    this.events.batonSeqs = []; // the seqs shown, in order (a hook for tests and tools)
    this.events.batonReconnects = 0;
    this.snapshotBox = h("section", { class: "snapshots", "aria-labelledby": "snapshots-h" });
    this.streamState = h("p", { class: "muted small", "aria-live": "polite" });
    this.main.append(
      h("div", { class: "title-row" }, h("h1", {}, "Run ", h("span", { class: "run-id" }, run.id)), this.statusHolder = h("span")),
      this.summary,
      this.controls,
      h("h2", {}, "Events"),
      this.streamState,
      this.events,
      this.snapshotBox,
    );
    this.showFacts();
    this.showControls();
  }

  showFacts() {
    const run = this.run;
    clear(this.statusHolder).append(statusBadge(run.status));
    const facts = [
      ["Agent", run.agent + (run.model ? ` · ${run.model}` : "")],
      ["Repository", run.repo || "—"],
      ["Mode", `${run.permission_mode} · ${run.run_mode}`],
      ["Duration", formatDuration(runDuration(run))],
      ["Cost", formatCost(this.cost)],
      ["Tokens", `${formatTokens(this.usage.input)} in / ${formatTokens(this.usage.output)} out`],
    ];
    if (run.status_reason) facts.push(["Reason", run.status_reason]);
    if (this.traceId) facts.push(["Trace", this.traceId]); // its OpenTelemetry trace (GET /v1/runs/{id}/trace)
    const workspace = run.workspace && typeof run.workspace === "object" ? run.workspace : null;
    if (workspace) {
      if (workspace.kind) facts.push(["Workspace", workspace.kind + (workspace.path ? ` · ${workspace.path}` : "")]);
      if (workspace.branch) facts.push(["Branch", workspace.branch + (workspace.head_commit ? ` @ ${String(workspace.head_commit).slice(0, 10)}` : "")]);
      if (workspace.base_commit) facts.push(["Base", String(workspace.base_commit).slice(0, 10)]);
    }
    clear(this.summary);
    const wide = new Set(["Repository", "Workspace", "Branch", "Trace"]);
    for (const [name, value] of facts) this.summary.append(h("div", { class: wide.has(name) ? "wide" : null }, h("dt", {}, name), h("dd", {}, value)));
    if (workspace && workspace.pull_request_url) {
      this.summary.append(h("div", {}, h("dt", {}, "Pull request"), h("dd", {}, h("a", { href: workspace.pull_request_url, rel: "noopener noreferrer" }, workspace.pull_request_url))));
    }
  }

  // The trace id of the run's latest execution, when baton exported its trace (docs/observability.md).
  async showTrace() {
    try {
      const trace = (await api("GET", `/v1/runs/${encodeURIComponent(this.run.id)}/trace`)).trace;
      const traceId = trace && typeof trace.trace_id === "string" ? trace.trace_id : null;
      if (traceId === this.traceId) return;
      this.traceId = traceId;
      this.showFacts();
    } catch {
      // no trace to show
    }
  }

  showControls() {
    const run = this.run;
    clear(this.controls);
    if (!ACTIVE.has(run.status)) {
      this.showResultControls();
      return;
    }
    const feedback = h("p", { class: "muted small", "aria-live": "polite" });
    const act = async (method, params, done) => {
      feedback.className = "muted small";
      feedback.textContent = "Sending…";
      try {
        await command(run.id, method, params);
        feedback.textContent = done;
      } catch (error) {
        feedback.className = "error small";
        feedback.textContent = describeError(error);
      }
    };
    if (run.run_mode === "interactive") {
      const text = h("textarea", { id: "say", rows: "2", placeholder: "Message the agent" });
      const form = h("form", { class: "say" }, h("label", { for: "say" }, "Message"), text, h("button", { type: "submit" }, "Send"));
      form.addEventListener("submit", (event) => {
        event.preventDefault();
        if (!text.value.trim()) return;
        act("user_message", { content: text.value }, "Sent.").then(() => { text.value = ""; });
      });
      this.controls.append(form);
    }
    const mode = h("select", { id: "mode" }, MODES.map((m) => h("option", { value: m }, m)));
    mode.value = run.permission_mode;
    this.controls.append(
      h("div", { class: "row" },
        h("div", { class: "field" }, h("label", { for: "mode" }, "Permission mode"), mode),
        h("button", { type: "button", onclick: () => act("set_permission_mode", { permission_mode: mode.value }, `Mode: ${mode.value}.`) }, "Change mode"),
        h("button", { type: "button", class: "danger", onclick: () => act("cancel", {}, "Cancelling…") }, "Cancel run"),
      ),
      feedback,
    );
  }

  // An ended run's result as a branch: make it, push it, merge it (POST /v1/runs/{id}/branch|push|merge).
  showResultControls() {
    const run = this.run;
    const workspace = run.workspace && typeof run.workspace === "object" ? run.workspace : null;
    const feedback = h("p", { class: "muted small", "aria-live": "polite" });
    const path = (what) => `/v1/runs/${encodeURIComponent(run.id)}/${what}`;
    const act = async (what, body, done) => {
      feedback.className = "muted small";
      feedback.textContent = "Working…";
      try {
        const answer = await api("POST", path(what), body);
        feedback.textContent = done(answer);
        this.run = await api("GET", `/v1/runs/${encodeURIComponent(run.id)}`);
        this.showFacts();
        this.showControls();
        const after = this.controls.querySelector("[data-result-feedback]");
        if (after) after.textContent = feedback.textContent;
      } catch (error) {
        feedback.className = "error small";
        feedback.textContent = describeError(error);
      }
    };
    feedback.dataset.resultFeedback = "";
    const buttons = h("div", { class: "row" });
    if (!workspace || !workspace.branch) {
      buttons.append(h("button", { type: "button", onclick: () => act("branch", {}, (a) => (a.branch ? `Branch ${a.branch} made (${a.files_changed ?? "?"} files).` : `No branch: ${a.reason || "nothing changed"}.`)) }, "Make a branch"));
    } else {
      const remote = h("input", { type: "text", id: "push-remote", placeholder: "origin", autocomplete: "off" });
      const into = h("input", { type: "text", id: "merge-into", placeholder: "the checked-out branch", autocomplete: "off" });
      buttons.append(
        h("div", { class: "field" }, h("label", { for: "push-remote" }, "Remote"), remote),
        h("button", { type: "button", onclick: () => act("push", remote.value.trim() ? { remote: remote.value.trim() } : {}, (a) => `Pushed ${a.branch} to ${a.pushed_to || "the remote"}.`) }, "Push"),
        h("div", { class: "field" }, h("label", { for: "merge-into" }, "Merge into"), into),
        h("button", { type: "button", onclick: () => act("merge", into.value.trim() ? { into: into.value.trim() } : {}, (a) => `Merged ${a.branch} into ${a.into} (${a.kind}).`) }, "Merge"),
      );
    }
    this.controls.append(h("h2", { class: "small-h" }, "Result"), buttons, feedback);
  }

  start() {
    gateStore.subscribe((change) => {
      if (change.kind === "gate" && change.gate.run_id === this.run.id) this.showGate(change.gate);
      if (change.kind === "snapshot") {
        for (const gate of gateStore.pending()) if (gate.run_id === this.run.id) this.showGate(gate);
      }
    });
    this.connect();
    this.loadSnapshots();
  }

  // One reader of the run's events (sse.js: fetch and a streaming parser). After a drop it
  // reconnects with Last-Event-ID, the last seq received; after an overflow notice (the server
  // hangs up on a slow reader) from the last seq the notice names. A seq shown already is
  // dropped, so every event is shown once, in order. Frames are queued as they arrive (their
  // JSON parsed when shown) and shown in batches of FRAME_BUDGET_MS per animation frame.
  connect() {
    let opened = false;
    this.streamState.textContent = "Connecting…";
    this.source = new EventReader(`/v1/runs/${encodeURIComponent(this.run.id)}/events`, {
      onOpen: () => {
        if (opened) this.events.batonReconnects += 1;
        opened = true;
        this.streamState.textContent = "Live.";
      },
      onFrame: (frame) => this.take(frame),
      onDrop: () => {
        if (!this.ended) this.streamState.textContent = "Reconnecting…";
      },
      onFatal: (error) => {
        this.streamState.className = "error small";
        this.streamState.textContent = `The event stream stopped: ${error.message}.`;
      },
    }).start();
  }

  take(frame) {
    if (frame.type === "overflow") {
      const { last_id: lastId } = JSON.parse(frame.data);
      this.source.lastEventId = String(Math.max(lastId || 0, this.lastSeq));
      return;
    }
    if (frame.type === "error") {
      const { error } = JSON.parse(frame.data);
      this.streamState.className = "error small";
      this.streamState.textContent = `${error.code}: ${error.message}`;
      return;
    }
    const seq = Number(frame.id);
    if (!(seq > this.lastSeq)) return; // shown already (a resumed stream starts after it)
    this.lastSeq = seq;
    this.events.batonSeqs.push(seq);
    this.queue.push(frame);
    this.schedule();
  }

  schedule() {
    if (this.scheduled) return;
    this.scheduled = true;
    requestAnimationFrame(() => this.flush());
  }

  flush() {
    this.scheduled = false;
    const started = performance.now();
    let shown = 0;
    while (shown < this.queue.length && performance.now() - started < FRAME_BUDGET_MS) {
      const frame = this.queue[shown++];
      this.show(JSON.parse(frame.data));
    }
    this.queue.splice(0, shown); // (shift() one by one is quadratic on a long queue)
    if (this.message && this.message.dirty) this.renderMessage();
    this.showFacts();
    if (this.queue.length) this.schedule();
    else if (!this.traceAsked) {
      // Asked once the events received so far are shown: GET /trace reads the run's whole log,
      // which on a long run would delay the stream's first events on the server.
      this.traceAsked = true;
      this.showTrace();
    }
  }

  // Events go into blocks of BLOCK_SIZE (an li holding an ol of its own, both role none: to
  // assistive technology one flat list of events). A block off screen is skipped by layout
  // and paint (content-visibility: auto, style.css), so the page's cost stays that of the
  // blocks in view however long the run: one element per block is watched for visibility,
  // not one per event.
  item(kind, ...children) {
    if (!this.block || this.block.childElementCount >= BLOCK_SIZE) {
      this.block = h("ol", { class: "ev-list", role: "none" });
      this.events.append(h("li", { class: "ev-block", role: "none" }, this.block));
    }
    const node = h("li", { class: `ev ev-${kind}` }, ...children);
    this.block.append(node);
    return node;
  }

  renderMessage() {
    const message = this.message;
    clear(message.body).append(renderMarkdown(message.text));
    message.dirty = false;
  }

  show(event) {
    const data = event.data || {};
    if (event.type !== "message" || data.role !== "agent" || data.malformed) {
      if (this.message && this.message.dirty) this.renderMessage();
      this.message = null;
    }
    switch (event.type) {
      case "setup.started": {
        const state = h("span", { class: "tool-state" }, "running");
        const head = h("div", { class: "ev-head" }, h("span", { class: "who" }, "Setup"), h("code", {}, data.command || ""), h("span", { class: "muted" }, data.source === "option" ? " (--setup)" : data.source === "approved" ? " (approved at its gate)" : " (trusted repository)"), state);
        const output = h("pre", { class: "output setup-output", tabindex: "0" });
        this.setup = { node: this.item("setup", head, output), state, output };
        break;
      }
      case "setup.output":
        if (this.setup) this.setup.output.append((this.setup.output.textContent ? "\n" : "") + (data.text || ""));
        break;
      case "setup.finished": {
        const block = this.setup || { node: this.item("setup", h("span", { class: "who" }, "Setup")), state: h("span") };
        const ok = data.status === "finished";
        block.node.classList.add(ok ? "ok" : "failed");
        block.state.textContent = (ok ? "done" : data.exit_code !== undefined && data.exit_code !== null ? `exit ${data.exit_code}` : "could not start") + (data.duration_ms !== undefined && data.duration_ms !== null ? ` · ${formatDuration(data.duration_ms)}` : "");
        if (data.output_lines_omitted) block.node.append(h("p", { class: "muted" }, `${data.output_lines_omitted} more lines in the run's log`));
        this.setup = null;
        break;
      }
      case "setup.skipped":
        this.item("setup-skipped", h("span", { class: "who" }, "Setup skipped"), h("div", { class: "plain" }, data.reason || ""), data.hint ? h("p", { class: "hint" }, data.hint) : null);
        break;
      case "task.started":
        this.item("meta", `Started: ${data.agent}${data.model ? " · " + data.model : ""} in ${data.cwd || "?"} (${data.permission_mode}, ${data.run_mode})`);
        break;
      case "message":
        if (data.role === "agent" && !data.malformed) {
          if (!this.message) {
            const body = h("div", { class: "md" });
            this.item("agent", h("span", { class: "who" }, "Agent"), body);
            this.message = { body, text: "", dirty: false };
          }
          this.message.text += data.text || "";
          this.message.dirty = true;
        } else if (data.denied) {
          this.item("denied", h("span", { class: "who" }, "Denied"), `${data.tool || "call"}: ${data.text || ""}`);
        } else {
          this.item(data.malformed ? "malformed" : "user", h("span", { class: "who" }, data.malformed ? "Unreadable line" : "You"), h("div", { class: "plain" }, data.text || ""));
        }
        break;
      case "command.started":
        this.toolBlock(data.tool_call_id, data.tool || "Bash", data.command, data.edited ? data.original_command : null);
        break;
      case "command.finished": {
        const block = this.toolBlock(data.tool_call_id, "Bash", data.command, data.edited ? data.original_command : null);
        const failed = data.is_error || (data.exit_code !== undefined && data.exit_code !== null && data.exit_code !== 0);
        block.node.classList.add(data.denied ? "denied" : failed ? "failed" : "ok");
        block.state.textContent = data.denied ? "denied" : data.exit_code !== undefined && data.exit_code !== null ? `exit ${data.exit_code}` : failed ? "failed" : "done";
        if (data.output) {
          const output = h("pre", { class: "output", tabindex: "0" }, data.output);
          block.node.append(data.output.length > 2000 ? h("details", {}, h("summary", {}, `Output (${data.output.length} characters)`), output) : output);
        }
        break;
      }
      case "mcp.called":
        this.toolBlock(data.tool_call_id, `MCP ${data.server}`, `${data.tool} ${JSON.stringify(data.input ?? {})}`, null);
        break;
      case "mcp.finished": {
        const block = this.toolBlock(data.tool_call_id, `MCP ${data.server}`, `${data.tool} ${JSON.stringify(data.input ?? {})}`, null);
        block.node.classList.add(data.denied ? "denied" : data.is_error ? "failed" : "ok");
        block.state.textContent = data.denied ? `denied${data.reason ? " · " + data.reason : ""}` : data.is_error ? "failed" : "done";
        if (data.output) block.node.append(h("pre", { class: "output", tabindex: "0" }, data.output));
        break;
      }
      case "test.result": {
        const block = this.tools.get(data.tool_call_id);
        const badge = h("span", { class: `test ${data.passed ? "test-pass" : "test-fail"}` }, data.passed ? "tests passed" : "tests failed", data.framework ? ` (${data.framework})` : "");
        if (block) {
          block.head.append(badge);
          if (!data.passed) block.node.classList.replace("ok", "failed"); // exit 0 through a pipe, tests failed
        } else this.item("test", badge, " ", h("code", {}, data.command));
        break;
      }
      case "file.changed": {
        const title = h("div", { class: "ev-head" }, h("span", { class: "who" }, data.tool || "Edit"), h("code", {}, data.path), h("span", { class: "muted" }, ` ${data.change}`));
        const node = this.item("file", title);
        if (data.diff) node.append(renderEditDiff(data.path, data.diff.old_text, data.diff.new_text));
        break;
      }
      case "file.read":
        this.item("read", h("span", { class: "who" }, data.tool || "Read"), h("code", {}, data.path), data.pattern ? h("span", { class: "muted" }, ` ${data.pattern}`) : null);
        break;
      case "gate.opened": {
        const card = h("article", { class: "gate gate-pending", "data-gate-id": data.gate_id }, h("strong", {}, data.summary));
        this.gateCards.set(data.gate_id, card);
        this.item("gate", card);
        const known = gateStore.gates.get(data.gate_id);
        if (known) fillCard(card, known);
        else this.fetchGate(data.gate_id);
        break;
      }
      case "gate.resolved": {
        if (!this.gateCards.has(data.gate_id)) break;
        const known = gateStore.gates.get(data.gate_id);
        if (known && known.status !== "pending") fillCard(this.gateCards.get(data.gate_id), known);
        else this.fetchGate(data.gate_id);
        break;
      }
      case "snapshot.captured":
        this.item("snapshot", h("span", { class: "who" }, "Snapshot"), h("code", {}, data.snapshot_id), ` +${(data.added || []).length} ~${(data.modified || []).length} −${(data.deleted || []).length}`);
        this.loadSnapshots();
        break;
      case "branch.created":
        this.item("snapshot", h("span", { class: "who" }, "Branch"), h("code", {}, data.branch || "?"), ` ${data.files_changed ?? 0} files · +${data.insertions ?? 0} −${data.deletions ?? 0}`);
        break;
      case "turn.finished":
        this.addUsage(data);
        this.item("turn", `Turn finished (${data.stop_reason || "?"}) · ${formatTokens((data.usage || {}).input_tokens)} in / ${formatTokens((data.usage || {}).output_tokens)} out · ${formatCost(data.total_cost_usd)}`);
        break;
      case "task.finished":
      case "task.failed":
        this.end(event);
        break;
      default:
        this.item("meta", event.type);
    }
  }

  addUsage(data) {
    const usage = data.usage || {};
    this.usage.input += Number(usage.input_tokens) || 0;
    this.usage.output += Number(usage.output_tokens) || 0;
    if (data.total_cost_usd !== undefined && data.total_cost_usd !== null) this.cost = data.total_cost_usd;
  }

  toolBlock(id, tool, commandText, original) {
    let block = this.tools.get(id);
    if (!block) {
      const state = h("span", { class: "tool-state" }, "running");
      const head = h("div", { class: "ev-head" }, h("span", { class: "who" }, tool), state);
      const node = this.item("tool", head, h("pre", { class: "command" }, "$ " + (commandText || "")));
      block = { node, head, state };
      this.tools.set(id, block);
    } else if (commandText) {
      block.node.querySelector(".command").textContent = "$ " + commandText;
    }
    if (original && !block.node.querySelector(".edited")) {
      block.head.append(h("span", { class: "edited" }, "edited from: ", h("code", {}, original)));
    }
    return block;
  }

  showGate(gate) {
    const card = this.gateCards.get(gate.id);
    if (card) fillCard(card, gate);
  }

  async fetchGate(gateId) {
    try {
      const page = await api("GET", `/v1/gates?run_id=${encodeURIComponent(this.run.id)}&limit=1000`);
      for (const gate of page.gates) this.showGate(gate);
    } catch (error) {
      const card = this.gateCards.get(gateId);
      if (card) card.append(h("p", { class: "error" }, describeError(error)));
    }
  }

  async end(event) {
    const data = event.data || {};
    this.ended = true;
    if (this.source) this.source.close();
    if (data.total_cost_usd !== undefined && data.total_cost_usd !== null) this.cost = data.total_cost_usd;
    const node = this.item(event.type === "task.failed" ? "failed" : "finished",
      h("strong", {}, event.type === "task.failed" ? `Failed: ${data.code || ""}` : `Finished (${data.stop_reason || "end"})`),
      data.message ? h("div", { class: "plain" }, data.message) : null,
      data.num_turns !== undefined ? h("span", { class: "muted" }, ` · ${data.num_turns} turns · ${formatDuration(data.duration_ms)} · ${formatCost(data.total_cost_usd)}`) : null);
    node.dataset.end = "";
    this.streamState.textContent = "The run has ended.";
    for (let i = 0; i < 20; i++) { // the run's row is written just after its last event
      try {
        this.run = await api("GET", `/v1/runs/${encodeURIComponent(this.run.id)}`);
      } catch {
        break;
      }
      if (!ACTIVE.has(this.run.status)) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    this.showFacts();
    this.showTrace(); // a resumed run's execution has a trace of its own
    this.showControls();
    this.loadSnapshots();
  }

  async loadSnapshots() {
    let snapshots;
    try {
      snapshots = (await api("GET", `/v1/runs/${encodeURIComponent(this.run.id)}/snapshots`)).snapshots;
    } catch (error) {
      clear(this.snapshotBox).append(h("h2", { id: "snapshots-h" }, "Snapshots"), h("p", { class: "error" }, describeError(error)));
      return;
    }
    const box = clear(this.snapshotBox);
    box.append(h("h2", { id: "snapshots-h" }, "Snapshots and diff"));
    if (!snapshots.length) {
      box.append(h("p", { class: "muted" }, "No snapshot yet."));
      return;
    }
    const points = [["base", "base (the repository's HEAD)"], ["start", "start (before the run)"], ...snapshots.map((s) => [s.id, `${s.id} · ${s.created_at || ""}`])];
    const from = h("select", { id: "diff-from" }, points.map(([value, label]) => h("option", { value }, label)));
    const to = h("select", { id: "diff-to" }, points.filter(([value]) => value !== "base" && value !== "start").map(([value, label]) => h("option", { value }, label)));
    to.value = snapshots[snapshots.length - 1].id;
    const out = h("div", { class: "diff-out" });
    const show = async () => {
      try {
        const patch = await api("GET", `/v1/runs/${encodeURIComponent(this.run.id)}/diff?from=${encodeURIComponent(from.value)}&to=${encodeURIComponent(to.value)}`);
        clear(out).append(renderPatch(patch));
      } catch (error) {
        clear(out).append(h("p", { class: "error", role: "alert" }, describeError(error)));
      }
    };
    from.addEventListener("change", show);
    to.addEventListener("change", show);
    box.append(
      h("ul", { class: "snaplist" }, snapshots.map((s) => h("li", {}, h("code", {}, s.id), ` +${s.added.length} ~${s.modified.length} −${s.deleted.length}`, s.added.concat(s.modified).length ? h("span", { class: "muted" }, " " + s.added.concat(s.modified).slice(0, 6).join(", ")) : null))),
      h("div", { class: "row" }, h("div", { class: "field" }, h("label", { for: "diff-from" }, "From"), from), h("div", { class: "field" }, h("label", { for: "diff-to" }, "To"), to)),
      out,
    );
    await show();
  }
}
