// A small Markdown renderer that builds DOM nodes: paragraphs, headings, lists, block quotes,
// fenced code, rules; inline code, strong, emphasis, links and bare URLs. Text only ever
// becomes text nodes, and a link only gets an href that safeUrl accepts (http, https, mailto):
// `<script>`, `onerror=` and `javascript:` in a message stay visible text.

import { h, safeUrl } from "./dom.js";

const FENCE = /^(```|~~~)\s*([\w+-]*)\s*$/;
const HEADING = /^(#{1,6})\s+(.*)$/;
const BULLET = /^\s*[-*+]\s+(.*)$/;
const NUMBERED = /^\s*\d+[.)]\s+(.*)$/;
const QUOTE = /^\s*>\s?(.*)$/;
const RULE = /^\s*([-*_])(\s*\1){2,}\s*$/;

export function renderMarkdown(text) {
  const root = document.createDocumentFragment();
  const lines = String(text).replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    const fence = FENCE.exec(line);
    if (fence) {
      const body = [];
      i++;
      while (i < lines.length && !lines[i].startsWith(fence[1])) body.push(lines[i++]);
      i++;
      const code = h("code", fence[2] ? { "data-lang": fence[2] } : {}, body.join("\n"));
      root.append(h("pre", { class: "code" }, code));
      continue;
    }
    if (!line.trim()) {
      i++;
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      root.append(h("h" + Math.min(6, heading[1].length + 2), { class: "md-h" }, inline(heading[2])));
      i++;
      continue;
    }
    if (RULE.test(line)) {
      root.append(h("hr"));
      i++;
      continue;
    }
    if (QUOTE.test(line)) {
      const body = [];
      while (i < lines.length && QUOTE.test(lines[i])) body.push(QUOTE.exec(lines[i++])[1]);
      root.append(h("blockquote", {}, renderMarkdown(body.join("\n"))));
      continue;
    }
    const listKind = BULLET.test(line) ? BULLET : NUMBERED.test(line) ? NUMBERED : null;
    if (listKind) {
      const list = h(listKind === BULLET ? "ul" : "ol");
      while (i < lines.length && listKind.test(lines[i])) {
        list.append(h("li", {}, inline(listKind.exec(lines[i++])[1])));
      }
      root.append(list);
      continue;
    }
    const paragraph = [];
    while (
      i < lines.length &&
      lines[i].trim() &&
      !FENCE.test(lines[i]) &&
      !HEADING.test(lines[i]) &&
      !BULLET.test(lines[i]) &&
      !NUMBERED.test(lines[i]) &&
      !QUOTE.test(lines[i])
    ) {
      paragraph.push(lines[i++]);
    }
    const p = h("p");
    paragraph.forEach((part, index) => {
      if (index) p.append(h("br"));
      p.append(...inline(part));
    });
    root.append(p);
  }
  return root;
}

const LINK = /\[([^\]\n]*)\]\(([^)\s]*)\)/y;
const BARE = /https?:\/\/[^\s<>()"']+[^\s<>()"'.,;:!?]/y;

function link(url, label) {
  const href = safeUrl(url);
  if (href === null || !/^(https?:|mailto:)/i.test(url)) {
    return [document.createTextNode(label === url ? url : `${label} (${url})`)];
  }
  return [h("a", { href, rel: "noopener noreferrer nofollow", target: "_blank" }, label)];
}

export function inline(text) {
  const out = [];
  let buffer = "";
  const flush = () => {
    if (buffer) out.push(document.createTextNode(buffer));
    buffer = "";
  };
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === "`") {
      const end = text.indexOf("`", i + 1);
      if (end > i + 1) {
        flush();
        out.push(h("code", {}, text.slice(i + 1, end)));
        i = end + 1;
        continue;
      }
    }
    if (c === "*" && text[i + 1] === "*") {
      const end = text.indexOf("**", i + 2);
      if (end > i + 2) {
        flush();
        out.push(h("strong", {}, inline(text.slice(i + 2, end))));
        i = end + 2;
        continue;
      }
    }
    if ((c === "*" || c === "_") && text[i + 1] && text[i + 1] !== " " && (i === 0 || /[\s(]/.test(text[i - 1]))) {
      const end = text.indexOf(c, i + 1);
      if (end > i + 1 && (end + 1 >= text.length || /[\s).,;:!?]/.test(text[end + 1]))) {
        flush();
        out.push(h("em", {}, inline(text.slice(i + 1, end))));
        i = end + 1;
        continue;
      }
    }
    if (c === "[") {
      LINK.lastIndex = i;
      const match = LINK.exec(text);
      if (match) {
        flush();
        out.push(...link(match[2], match[1]));
        i = LINK.lastIndex;
        continue;
      }
    }
    if (c === "h" && (i === 0 || /[\s(]/.test(text[i - 1]))) {
      BARE.lastIndex = i;
      const match = BARE.exec(text);
      if (match) {
        flush();
        out.push(...link(match[0], match[0]));
        i = BARE.lastIndex;
        continue;
      }
    }
    buffer += c;
    i++;
  }
  flush();
  return out;
}
