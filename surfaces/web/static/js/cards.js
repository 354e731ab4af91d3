// @ts-check
// The pending forms as cards: rendering, ordering, timers, and what the page shows when one settles.

import { byId, find, setText } from "./dom.js";
import { clearDraft, restoreDraft } from "./drafts.js";
import { serverNow } from "./state.js";
import { followCall, notice } from "./status.js";
import { deadlineText, roundText } from "./time.js";
import { stopDismissal } from "./undo.js";
import { buildField } from "./widgets.js";

/** @typedef {import("./state.js").Card} Card */
/** @typedef {import("./state.js").Store} Store */
/** @typedef {import("./state.js").View} View */
/**
 * What a card's buttons do: answer.js's `answer`, wired by main.js.
 * @typedef {(card: Card, action: string) => void} OnAnswer
 */

/**
 * What the page says once this tab's answer committed. Only a submitted form is followed on to its call's end
 * ("Sent; the Tool finished."); a decline or a dismissal is the whole story from the form's side.
 * @type {Record<string, string>}
 */
const OWN_ACTION_TEXT = {
  accept: "Sent to the Tool.",
  decline: "Declined; the Tool was told.",
  cancel: "Dismissed.",
};

/** @param {View} view */
export function toolLabel(view) {
  return view.requester.claimed_tool || view.tool_name || "A Tool";
}

/**
 * @param {Store} store
 * @param {Card} card
 */
function showRound(store, card) {
  const node = find(card.el, ".round");
  const text = roundText(card.view.round, store.skewMs, card.view.deadline_is_round);
  node.textContent = text;
  node.hidden = !text;
}

/**
 * Every card's time left, from the server's clock.
 * @param {Store} store
 */
export function tick(store) {
  for (const card of store.cards.values()) {
    const timer = find(card.el, ".timer");
    const left = deadlineText(card.view.deadline, card.view.deadline_is_round, serverNow(store));
    timer.textContent = left.text;
    timer.classList.toggle("urgent", left.urgent);
    timer.classList.toggle("expired", left.expired);
  }
}

/**
 * @param {Store} store
 * @param {View} view
 * @param {OnAnswer} onAnswer
 * @returns {Card}
 */
function renderCard(store, view, onAnswer) {
  const template = /** @type {HTMLTemplateElement} */ (byId("form-card"));
  const node = /** @type {HTMLElement} */ (template.content.firstElementChild?.cloneNode(true));
  node.dataset.id = view.id;
  node.dataset.session = view.session_id;
  /** @type {Card} */
  const card = { view, el: node, fields: [], busy: false, dismissing: null };
  const r = view.requester;
  setText(node, ".provider-name", r.provider_display_name || r.provider_id || "Unknown provider");
  setText(node, ".provider-id", r.provider_display_name && r.provider_id ? `(${r.provider_id})` : "");
  setText(node, ".claimed-server", r.claimed_server || "unnamed");
  setText(node, ".claimed-tool", r.claimed_tool || "unnamed");
  const calledAs = view.tool_name ? ` · called as ${view.tool_name}` : "";
  const madeFor = view.made_for ? ` · for ${view.made_for}` : "";
  setText(node, ".session", `Session ${view.session_id}${calledAs}${madeFor}`);
  const host = setText(node, ".host", view.host ? `on ${view.host}` : "");
  host.hidden = !view.host;
  node.dataset.host = view.host || "";
  const message = setText(node, ".message", view.message);
  message.hidden = !view.message;
  showRound(store, card);
  const list = find(node, ".field-list");
  for (const field of view.fields) list.append(buildField(store, field, card));
  const form = find(node, "form");
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    onAnswer(card, "accept");
  });
  /** @type {NodeListOf<HTMLButtonElement>} */
  const buttons = node.querySelectorAll("button[data-action]");
  for (const button of buttons) {
    const action = button.dataset.action ?? "";
    if (action !== "accept") button.addEventListener("click", () => onAnswer(card, action));
  }
  store.cards.set(view.id, card);
  return card;
}

/**
 * Cards in creation order, the counts and the title.
 * @param {Store} store
 */
