// The page's only way to the server: baton's public HTTP API, with the session cookie.
// Every change carries the session's CSRF token (X-CSRF-Token); the token itself is never
// seen by this code after sign-in (the cookie is HttpOnly).

let session = null;

export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

export function signInUrl() {
  const next = location.pathname + location.search;
  return "/login?next=" + encodeURIComponent(next);
}

export async function loadSession() {
  const response = await fetch("/v1/session", { credentials: "same-origin", cache: "no-store" });
  if (response.status === 401) {
    location.assign(signInUrl());
    throw new ApiError(401, "session_expired", "signed out");
  }
  session = await response.json();
  return session;
}

export function currentSession() {
  return session;
}

async function failure(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  const error = (body && body.error) || { code: "http_" + response.status, message: response.statusText };
  if (response.status === 401) location.assign(signInUrl());
  return new ApiError(response.status, error.code, error.message, error.details);
}

export async function api(method, path, body) {
  const headers = { accept: "application/json" };
  if (method !== "GET") {
    headers["x-csrf-token"] = session ? session.csrf_token || "" : "";
  }
  if (body !== undefined) headers["content-type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    credentials: "same-origin",
    cache: "no-store",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok) throw await failure(response);
  if (response.status === 204) return null;
  const type = response.headers.get("content-type") || "";
  return type.includes("json") ? response.json() : response.text();
}

// JSON-RPC 2.0 on POST /v1/runs/{id}/command; a refusal becomes an ApiError with its code.
let rpcId = 0;
export async function command(runId, method, params) {
  const answer = await api("POST", `/v1/runs/${encodeURIComponent(runId)}/command`, {
    jsonrpc: "2.0",
    id: ++rpcId,
    method,
    params: params || {},
  });
  if (answer && answer.error) {
    const data = answer.error.data || {};
    throw new ApiError(200, data.code || String(answer.error.code), data.message || answer.error.message, data);
  }
  return answer ? answer.result : null;
}

export function describeError(error) {
  if (error instanceof ApiError) return `${error.code}: ${error.message}`;
  return String(error && error.message ? error.message : error);
}
