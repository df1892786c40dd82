// New task: POST /v1/runs with a repository, a prompt, the agent, modes, rules and budget; then
// the run's page. A workspace choice appears when the server's OpenAPI document offers one.

import { api, describeError } from "./api.js";
import { h } from "./dom.js";

function field(id, label, control, hint) {
  control.id = id;
  return h("div", { class: "field" }, h("label", { for: id }, label), control, hint ? h("p", { class: "muted small", id: id + "-hint" }, hint) : null);
}

function lines(text) {
  return text.split("\n").map((line) => line.trim()).filter(Boolean);
}

async function workspaceKinds() {
  try {
    const schema = await api("GET", "/openapi.json");
    const create = schema.components.schemas.CreateRunRequest;
    const property = create && create.properties && create.properties.workspace;
    if (!property) return null;
    const ref = (property.anyOf || [property]).map((item) => item.$ref).find(Boolean);
    const target = ref ? schema.components.schemas[ref.split("/").pop()] : property;
    const kind = target && target.properties && target.properties.kind;
    const values = kind && (kind.enum || (kind.anyOf || []).flatMap((item) => item.enum || []));
    return values && values.length ? values : null;
  } catch {
    return null;
  }
}

export async function render(main) {
  const repo = h("input", { type: "text", required: true, autocomplete: "off", spellcheck: "false", placeholder: "/home/me/project" });
  const prompt = h("textarea", { rows: "6", required: true });
  const agent = h("input", { type: "text", value: "claude", list: "agents", autocomplete: "off" });
  const model = h("input", { type: "text", placeholder: "the agent's default", autocomplete: "off" });
  const mode = h("select", {}, ["default", "acceptEdits", "plan", "bypassPermissions"].map((m) => h("option", { value: m }, m)));
  const runMode = h("select", {}, [["background", "background (one prompt)"], ["interactive", "interactive (messages)"]].map(([v, l]) => h("option", { value: v }, l)));
  const allow = h("textarea", { rows: "2", spellcheck: "false", placeholder: "Bash(npm test:*)" });
  const deny = h("textarea", { rows: "2", spellcheck: "false", placeholder: "Write(secrets/**)" });
  const usd = h("input", { type: "number", min: "0", step: "0.01", inputmode: "decimal" });
  const turns = h("input", { type: "number", min: "1", step: "1", inputmode: "numeric" });
  const seconds = h("input", { type: "number", min: "1", step: "1", inputmode: "numeric" });
  const error = h("p", { class: "error", role: "alert" });
  const submit = h("button", { type: "submit", class: "primary" }, "Start run");
  const form = h("form", { class: "new-task", "aria-label": "New task" },
    field("repo", "Repository", repo, "A git repository on the server (an absolute path)."),
    field("prompt", "Prompt", prompt),
    h("div", { class: "row" }, field("agent", "Agent", agent), field("model", "Model", model)),
    h("datalist", { id: "agents" }, ["claude", "claude-acp", "codex", "gemini", "opencode"].map((name) => h("option", { value: name }))),
    h("div", { class: "row" }, field("mode", "Permission mode", mode), field("run-mode", "Run mode", runMode)),
    h("div", { class: "row" }, field("allow", "Allow rules (one a line)", allow), field("deny", "Deny rules (one a line)", deny)),
    h("fieldset", {}, h("legend", {}, "Budget (optional)"), h("div", { class: "row" }, field("budget-usd", "USD", usd), field("budget-turns", "Turns", turns), field("budget-seconds", "Seconds", seconds))),
    error,
    submit,
  );
  main.append(h("h1", {}, "New task"), form);
  const kinds = await workspaceKinds();
  let workspace = null;
  if (kinds) {
    workspace = h("select", {}, [h("option", { value: "" }, "the server's default"), ...kinds.map((kind) => h("option", { value: kind }, kind))]);
    form.insertBefore(field("workspace", "Workspace", workspace), error);
  }
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.textContent = "";
    const body = { prompt: prompt.value, repo: repo.value.trim(), agent: agent.value.trim() || "claude", permission_mode: mode.value, run_mode: runMode.value };
    if (model.value.trim()) body.model = model.value.trim();
    if (lines(allow.value).length) body.allow = lines(allow.value);
    if (lines(deny.value).length) body.deny = lines(deny.value);
    const budget = {};
    if (usd.value) budget.usd = Number(usd.value);
    if (turns.value) budget.turns = Number(turns.value);
    if (seconds.value) budget.seconds = Number(seconds.value);
    if (Object.keys(budget).length) body.budget = budget;
    if (workspace && workspace.value) body.workspace = { kind: workspace.value };
    submit.disabled = true;
    try {
      const run = await api("POST", "/v1/runs", body);
      location.assign(`/runs/${encodeURIComponent(run.id)}`);
    } catch (failure) {
      error.textContent = describeError(failure);
      submit.disabled = false;
    }
  });
}
