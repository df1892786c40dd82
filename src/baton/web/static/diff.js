// Diffs as text: a unified patch (from GET /v1/runs/{id}/diff) coloured line by line, and a
// line diff of an edit's old and new text (file.changed events).

import { h } from "./dom.js";

function lineClass(line) {
  if (line.startsWith("+++") || line.startsWith("---")) return "d-file";
  if (line.startsWith("diff ") || line.startsWith("index ")) return "d-file";
  if (line.startsWith("@@")) return "d-hunk";
  if (line.startsWith("+")) return "d-add";
  if (line.startsWith("-")) return "d-del";
  return "d-ctx";
}

export function renderPatch(patch) {
  const pre = h("pre", { class: "diff", tabindex: "0", "aria-label": "diff" });
  if (!patch) {
    pre.append(h("span", { class: "d-ctx" }, "(no changes)"));
    return pre;
  }
  for (const line of patch.replace(/\n$/, "").split("\n")) {
    pre.append(h("span", { class: lineClass(line) }, line + "\n"));
  }
  return pre;
}

// Lines of old → new as [kind, text] with kind " ", "-" or "+" (an LCS; big inputs are shown
// as all removed then all added rather than compared).
export function lineDiff(oldText, newText) {
  const a = oldText ? oldText.replace(/\n$/, "").split("\n") : [];
  const b = newText ? newText.replace(/\n$/, "").split("\n") : [];
  if (a.length * b.length > 2_000_000) {
    return [...a.map((line) => ["-", line]), ...b.map((line) => ["+", line])];
  }
  const rows = a.length + 1;
  const cols = b.length + 1;
  const table = new Uint32Array(rows * cols);
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      table[i * cols + j] =
        a[i] === b[j] ? table[(i + 1) * cols + j + 1] + 1 : Math.max(table[(i + 1) * cols + j], table[i * cols + j + 1]);
    }
  }
  const out = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (a[i] === b[j]) {
      out.push([" ", a[i]]);
      i++;
      j++;
    } else if (table[(i + 1) * cols + j] >= table[i * cols + j + 1]) {
      out.push(["-", a[i++]]);
    } else {
      out.push(["+", b[j++]]);
    }
  }
  while (i < a.length) out.push(["-", a[i++]]);
  while (j < b.length) out.push(["+", b[j++]]);
  return out;
}

export function renderEditDiff(path, oldText, newText) {
  const pre = h("pre", { class: "diff", tabindex: "0", "aria-label": `diff of ${path}` });
  pre.append(h("span", { class: "d-file" }, `--- ${oldText === null || oldText === undefined ? "/dev/null" : "a/" + path}\n`));
  pre.append(h("span", { class: "d-file" }, `+++ b/${path}\n`));
  for (const [kind, line] of lineDiff(oldText || "", newText || "")) {
    const cls = kind === "+" ? "d-add" : kind === "-" ? "d-del" : "d-ctx";
    pre.append(h("span", { class: cls }, kind + line + "\n"));
  }
  return pre;
}
