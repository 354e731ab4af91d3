// @ts-check
// The JSON API under /api/ (surfaces/web/app.py): session, sign-ins, status, history and answers. The server-sent
// events are sse.js's.

/** @typedef {import("./state.js").View} View */
/**
 * @typedef {object} ApiError
 * @property {string} reason
 * @property {string} message
 * @property {Array<{path: string, reason: string, description: string}>} violations
 */
/**
 * The answer endpoint's body: the settled interaction on success; the error (and the current view for a
 * 404/409) otherwise. Any of it may be missing when the body was not JSON.
 * @typedef {{interaction?: View, server_time?: string, error?: ApiError}} AnswerBody
 */
/**
 * @typedef {object} Call
 * @property {string} invocationId
 * @property {string} sessionId
 * @property {string} tool
 * @property {string} state
 * @property {string} failureCode
 * @property {boolean} isError
 * @property {string[]} interactionIds
 * @property {"declined" | "cancelled" | null} [formOutcome] a succeeded call whose form was not accepted
 */
/**
 * @typedef {object} Server
 * @property {string} name
 * @property {string} state
 * @property {string} transport
 * @property {number} tools
 * @property {number | null} nextRetryInSeconds
 * @property {{summary: string} | null} lastError
 */
/** @typedef {{available: boolean, surfaces: number | null, servers: Server[], calls: Call[]}} Status */
/** @typedef {{server: string, state: string, authorization_url: string}} SignIn */
/**
 * One settled form (GET /api/history): never a value.
 * @typedef {object} HistoryEntry
 * @property {string} id
 * @property {string} session
 * @property {string} tool
 * @property {string} provider
 * @property {string} claimed_server
 * @property {string} state
 * @property {string | null} action
 * @property {string} close_reason
 * @property {{principal: string, principal_kind: string, surface: string, issuer: string | null, via: string | null} | null} answered_by
 * @property {string | null} settled_at
 * @property {string | null} delivery
 * @property {string | null} delivery_lost_reason
 * @property {string | null} [made_for] the person the call was made for; null for a machine caller's call
 */

/** @type {RequestInit} */
const SAME_ORIGIN = { credentials: "same-origin" };

/** @returns {Promise<Response>} */
export function getSession() {
  return fetch("/api/session", SAME_ORIGIN);
}

/** @returns {Promise<SignIn[] | null>} null when the surface could not answer */
export async function getSignIns() {
  const response = await fetch("/api/sign-ins", SAME_ORIGIN);
  if (!response.ok) return null;
  return (await response.json()).sign_ins || [];
}

/** @returns {Promise<Status | null>} null when the surface could not answer */
export async function getStatus() {
  const response = await fetch("/api/status", SAME_ORIGIN);
  if (!response.ok) return null;
  return response.json();
}

/**
 * @param {number} limit
 * @returns {Promise<HistoryEntry[] | null>} newest first; null when the surface could not answer
 */
export async function getHistory(limit) {
  const response = await fetch(`/api/history?limit=${limit}`, SAME_ORIGIN);
  if (!response.ok) return null;
  return (await response.json()).history || [];
}

/** @returns {string} */
function newSubmissionId() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * POSTs one answer; throws when the surface cannot be reached. `keepalive`: the request outlives the page (a
 * dismissal flushed on `pagehide`; fetch rather than navigator.sendBeacon, which cannot send the CSRF header).
 * @param {string} csrf
 * @param {View} view
 * @param {string} action
 * @param {Record<string, unknown>} values
 * @param {boolean} [keepalive]
 * @returns {Promise<{response: Response, body: AnswerBody | null}>}
 */
export async function postAnswer(csrf, view, action, values, keepalive = false) {
  const response = await fetch(`/api/interactions/${encodeURIComponent(view.id)}/answer`, {
    method: "POST",
    credentials: "same-origin",
    keepalive,
    headers: { "Content-Type": "application/json", "X-Maka-CSRF": csrf },
    body: JSON.stringify({ session_id: view.session_id, submission_id: newSubmissionId(), action, values }),
  });
  /** @type {AnswerBody | null} */
  const body = await response.json().catch(() => null);
  return { response, body };
}
