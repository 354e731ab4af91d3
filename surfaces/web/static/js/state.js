// @ts-check
// The page's one store: created once by main.js and passed explicitly to what reads or changes it.

/** @typedef {import("./fields.js").Field} Field */
/** @typedef {import("./fields.js").RawInput} RawInput */
/**
 * @typedef {object} Requester
 * @property {string} provider_id
 * @property {string} provider_display_name
 * @property {string} claimed_server
 * @property {string} claimed_tool
 */
/** @typedef {{position: number, size: number, deadline: string | null}} Round */
/**
 * One Interaction as the server's view has it (surfaces/web/views.py, `interaction_view`).
 * @typedef {object} View
 * @property {string} id
 * @property {string} session_id
 * @property {string} tool_name
 * @property {string} [host] the form's Host when the page follows a pool ("" otherwise)
 * @property {string} state "pending" | "answered" | "closed"
 * @property {string} close_text
 * @property {string | null} created_at
 * @property {string | null} expires_at
 * @property {string | null} deadline the earlier of expires_at and the round's deadline: the one the page shows
 * @property {boolean} deadline_is_round that deadline is the round's
 * @property {string} delivery
 * @property {string} delivery_lost_text
 * @property {Round | null} round
 * @property {Requester} requester
 * @property {string} message
 * @property {Field[]} fields
 * @property {string} [made_for] the person the call was made for ("" for a machine caller's call)
 */
/**
 * One rendered field: its spec, how to read its widget, and how to show its error.
 * @typedef {object} FieldEntry
 * @property {Field} field
 * @property {() => RawInput} read
 * @property {() => void} focus
 * @property {(message: string | null) => void} showError
 */
/**
 * One pending form on the page.
 * @typedef {object} Card
 * @property {View} view
 * @property {HTMLElement} el
 * @property {FieldEntry[]} fields
 * @property {boolean} busy
 * @property {{stop: () => void, flush: () => void} | null} dismissing set while its Dismiss waits (undo.js:
 *   `stop` ends the wait sending nothing, `flush` ends it sending now)
 */
/**
 * @typedef {object} Store
 * @property {string} csrf
 * @property {number} skewMs server clock minus browser clock
 * @property {Map<string, Card>} cards interaction id → its card
 * @property {Set<string>} inFlight ids with an answer POST under way from this tab
 * @property {number} seq the last element id number handed out
 * @property {Map<string, HTMLElement>} following interaction id → the notice that follows its call to the end
 * @property {number} undoMs how long Dismiss waits, with Undo, before it sends (the session's undo_seconds)
 */

/** @returns {Store} */
export function createStore() {
  return { csrf: "", skewMs: 0, cards: new Map(), inFlight: new Set(), seq: 0, following: new Map(), undoMs: 5000 };
}

/**
 * A fresh element id, unique in this page.
 * @param {Store} store
 * @param {string} prefix
 */
export function nextId(store, prefix) {
  store.seq += 1;
  return `${prefix}-${store.seq}`;
}

/**
 * @param {Store} store
 * @param {string} serverTime
 */
export function updateSkew(store, serverTime) {
  const server = Date.parse(serverTime);
  if (!Number.isNaN(server)) store.skewMs = server - Date.now();
}

/** @param {Store} store */
export function serverNow(store) {
  return Date.now() + store.skewMs;
}
