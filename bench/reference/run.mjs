// The TypeScript reference's units, timed on the inputs baton's benchmarks generate.
//
//   node bench/reference/run.mjs UNIT INPUT RUNS
//
// INPUT is a file of JSON lines in the reference's own log format (StoredEntry:
// {"type": "notification", "timestamp", "notification": {jsonrpc, method, params}}), written by
// bench/_reference.py from the same entries baton's benchmark folds. Units, each calling the
// installed package (bench/reference/package.json pins it), never a copy of its code:
//
// - rebuild: rebuildConversation (@posthog/agent/adapters/claude/session/jsonl-hydration) of
//   the parsed entries, in memory. The entries are parsed again before each run, untimed: the
//   reference appends streamed text to the first chunk's block in place, so a second fold of
//   the same objects would not be the same work.
// - resume: resumeFromLog (@posthog/agent/resume) end to end with the package's own
//   PostHogAPIClient fetching the task run and its log from a 127.0.0.1 server in this process:
//   the log's text read, every line parsed (its JSON.parse), the conversation rebuilt and the
//   session id found: the reference's path from its stored log to a resumed conversation.
//
// Prints {"unit", "runs_ms": [...], "median_ms"}: CPU time of the process (process.cpuUsage,
// user + system) per run after one untimed warm-up, as baton's benchmarks time theirs.
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import { rebuildConversation } from "@posthog/agent/adapters/claude/session/jsonl-hydration";
import { PostHogAPIClient } from "@posthog/agent/posthog-api";
import { resumeFromLog } from "@posthog/agent/resume";

const [unit, input, runsArg] = process.argv.slice(2);
const runs = Number(runsArg ?? "5");
const text = readFileSync(input, "utf8");

function cpuMs(before) {
  const used = process.cpuUsage(before);
  return (used.user + used.system) / 1000;
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

function parse() {
  return text.trim().split("\n").map((line) => JSON.parse(line));
}

async function timeRebuild() {
  const entries = parse();
  const before = process.cpuUsage();
  const turns = rebuildConversation(entries);
  const ms = cpuMs(before);
  if (turns.length === 0) throw new Error("the reference rebuilt no turns");
  return ms;
}

// Every response closes its connection: a kept-alive socket the server times out while the
// client reuses it fails the fetch ("fetch failed", seen under load).
async function resumeServer() {
  const body = Buffer.from(text);
  const server = createServer((request, response) => {
    if (request.url.endsWith("/logs")) {
      response.writeHead(200, { "content-type": "application/x-ndjson", connection: "close" });
      response.end(body);
    } else {
      response.writeHead(200, { "content-type": "application/json", connection: "close" });
      response.end(JSON.stringify({ id: "run-bench", task: "task-bench", log_url: "http://127.0.0.1/logs" }));
    }
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return server;
}

async function timeResume(server) {
  const apiClient = new PostHogAPIClient({
    apiUrl: `http://127.0.0.1:${server.address().port}`,
    getApiKey: async () => "bench",
    projectId: 1,
  });
  const before = process.cpuUsage();
  const state = await resumeFromLog({
    taskId: "task-bench",
    runId: "run-bench",
    apiClient,
  });
  const ms = cpuMs(before);
  if (state.conversation.length === 0) throw new Error("the reference resumed no conversation");
  return ms;
}

let once;
let server;
if (unit === "rebuild") {
  once = timeRebuild;
} else if (unit === "resume") {
  server = await resumeServer();
  once = () => timeResume(server);
} else {
  throw new Error(`unknown unit ${unit}`);
}
await once();
const times = [];
for (let i = 0; i < runs; i++) {
  globalThis.gc?.();
  times.push(await once());
}
server?.close();
process.stdout.write(JSON.stringify({ unit, runs_ms: times, median_ms: median(times) }) + "\n");
