// Every signed-in page: the header (pending-gate count in the nav, the tab title and the
// favicon; opt-in notifications of new gates; sign out), then the page's own module.

import { api, describeError, loadSession } from "./api.js";
import { gateStore } from "./gates.js";

const PAGES = {
  runs: () => import("./runs.js"),
  run: () => import("./run.js"),
  inbox: () => import("./inbox.js"),
  new: () => import("./newtask.js"),
};

const baseTitle = { runs: "Runs", run: "Run", inbox: "Inbox", new: "New task" };
let titleStem = "baton";

export function setTitle(stem) {
  titleStem = stem;
  showCount(gateStore.pending().length);
}

function favicon(count) {
  const canvas = document.createElement("canvas");
  canvas.width = canvas.height = 32;
  const context = canvas.getContext("2d");
  if (!context) return null;
  context.fillStyle = "#3a5ccc";
  context.beginPath();
  context.arc(16, 16, 15, 0, Math.PI * 2);
  context.fill();
  context.fillStyle = "#fff";
  context.font = "bold 20px sans-serif";
  context.textAlign = "center";
  context.textBaseline = "middle";
  context.fillText(count > 0 ? (count > 9 ? "9+" : String(count)) : "b", 16, 17);
  if (count > 0) {
    context.fillStyle = "#e5484d";
    context.beginPath();
    context.arc(26, 6, 6, 0, Math.PI * 2);
    context.fill();
  }
  return canvas.toDataURL("image/png");
}

function showCount(count) {
  document.title = (count > 0 ? `(${count}) ` : "") + titleStem + " · baton";
  const badge = document.querySelector("[data-pending-count]");
  if (badge) {
    badge.hidden = count === 0;
    badge.textContent = String(count);
    badge.setAttribute("aria-label", `${count} pending`);
  }
  const icon = favicon(count);
  const link = document.querySelector("link[rel=icon]");
  if (icon && link) {
    link.setAttribute("type", "image/png");
    link.setAttribute("href", icon);
  }
}

export function notificationsWanted() {
  return localStorage.getItem("baton.notify") === "yes";
}

export async function setNotifications(on) {
  if (on && "Notification" in window && Notification.permission !== "granted") {
    const answer = await Notification.requestPermission();
    if (answer !== "granted") on = false;
  }
  localStorage.setItem("baton.notify", on ? "yes" : "no");
  return on;
}

function announce(gates) {
  if (!gates.length || !notificationsWanted() || !("Notification" in window) || Notification.permission !== "granted") return;
  for (const gate of gates) {
    const note = new Notification("baton: a gate waits", { body: gate.summary, tag: gate.id });
    note.onclick = () => {
      window.focus();
      location.assign("/inbox");
    };
  }
}

async function main() {
  const page = document.body.dataset.page;
  const session = await loadSession();
  const who = document.querySelector("[data-who]");
  if (who) who.textContent = session.sub;
  for (const link of document.querySelectorAll("[data-nav]")) {
    if (link.dataset.nav === page) link.setAttribute("aria-current", "page");
  }
  document.querySelector("[data-sign-out]").addEventListener("click", async () => {
    try {
      await api("DELETE", "/v1/session");
    } finally {
      location.assign("/login");
    }
  });
  titleStem = baseTitle[page] || "baton";
  gateStore.subscribe((change) => {
    showCount(gateStore.pending().length);
    announce(change.fresh || []);
  });
  gateStore.start();
  const main = document.getElementById("main");
  main.replaceChildren();
  const module = await PAGES[page]();
  await module.render(main);
}

main().catch((error) => {
  const main = document.getElementById("main");
  if (main) {
    const p = document.createElement("p");
    p.className = "error";
    p.setAttribute("role", "alert");
    p.textContent = describeError(error);
    main.replaceChildren(p);
  }
});
