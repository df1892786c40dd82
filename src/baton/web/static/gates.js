// Gates: one live store per tab (GET /v1/gates/events) and the card that shows a gate and
// decides it. Each card carries data-gate-id and holds its decision buttons; one click decides,
// bound to exactly the input shown (bound_call_id and bound_input_hash echoed verbatim).

import { api, describeError } from "./api.js";
import { renderMarkdown } from "./markdown.js";
import { h, clear, formatTime } from "./dom.js";

// The pending gates the caller may see, kept live; listeners get (gates, change?).
class GateStore {
  constructor() {
    this.gates = new Map(); // every gate seen, by id (pending or decided)
    this.listeners = new Set();
    this.ready = false;
    this.source = null;
  }

  start() {
    if (this.source) return;
    this.source = new EventSource("/v1/gates/events");
    this.source.addEventListener("snapshot", (event) => {
      const { gates } = JSON.parse(event.data);
      const pending = new Set(gates.map((gate) => gate.id));
      for (const [id, gate] of this.gates) {
        if (gate.status === "pending" && !pending.has(id)) this.gates.delete(id); // decided while away
      }
      const fresh = gates.filter((gate) => !this.gates.has(gate.id));
      for (const gate of gates) this.gates.set(gate.id, gate);
      const first = !this.ready;
      this.ready = true;
      this.emit({ kind: "snapshot", fresh: first ? [] : fresh });
    });
    this.source.addEventListener("gate", (event) => {
      const { gate } = JSON.parse(event.data);
      const known = this.gates.get(gate.id);
      if (known && known.status !== "pending" && gate.status === "pending") return; // stale
      this.gates.set(gate.id, gate);
      this.emit({ kind: "gate", gate, fresh: !known && gate.status === "pending" ? [gate] : [] });
    });
  }

  apply(gate) {
    this.gates.set(gate.id, gate);
    this.emit({ kind: "gate", gate, fresh: [] });
  }

  pending() {
    return [...this.gates.values()].filter((gate) => gate.status === "pending").sort((a, b) => (a.id < b.id ? -1 : 1));
  }

  subscribe(listener) {
    this.listeners.add(listener);
    if (this.ready) listener({ kind: "snapshot", fresh: [] });
    return () => this.listeners.delete(listener);
  }

  emit(change) {
    for (const listener of this.listeners) listener(change);
  }
}

export const gateStore = new GateStore();

function binding(gate) {
  return { bound_call_id: gate.bound_call_id, bound_input_hash: gate.bound_input_hash };
}

const PATHS = { tool: "decide", question: "answer", plan_review: "plan-review", resource_limit: "continue" };

async function send(card, gate, path, body) {
  const status = card.querySelector("[data-gate-status]");
  for (const button of card.querySelectorAll("button")) button.disabled = true;
  status.textContent = "Sending…";
  status.className = "gate-status";
  try {
    const decided = await api("POST", `/v1/gates/${encodeURIComponent(gate.id)}/${path}`, body);
    gateStore.apply(decided);
  } catch (error) {
    // Shown as it is and never retried: a changed or decided gate must be looked at again.
    status.className = "gate-status error";
    status.setAttribute("role", "alert");
    let text = describeError(error);
    if (error.code === "approval_binding_mismatch") {
      text = "This gate no longer matches what is shown (its input changed): nothing was decided. " + text;
    } else if (error.code === "gate_not_pending") {
      text = "Someone decided this gate already: " + text;
    }
    status.textContent = text;
    for (const button of card.querySelectorAll("button")) button.disabled = false;
  }
}

function field(label, control, hint) {
  const id = "f" + Math.random().toString(36).slice(2);
  control.id = id;
  return h("div", { class: "field" }, h("label", { for: id }, label), control, hint ? h("p", { class: "muted" }, hint) : null);
}

