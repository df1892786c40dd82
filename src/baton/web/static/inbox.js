// Inbox: every pending gate across the viewer's runs, oldest first, live from the gate
// stream; deciding here (or in another tab, or from the CLI) removes the gate everywhere.

import { gateStore, gateCard } from "./gates.js";
import { h, clear } from "./dom.js";
import { notificationsWanted, setNotifications } from "./app.js";

export async function render(main) {
  const list = h("div", { class: "inbox", "aria-label": "Pending gates" });
  const empty = h("p", { class: "muted", "aria-live": "polite" });
  const notify = h("input", { type: "checkbox", id: "notify" });
  notify.checked = notificationsWanted() && "Notification" in window && Notification.permission === "granted";
  notify.disabled = !("Notification" in window);
  notify.addEventListener("change", async () => {
    notify.checked = await setNotifications(notify.checked);
  });
  main.append(
    h("div", { class: "title-row" }, h("h1", {}, "Inbox"), h("label", { class: "check", for: "notify" }, notify, " Announce new gates")),
    empty,
    list,
  );
  const cards = new Map();

  function update() {
    const pending = gateStore.pending();
    const ids = new Set(pending.map((gate) => gate.id));
    for (const [id, card] of cards) {
      if (ids.has(id)) continue;
      cards.delete(id);
      const gate = gateStore.gates.get(id);
      if (!gate) {
        card.remove();
        continue;
      }
      const decided = gateCard(gate, { runLink: true }); // its decision, for a moment
      decided.classList.add("leaving");
      card.replaceWith(decided);
      setTimeout(() => decided.remove(), 4000);
    }
    for (const gate of pending) {
      if (!cards.has(gate.id)) {
        const card = gateCard(gate, { runLink: true });
        cards.set(gate.id, card);
        list.append(card);
      }
    }
    refreshEmpty();
  }

  function refreshEmpty() {
    empty.textContent = cards.size ? `${cards.size} waiting for a decision, oldest first.` : "Nothing waits for a decision.";
  }

  clear(list);
  gateStore.subscribe(update);
}
