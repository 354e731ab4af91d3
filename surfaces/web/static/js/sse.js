// @ts-check
// Live updates: the server-sent events of /api/events (snapshot, opened/answered/closed, delivery, and the
// Host connection's state) and the connection indicator.

import { applySnapshot, settle, toolLabel, upsert } from "./cards.js";
import { byId, find } from "./dom.js";
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

/**
 * @param {Store} store
 * @param {OnAnswer} onAnswer
 */
export function connect(store, onAnswer) {
  const source = new EventSource("/api/events");
  source.addEventListener("open", () => setConnection("live", "Live"));
  source.addEventListener("error", () => setConnection("connecting", "Reconnecting…"));
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