function asked(gate) {
  if (gate.kind === "tool") {
    const input = gate.input || {};
    const shown = [];
    if (gate.tool_name === "baton_setup") {
      // The repository's .baton/setup (docs/workspaces.md "Setup"): approving runs exactly this text.
      shown.push(h("p", {}, gate.summary || ""));
      shown.push(h("p", { class: "muted" }, h("code", {}, String(input.path)), ` · sha256 ${input.sha256}`));
      shown.push(h("pre", { class: "code setup-script" }, String(input.script || "")));
    } else if (typeof input.command === "string") {
      shown.push(h("pre", { class: "command" }, "$ " + input.command));
    } else if (typeof input.file_path === "string" && (input.old_string !== undefined || input.content !== undefined)) {
      shown.push(h("p", {}, h("code", {}, input.file_path)));
      shown.push(h("pre", { class: "code" }, JSON.stringify(input, null, 2)));
    } else {
      shown.push(h("pre", { class: "code" }, JSON.stringify(input, null, 2)));
    }
    return shown;
  }
  if (gate.kind === "plan_review") return [h("div", { class: "md plan" }, renderMarkdown(gate.plan || ""))];
  if (gate.kind === "resource_limit") return [h("p", {}, gate.summary)];
  return [];
}

function toolControls(card, gate) {
  const reason = h("input", { type: "text", placeholder: "optional", autocomplete: "off" });
  const interrupt = h("input", { type: "checkbox" });
  const editor = h("textarea", { rows: "6", spellcheck: "false" });
  editor.value = JSON.stringify(gate.input || {}, null, 2);
  const editError = h("p", { class: "error", role: "alert" });
  const approveEdited = h("button", {
    type: "button",
    onclick: () => {
      let edited;
      try {
        edited = JSON.parse(editor.value);
      } catch (error) {
        editError.textContent = "Not JSON: " + error.message;
        return;
      }
      editError.textContent = "";
      send(card, gate, "decide", { decision: "approve", ...binding(gate), updated_input: edited });
    },
  }, "Approve edited");
  const buttons = h(
    "div",
    { class: "buttons" },
    h("button", { type: "button", class: "primary", onclick: () => send(card, gate, "decide", { decision: "approve", ...binding(gate) }) }, "Approve"),
    h("button", {
      type: "button",
      class: "danger",
      onclick: () =>
        send(card, gate, "decide", {
          decision: "deny",
          ...binding(gate),
          ...(reason.value ? { reason: reason.value } : {}),
          ...(interrupt.checked ? { interrupt: true } : {}),
        }),
    }, "Deny"),
    gate.suggested_rule
      ? h("button", {
          type: "button",
          title: `Allow ${gate.suggested_rule} for the rest of this run`,
          onclick: () => send(card, gate, "decide", { decision: "approve", ...binding(gate), remember: "session" }),
        }, "Always for this run")
      : null,
  );
  return [
    buttons,
    gate.suggested_rule ? h("p", { class: "muted" }, "Always for this run allows ", h("code", {}, gate.suggested_rule)) : null,
    h("div", { class: "row" }, field("Reason (shown to the agent on deny)", reason), h("label", { class: "check" }, interrupt, " Interrupt the turn")),
    gate.tool_name === "baton_setup"
      ? null // a setup script runs as shown or not at all: an edited one never runs
      : h("details", {}, h("summary", {}, "Edit the input, then approve"), field("Input (JSON)", editor), editError, h("div", { class: "buttons" }, approveEdited)),
  ];
}

function questionControls(card, gate) {
  const groups = (gate.questions || []).map((question, index) => {
    const name = `q-${gate.id}-${index}`;
    const multi = Boolean(question.multiSelect);
    const options = (question.options || []).map((option) =>
      h("label", { class: "check" }, h("input", { type: multi ? "checkbox" : "radio", name, value: option.label }), " ", option.label, option.description ? h("span", { class: "muted" }, " — " + option.description) : null),
    );
    const other = question.allowFreeText ? h("input", { type: "text", placeholder: "Other (your own answer)", "data-other": "" }) : null;
    return h("fieldset", { class: "question", "data-header": question.header }, h("legend", {}, question.question || question.header), options, other ? field("Other", other) : null);
  });
  const answer = h("button", {
    type: "button",
    class: "primary",
    onclick: () => {
      const answers = groups.map((group) => {
        const selected = [...group.querySelectorAll("input:checked")].map((input) => input.value);
        const other = group.querySelector("[data-other]");
        if (other && other.value.trim()) selected.push(other.value.trim());
        return { header: group.dataset.header, selected };
      });
      send(card, gate, "answer", { answers, ...binding(gate) });
    },
  }, "Answer");
  return [...groups, h("div", { class: "buttons" }, answer)];
}

