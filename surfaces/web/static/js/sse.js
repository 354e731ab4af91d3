// @ts-check
// Live updates: the server-sent events of /api/events (snapshot, opened/answered/closed, delivery, and the
// Host connection's state) and the connection indicator.
//
// A lost stream: while the browser retries by itself (readyState CONNECTING: the server is down, restarting)
// the page shows "Reconnecting…". Once the browser has given up (CLOSED: the server answered other than with a
// stream, e.g. 401 after the stack restarted without this browser's sign-in) the page asks GET /api/session:
// 401 is a sign-in that has ended for good (signed_out.js says so and how to sign in again, nothing retries);
// a session is a stream to open again (with the CSRF token the server hands out now); no answer is asked again.

import { getSession } from "./api.js";
import { applySnapshot, settle, toolLabel, upsert } from "./cards.js";
import { byId, find } from "./dom.js";
import { rememberSignIn, showSignedOut } from "./signed_out.js";
import { updateSkew } from "./state.js";
import { notice } from "./status.js";

/** @typedef {import("./cards.js").OnAnswer} OnAnswer */
/** @typedef {import("./state.js").Store} Store */
/** @typedef {import("./state.js").View} View */

/**
 * @param {string} kind
 * @param {string} text
 */
export function setConnection(kind, text) {
  const node = byId("connection");
  node.className = `connection ${kind}`;
  node.textContent = text;
}

/**
 * @param {Event} event
 * @returns {any} the event's JSON data
 */
function data(event) {
  return JSON.parse(/** @type {MessageEvent<string>} */ (event).data);
}

const PROBE_RETRY_MS = 2000;
const REOPEN_MS = 1000;

/** @param {Store} store */
async function refreshCsrf(store) {
  try {
    const response = await getSession();
    if (!response.ok) return;
    /** @type {{csrf?: string}} */
    const session = await response.json();
    if (session.csrf) store.csrf = session.csrf;
  } catch {
    // the next reconnect asks again
  }
}

/**
 * Open the event stream again after the browser gave it up, or say the sign-in has ended (see the top).
 * @param {Store} store
 * @param {OnAnswer} onAnswer
 */
async function afterClosed(store, onAnswer) {
  setConnection("connecting", "Reconnecting…");
  /** @type {Response | null} */
  let response = null;
  try {
    response = await getSession();
  } catch {
    response = null; // the server does not answer (yet)
  }
  if (response && response.status === 401) {
    setConnection("failed", "Signed out");
    showSignedOut();
    return;
  }
  if (response && response.ok) {
    /** @type {{csrf?: string, sign_in?: import("./signed_out.js").SignInHint}} */
    const session = await response.json().catch(() => ({}));
    if (session.csrf) store.csrf = session.csrf;
    rememberSignIn(session.sign_in);
    // not at once: a stream that keeps failing while the session answers must not become a request loop
    setTimeout(() => connect(store, onAnswer), REOPEN_MS);
    return;
  }
  setTimeout(() => void afterClosed(store, onAnswer), PROBE_RETRY_MS);
}

/**
 * @param {Store} store
 * @param {OnAnswer} onAnswer
 */
export function connect(store, onAnswer) {
  const source = new EventSource("/api/events");
  let lost = false;
  source.addEventListener("open", () => {
    setConnection("live", "Live");
    if (lost) void refreshCsrf(store); // the server may have restarted: answer with the token it hands out now
    lost = false;
  });
  source.addEventListener("error", () => {
    lost = true;
    if (source.readyState === EventSource.CLOSED) void afterClosed(store, onAnswer);
    else setConnection("connecting", "Reconnecting…");
  });
  source.addEventListener("snapshot", (event) => {
    /** @type {{pending: View[], host?: string, server_time: string}} */
    const snapshot = data(event);
    updateSkew(store, snapshot.server_time);
    applySnapshot(store, snapshot.pending, onAnswer, snapshot.host || "");
    setConnection("live", "Live");
  });
  for (const kind of ["opened", "answered", "closed"]) {
    source.addEventListener(kind, (event) => {
      /** @type {{interaction: View, server_time: string}} */
      const change = data(event);
      updateSkew(store, change.server_time);
      const view = change.interaction;
      if (store.inFlight.has(view.id) && view.state !== "pending") return; // our POST reports the outcome
      if (view.state === "pending") upsert(store, view, onAnswer);
      else settle(store, view, null);
    });
  }
  // A committed answer that never reached the Tool (the call ended first) - docs/security.md.
  source.addEventListener("delivery", (event) => {
    /** @type {{interaction: View}} */
    const delivery = data(event);
    const view = delivery.interaction;
    const followed = store.following.get(view.id);
    if (view.delivery === "delivered" && followed && followed.dataset.own && followed.dataset.call === "running") {
      find(followed, ".notice-text").textContent = "Sent; the Tool received your answer.";
      return;
    }
    if (view.delivery !== "lost") return;
    notice(
      "closed",
      toolLabel(view),
      `Your answer was recorded but never reached the Tool: ${view.delivery_lost_text || "the call ended"} first (nothing was retried).`,
    );
  });
  source.addEventListener("disconnected", () => setConnection("connecting", "Host unreachable — retrying…"));
  source.addEventListener("failure", (event) => {
    /** @type {{reason: string}} */
    const failure = data(event);
    setConnection("failed", `Disconnected (${failure.reason})`);
  });
}
