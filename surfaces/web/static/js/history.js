// @ts-check
// The history view: the Host's settled forms of the visible sessions, newest first (GET /api/history, the
// Interaction service's ListHistory): when, Tool, outcome, who answered and through which surface, whether the
// answer reached the Tool, and the person the call was made for (as the cards say it: "for PERSON"). Never a value: the service keeps none in history. Every string is DOM text that
// passes untrusted.js's displayText (dom.js's el).

import { getHistory } from "./api.js";
import { byId, el } from "./dom.js";

/** @typedef {import("./api.js").HistoryEntry} HistoryEntry */

const SHOWN = 20;

/**
 * What happened to the form: the action and the delivery, or why it closed.
 * @param {HistoryEntry} entry
 * @returns {string}
 */
export function outcomeText(entry) {
  if (entry.state !== "answered") return `closed: ${entry.close_reason.replaceAll("_", " ")}`;
  const action = entry.action || "answered";
  if (entry.delivery === "lost") return `${action} · lost (${(entry.delivery_lost_reason || "").replaceAll("_", " ")})`;
  return `${action} · ${entry.delivery || "pending"}`;
}

/**
 * Who answered: the principal (a token's name or a person), its kind when not a token, the acting service when
 * one answered for a person (`via`: the web page's token name), and the surface (as `maka history` says it).
 * @param {HistoryEntry} entry
 * @returns {string}
 */
export function whoText(entry) {
  const who = entry.answered_by;
  if (!who) return "nobody answered";
  let kind = who.principal_kind === "token" ? "" : ` (${who.principal_kind})`;
  if (who.via) kind = ` (${who.principal_kind}, through ${who.via})`;
  return `by ${who.principal}${kind} via ${who.surface || "unknown"}`;
}

/** @param {HistoryEntry[]} entries */
function render(entries) {
  const section = byId("history");
  const list = byId("history-list");
  list.replaceChildren(
    ...entries.map((entry) => {
      const settled = entry.settled_at ? new Date(entry.settled_at).toLocaleString() : "";
      const item = el("li", { className: `history-entry state-${entry.state}` }, [
        el("span", { className: "history-time", text: settled }),
        el("strong", { className: "history-tool", text: entry.tool }),
        el("span", { className: "history-outcome", text: outcomeText(entry) }),
        el("span", { className: "history-who", text: whoText(entry) }),
        ...(entry.made_for ? [el("span", { className: "history-for", text: `for ${entry.made_for}` })] : []),
        el("span", { className: "history-session", text: `session ${entry.session}` }),
      ]);
      item.dataset.interaction = entry.id;
      return item;
    }),
  );
  section.hidden = entries.length === 0;
}

export async function pollHistory() {
  try {
    const entries = await getHistory(SHOWN);
    if (entries) render(entries);
  } catch {
    // the connection indicator already reports an unreachable surface
  }
}