function planControls(card, gate) {
  const feedback = h("input", { type: "text", placeholder: "what to change", autocomplete: "off" });
  const editor = h("textarea", { rows: "8" });
  editor.value = gate.plan || "";
  return [
    h("div", { class: "buttons" },
      h("button", { type: "button", class: "primary", onclick: () => send(card, gate, "plan-review", { decision: "approve" }) }, "Approve plan"),
      h("button", { type: "button", class: "danger", onclick: () => send(card, gate, "plan-review", { decision: "reject", ...(feedback.value ? { reason: feedback.value } : {}) }) }, "Reject"),
    ),
    field("Feedback (with Reject)", feedback),
    h("details", {}, h("summary", {}, "Edit the plan, then approve"), field("Plan", editor),
      h("div", { class: "buttons" }, h("button", { type: "button", onclick: () => send(card, gate, "plan-review", { decision: "edit", edited_plan: editor.value }) }, "Approve edited plan"))),
  ];
}

function budgetControls(card, gate) {
  const usd = h("input", { type: "number", min: "0", step: "0.01", inputmode: "decimal" });
  const turns = h("input", { type: "number", min: "1", step: "1", inputmode: "numeric" });
  const seconds = h("input", { type: "number", min: "1", step: "1", inputmode: "numeric" });
  return [
    h("div", { class: "row" }, field("New budget: USD", usd), field("Turns", turns), field("Seconds", seconds)),
    h("div", { class: "buttons" },
      h("button", {
        type: "button",
        class: "primary",
        onclick: () => {
          const budget = {};
          if (usd.value) budget.usd = Number(usd.value);
          if (turns.value) budget.turns = Number(turns.value);
          if (seconds.value) budget.seconds = Number(seconds.value);
          send(card, gate, "continue", Object.keys(budget).length ? { budget } : {});
        },
      }, "Continue"),
      h("button", { type: "button", class: "danger", onclick: () => send(card, gate, "decide", { decision: "deny" }) }, "Deny"),
    ),
  ];
}

function decisionText(gate) {
  const decision = gate.decision || {};
  const parts = [gate.status];
  if (decision.decision && decision.decision !== gate.status) parts.push(`(${decision.decision})`);
  if (decision.reason) parts.push(`— ${decision.reason}`);
  if (decision.remember_rule) parts.push(`— allowed for this run: ${decision.remember_rule}`);
  if (decision.updated_input) parts.push("— with an edited input");
  if (gate.decided_by) parts.push(`by ${gate.decided_by}`);
  if (gate.decided_at) parts.push(`at ${formatTime(gate.decided_at)}`);
  return parts.join(" ");
}

// The card of a gate; `options.runLink` adds a link to its run (the inbox).
export function gateCard(gate, options = {}) {
  const card = h("article", { class: `gate gate-${gate.status}`, "data-gate-id": gate.id, "aria-label": `Gate: ${gate.summary}` });
  fillCard(card, gate, options);
  return card;
}

export function fillCard(card, gate, options = {}) {
  clear(card);
  card.className = `gate gate-${gate.status}`;
  const head = h("header", { class: "gate-head" },
    h("span", { class: `kind kind-${gate.kind}` }, gate.kind.replace("_", " ")),
    h("strong", {}, gate.summary),
    options.runLink ? h("a", { href: `/runs/${encodeURIComponent(gate.run_id)}` }, gate.run_id) : null,
  );
  card.append(head, ...asked(gate));
  if (gate.bound_input_hash) {
    card.append(h("p", { class: "muted small" }, "Bound to input ", h("code", { class: "hash" }, gate.bound_input_hash.slice(0, 16)), " · opened ", formatTime(gate.created_at)));
  }
  if (gate.status === "pending") {
    const controls =
      gate.kind === "tool" ? toolControls(card, gate)
      : gate.kind === "question" ? questionControls(card, gate)
      : gate.kind === "plan_review" ? planControls(card, gate)
      : budgetControls(card, gate);
    card.append(...controls);
  } else {
    card.append(h("p", { class: "decision" }, decisionText(gate)));
  }
  card.append(h("p", { class: "gate-status", "data-gate-status": "", "aria-live": "polite" }));
}
