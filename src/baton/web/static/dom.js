// DOM helpers. Everything shown is built with createElement and text nodes: nothing an agent,
// a repository or a user wrote is ever parsed as HTML (no innerHTML anywhere in the app).

const SAFE_PROTOCOLS = new Set(["http:", "https:", "mailto:"]);

// A URL safe to put in href (http, https, mailto, or a path of this site), else null.
export function safeUrl(url) {
  if (typeof url !== "string") return null;
  try {
    const parsed = new URL(url, location.origin);
    if (SAFE_PROTOCOLS.has(parsed.protocol)) return parsed.href;
  } catch {
    return null;
  }
  return null;
}

// h("a", {href: "/x", class: "c", onclick: fn}, "text", child, [more]) → an element.
export function h(tag, attrs, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      element.addEventListener(name.slice(2), value);
    } else if (name === "class") {
      element.className = value;
    } else if (name === "dataset") {
      Object.assign(element.dataset, value);
    } else if (name === "href") {
      const href = safeUrl(value);
      if (href !== null) element.setAttribute("href", href);
    } else if (name === "value") {
      element.value = value;
    } else if (name === "checked" || name === "disabled" || name === "hidden" || name === "required") {
      element[name] = Boolean(value);
    } else {
      element.setAttribute(name, value === true ? "" : String(value));
    }
  }
  appendTo(element, children);
  return element;
}

export function appendTo(element, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : String(child));
  }
  return element;
}

export function clear(element) {
  element.replaceChildren();
  return element;
}

export function formatCost(usd) {
  if (usd === null || usd === undefined) return "—";
  return "$" + (usd < 1 ? usd.toFixed(4) : usd.toFixed(2));
}

export function formatTokens(count) {
  if (!count) return "0";
  if (count >= 1_000_000) return (count / 1_000_000).toFixed(1) + "M";
  if (count >= 10_000) return Math.round(count / 1000) + "k";
  return String(count);
}

export function formatDuration(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return "—";
  const seconds = Math.max(0, Math.round(ms / 1000));
  if (seconds < 60) return seconds + " s";
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min ${seconds % 60} s`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

export function runDuration(run) {
  const start = Date.parse(run.created_at);
  const end = run.finished_at ? Date.parse(run.finished_at) : Date.now();
  return end - start;
}

export function formatTime(iso) {
  if (!iso) return "—";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toLocaleString();
}

export const ACTIVE = new Set(["queued", "running", "paused"]);

export function statusBadge(status) {
  return h("span", { class: `status status-${status}` }, status);
}

// The workspace of a run (when the server reports one): its branch, else its kind.
export function workspaceLabel(run) {
  const workspace = run && run.workspace;
  if (!workspace || typeof workspace !== "object") return null;
  return workspace.branch || workspace.kind || null;
}