function placeCards(store) {
  const container = byId("forms");
  const sorted = [...store.cards.values()].sort((a, b) => (a.view.created_at || "").localeCompare(b.view.created_at || ""));
  for (const card of sorted) if (card.el.parentNode !== container || container.lastElementChild !== card.el) container.append(card.el);
  const count = store.cards.size;
  byId("empty").hidden = count > 0;
  byId("pending-count").textContent = `${count} waiting`;
  document.title = count ? `(${count}) Maka — forms waiting for you` : "Maka — forms waiting for you";
  tick(store);
  revealLinked(store);
}

/**
 * The form a link names (`#/interaction/<id>`, the link a notification carries), or "".
 * @returns {string}
 */
export function linkedId() {
  const match = /^#\/interaction\/([^/?#]+)$/.exec(location.hash);
  if (!match) return "";
  try {
    return decodeURIComponent(match[1]);
  } catch {
    return "";
  }
}

let revealed = "";

/**
 * Mark the linked form's card (`linked`) and scroll to it once, when it is on the page.
 * @param {Store} store
 */
export function revealLinked(store) {
  const id = linkedId();
  for (const card of store.cards.values()) card.el.classList.toggle("linked", card.view.id === id);
  const card = id ? store.cards.get(id) : undefined;
  if (!card || revealed === id) return;
  revealed = id;
  card.el.scrollIntoView({ block: "start" });
}

/**
 * @param {Store} store
 * @param {string} id
 * @returns {Card | null}
 */
export function removeCard(store, id) {
  const card = store.cards.get(id);
  if (!card) return null;
  stopDismissal(card); // a form that settles during its Dismiss countdown is never answered from here
  card.el.remove();
  store.cards.delete(id);
  clearDraft(id);
  placeCards(store);
  return card;
}

/**
 * A form stopped being pending. `ownAction` is set when this tab's answer won. Every tab that showed the card
 * follows its call to the end (completed, failed with its code, stopped), whichever surface answered it: the
 * outcome comes from the broker's recent calls (status.js's pollStatus), never from the answer.
 * @param {Store} store
 * @param {View} view
 * @param {string | null} ownAction
 */
export function settle(store, view, ownAction) {
  const card = removeCard(store, view.id);
  const title = toolLabel(card ? card.view : view);
  if (ownAction) {
    const item = notice("own", title, OWN_ACTION_TEXT[ownAction] || "Answer sent.");
    item.dataset.action = ownAction;
    if (ownAction === "accept") followCall(store, view.id, item, "Sent; ", true);
  } else if (card) {
    const elsewhere = view.state === "answered";
    const reason = elsewhere ? "answered on another surface" : view.close_text || "closed";
    const item = notice(elsewhere ? "elsewhere" : "closed", title, `Closed: ${reason}.`);
    followCall(store, view.id, item, elsewhere ? "Answered on another surface; " : `Closed: ${reason}; `);
  }
}

/**
 * A pending form appears or is refreshed (the user's edits are kept); a settled one goes.
 * @param {Store} store
 * @param {View} view
 * @param {OnAnswer} onAnswer
 */
export function upsert(store, view, onAnswer) {
  if (view.state !== "pending") {
    settle(store, view, null);
    return;
  }
  const existing = store.cards.get(view.id);
  if (existing) {
    existing.view = view; // keep the user's edits; refresh times and state
    showRound(store, existing);
  } else {
    restoreDraft(renderCard(store, view, onAnswer));
  }
  placeCards(store);
}

/**
 * The whole pending list (on connect and after every reconnect).
 * @param {Store} store
 * @param {View[]} pending
 * @param {OnAnswer} onAnswer
 * @param {string} [host] the snapshot's Host when the page follows a pool: only its forms are replaced
 */
export function applySnapshot(store, pending, onAnswer, host = "") {
  const ids = new Set(pending.map((view) => view.id));
  for (const [id, card] of [...store.cards]) {
    if (ids.has(id) || store.inFlight.has(id)) continue;
    if ((card.view.host || "") !== host) continue; // a pool's snapshot replaces only its Host's forms
    removeCard(store, id);
    followCall(store, id, notice("closed", toolLabel(card.view), "No longer pending."), "No longer pending; ");
  }
  for (const view of pending) upsert(store, view, onAnswer);
  placeCards(store);
  document.body.dataset.ready = "true";
}
