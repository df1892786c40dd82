// Runs: every run the viewer may see (each with the first line of its prompt), newest first, filtered and paginated, kept live
// (GET /v1/runs?order=newest&summary=true again every few seconds while a listed run is
// active, and at once when a gate opens or is decided).

import { api, describeError } from "./api.js";
import { gateStore } from "./gates.js";
import { h, clear, formatCost, formatDuration, formatTokens, runDuration, statusBadge, workspaceLabel, ACTIVE } from "./dom.js";

const STATUSES = ["", "queued", "running", "paused", "interrupted", "finished", "failed", "cancelled"];
const AGENTS = ["", "claude", "claude-acp", "codex", "gemini", "opencode"];
const PAGE_SIZE = 50;

export async function render(main) {
  const params = new URLSearchParams(location.search);
  const status = h("select", { id: "filter-status", name: "status" }, STATUSES.map((s) => h("option", { value: s }, s || "any")));
  status.value = params.get("status") || "";
  const agent = h("select", { id: "filter-agent", name: "agent" }, AGENTS.map((a) => h("option", { value: a }, a || "any")));
  agent.value = params.get("agent") || "";
  const repo = h("input", { id: "filter-repo", name: "repo", type: "text", placeholder: "/path/to/repo", value: params.get("repo") || "" });
  const form = h("form", { class: "filters", role: "search", "aria-label": "Filter runs" },
    h("div", { class: "field" }, h("label", { for: "filter-status" }, "Status"), status),
    h("div", { class: "field" }, h("label", { for: "filter-agent" }, "Agent"), agent),
    h("div", { class: "field grow" }, h("label", { for: "filter-repo" }, "Repository"), repo),
    h("button", { type: "submit" }, "Filter"),
  );
  const list = h("div", { class: "runs", role: "list", "aria-label": "Runs" });
  const pager = h("nav", { class: "pager", "aria-label": "Pages" });
  const message = h("p", { class: "muted", "aria-live": "polite" });
  main.append(h("h1", {}, "Runs"), form, message, list, pager);

  const cursors = [null]; // the cursor of each page seen; the last is the current page's
  let timer = null;

  function query() {
    const search = new URLSearchParams({ order: "newest", summary: "true", limit: String(PAGE_SIZE) });
    if (status.value) search.set("status", status.value);
    if (agent.value) search.set("agent", agent.value);
    if (repo.value.trim()) search.set("repo", repo.value.trim());
    const cursor = cursors[cursors.length - 1];
    if (cursor) search.set("cursor", cursor);
    return search;
  }

  async function load() {
    clearTimeout(timer);
    let page;
    try {
      page = await api("GET", "/v1/runs?" + query().toString());
    } catch (error) {
      message.textContent = describeError(error);
      message.className = "error";
      return;
    }
    message.className = "muted";
    message.textContent = page.runs.length ? "" : "No runs" + (status.value || agent.value || repo.value ? " match these filters." : " yet: start one from New task.");
    showRows(list, page.runs.map((run) => row(run, (page.summaries || {})[run.id])));
    clear(pager);
    if (cursors.length > 1) {
      pager.append(h("button", { type: "button", onclick: () => { cursors.pop(); load(); } }, "Newer"));
    }
    if (page.next_cursor) {
      pager.append(h("button", { type: "button", onclick: () => { cursors.push(page.next_cursor); load(); } }, "Older"));
    }
    if (page.runs.some((run) => ACTIVE.has(run.status))) timer = setTimeout(load, 3000);
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const search = new URLSearchParams();
    if (status.value) search.set("status", status.value);
    if (agent.value) search.set("agent", agent.value);
    if (repo.value.trim()) search.set("repo", repo.value.trim());
    history.replaceState(null, "", "/" + (search.toString() ? "?" + search : ""));
    cursors.splice(1);
    load();
  });
  let first = true;
  gateStore.subscribe(() => {
    if (first) { first = false; return; }
    load();
  });
  await load();
}

// The list's rows, touching only those that changed: the live refresh every 3 s replaces the
// rows of running runs (their duration moved on), not all of them (no relayout of the page).
function showRows(list, rows) {
  const current = [...list.children];
  const sameRuns = current.length === rows.length && current.every((old, i) => old.dataset.runId === rows[i].dataset.runId);
  if (!sameRuns) {
    list.replaceChildren(...rows);
    return;
  }
  rows.forEach((fresh, i) => {
    if (!current[i].isEqualNode(fresh)) current[i].replaceWith(fresh);
  });
}

function row(run, summary) {
  const pending = summary ? summary.pending_gates : 0;
  const workspace = workspaceLabel(run);
  const repoName = run.repo ? run.repo.split("/").filter(Boolean).pop() : "—";
  return h("a", { class: "run-row", role: "listitem", href: `/runs/${encodeURIComponent(run.id)}`, "data-run-id": run.id },
    h("span", { class: "c-status" }, statusBadge(run.status), pending ? h("span", { class: "pending", title: "pending gates" }, `${pending} waiting`) : null),
    h("span", { class: "c-main" },
      summary && summary.prompt ? h("span", { class: "prompt", title: summary.prompt }, summary.prompt) : null,
      h("span", { class: "muted" }, h("span", { class: "run-id" }, run.id), ` · ${run.agent}`, run.model ? ` · ${run.model}` : ""),
    ),
    h("span", { class: "c-repo", title: run.repo || "" }, repoName, workspace ? h("span", { class: "branch" }, " ⎇ " + workspace) : null),
    h("span", { class: "c-num", title: "duration" }, formatDuration(runDuration(run))),
    h("span", { class: "c-num", title: "cost" }, formatCost(run.total_cost_usd)),
    h("span", { class: "c-num", title: "tokens in / out" }, summary ? `${formatTokens(summary.input_tokens)} / ${formatTokens(summary.output_tokens)} tok` : "—"),
  );
}
