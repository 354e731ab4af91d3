// @ts-check
// Answering a form: the field rules of fields.js, the POST, and what the page shows for each outcome.

import { postAnswer } from "./api.js";
import { removeCard, settle, toolLabel } from "./cards.js";
import { find } from "./dom.js";
import { parseField } from "./fields.js";
import { updateSkew } from "./state.js";
import { notice } from "./status.js";
import { dismissWithUndo } from "./undo.js";

/** @typedef {import("./state.js").Card} Card */
/** @typedef {import("./state.js").FieldEntry} FieldEntry */
/** @typedef {import("./state.js").Store} Store */

/**
 * @param {Card} card
 * @param {string} action
 * @returns {{values: Record<string, unknown>, firstInvalid: FieldEntry | null}}
 */
function collect(card, action) {
  // No prototype: a field may be named "__proto__" (or "constructor"), and its value must still be sent.
  /** @type {Record<string, unknown>} */
  const values = Object.create(null);
  /** @type {FieldEntry | null} */
  let firstInvalid = null;
  for (const entry of card.fields) {
    const [value, error] = parseField(entry.field, entry.read(), action === "accept");
    if (action !== "accept") continue;
    entry.showError(error);
    if (error && !firstInvalid) firstInvalid = entry;
    if (value !== undefined && !error) values[entry.field.name] = value;
  }
  return { values, firstInvalid };
}

/**
 * @param {Card} card
 * @param {string} text
 */
function formError(card, text) {
  const node = find(card.el, ".form-error");
  node.textContent = text || "";
  node.hidden = !text;
}

/**
 * @param {Card} card
 * @param {boolean} busy
 */
function setBusy(card, busy) {
  card.busy = busy;
  card.el.classList.toggle("busy", busy);
  /** @type {NodeListOf<HTMLButtonElement>} */
  const buttons = card.el.querySelectorAll("button[data-action]");
  for (const button of buttons) button.disabled = busy;
}

/**
 * The field a violation's JSON Pointer names.
 * @param {Card} card
 * @param {string} path
 * @returns {FieldEntry | null}
 */
function fieldForPath(card, path) {
  for (const entry of card.fields) {
    const name = entry.field.name;
    const pointer = "/" + name.replaceAll("~", "~0").replaceAll("/", "~1");
    for (const candidate of [pointer, "/" + name]) {
      if (path === candidate || path.startsWith(candidate + "/")) return entry;
    }
  }
  return null;
}

/**
 * Sends the user's answer (`accept` with the checked values, `decline` or `cancel` without).
 * @param {Store} store
 * @param {Card} card
 * @param {string} action
 */
export async function answer(store, card, action) {
  if (card.busy || card.dismissing) return;
  if (action === "cancel" && store.undoMs > 0) {
    dismissWithUndo(store, card, (keepalive) => void send(store, card, action, keepalive));
    return;
  }
  await send(store, card, action);
}

/**
 * @param {Store} store
 * @param {Card} card
 * @param {string} action
 * @param {boolean} [keepalive] the page is going away: the request must outlive it (api.js postAnswer)
 */
async function send(store, card, action, keepalive = false) {
  if (card.busy || store.cards.get(card.view.id) !== card) return;
  formError(card, "");
  /** @type {Record<string, unknown>} */
  let values = {};
  if (action === "accept") {
    const collected = collect(card, action);
    if (collected.firstInvalid) {
      formError(card, "Fix the highlighted fields to submit.");
      collected.firstInvalid.focus();
      return;
    }
    values = collected.values;
  } else {
    for (const entry of card.fields) entry.showError(null);
  }
  const id = card.view.id;
  setBusy(card, true);
  store.inFlight.add(id);
  let response;
  let body = null;
  try {
    ({ response, body } = await postAnswer(store.csrf, card.view, action, values, keepalive));
  } catch {
    store.inFlight.delete(id);
    setBusy(card, false);
    formError(card, "Could not reach the Maka web surface. Check the connection and try again.");
    return;
  }
  store.inFlight.delete(id);
  if (response.ok && body && body.interaction) {
    if (body.server_time) updateSkew(store, body.server_time);
    settle(store, body.interaction, action);
    return;
  }
  setBusy(card, false);
  const error = (body && body.error) || { reason: `HTTP_${response.status}`, message: "", violations: [] };
  if (response.status === 409 || response.status === 404) {
    removeCard(store, id);
    const current = body && body.interaction;
    let text;
    if (error.reason === "ALREADY_SETTLED" || (current && current.state === "answered")) {
      text = "Already answered on another surface; your answer was not sent.";
    } else if (current && current.close_text) {
      text = `Closed: ${current.close_text}; your answer was not sent.`;
    } else {
      text = "This form is no longer pending; your answer was not sent.";
    }
    notice("elsewhere", toolLabel(card.view), text);
    return;
  }
  if (response.status === 422 || response.status === 400) {
    /** @type {string[]} */
    const unplaced = [];
    for (const violation of error.violations || []) {
      const entry = fieldForPath(card, violation.path);
      const text = violation.reason === "ANSWER_MISSING_REQUIRED" ? "Required" : violation.description || violation.reason;
      if (entry) entry.showError(text);
      else unplaced.push(text);
    }
    formError(card, ["The host did not accept these values.", ...unplaced].join(" "));
    return;
  }
  if (response.status === 401) {
    location.assign("/login");
    return;
  }
  formError(card, `The answer could not be delivered (${error.reason}). Try again.`);
}
