// @ts-check
// Notices, the Host's status (MCP servers, recent calls, attached surfaces), each answered form's call
// followed to its end, and OAuth sign-in prompts (Host-owned, like forms; docs/security.md "OAuth"): the
// authorization URL is shown in full and opened only by the user's click, never automatically.

import { getSignIns, getStatus } from "./api.js";
import { byId, el, find } from "./dom.js";
import { pluralise } from "./fields.js";

/** @typedef {import("./api.js").Call} Call */
/** @typedef {import("./api.js").Server} Server */
/** @typedef {import("./api.js").SignIn} SignIn */
/** @typedef {import("./state.js").Store} Store */

const MAX_NOTICES = 8;
const MAX_ACTIVITY = 10;
/** @type {Record<string, string>} */
const FINAL_TEXT = {
  succeeded: "the Tool completed.",
  failed: "the Tool failed",
  lost: "the call was lost (its outcome is unknown).",
  stopped: "the call was stopped.",
};

/**
 * Adds a notice at the top of the list (the oldest beyond MAX_NOTICES go).
 * @param {string} kind
 * @param {string} title
 * @param {string} text
 * @returns {HTMLElement}
 */
export function notice(kind, title, text) {
  const box = byId("notices");
  const dismiss = el("button", { className: "notice-close", text: "×", attrs: { type: "button", "aria-label": "Dismiss this notice" } });
  const item = el("div", { className: `notice ${kind}`, attrs: { role: "status" } }, [
    el("strong", { className: "notice-title", text: title }),
    el("span", { className: "notice-text", text }),
    dismiss,
  ]);
  dismiss.addEventListener("click", () => item.remove());
  box.prepend(item);
  while (box.children.length > MAX_NOTICES) box.lastElementChild?.remove();
  return item;
}

/**
 * The end of a call this tab submitted a form for. The broker reports the call's state and failure code, never
 * its result text (docs/design.md "Surfaces and callers"), so the page says what it knows.
 * @param {Call} call
 * @returns {string | null}
 */
function ownCallOutcome(call) {
  if (call.state === "succeeded") return call.isError ? "the Tool finished and reported an error." : "the Tool finished.";
  if (call.state === "failed") return `the Tool failed: ${call.failureCode || "FAILED"}.`;
  return FINAL_TEXT[call.state] || null;
}

/**
 * @param {Call} call
 * @returns {string | null}
 */
function callOutcome(call) {
  if (call.state === "succeeded" && call.formOutcome) return `the form was ${call.formOutcome} and the Tool was told.`;
  if (call.state === "succeeded") return call.isError ? "the Tool completed and reported an error." : FINAL_TEXT.succeeded;
  if (call.state === "failed") return `${FINAL_TEXT.failed} (${call.failureCode || "FAILED"}).`;
  return FINAL_TEXT[call.state] || null;
}

/**
 * `prefix` starts the notice's text once the call ended ("Answered on another surface; the Tool completed.",
 * or for this tab's own submission, `own`, "Sent; the Tool finished.").
 * @param {Store} store
 * @param {string} interactionId
 * @param {HTMLElement} item
 * @param {string} prefix
 * @param {boolean} [own]
 */
export function followCall(store, interactionId, item, prefix, own = false) {
  item.dataset.interaction = interactionId;
  if (own) item.dataset.own = "true";
  item.dataset.prefix = prefix;
  item.dataset.call = "running";
  store.following.set(interactionId, item);
}

/**
 * @param {Store} store
 * @param {Call[]} calls
 */
function updateFollowed(store, calls) {
  for (const [interactionId, item] of [...store.following]) {
    if (!item.isConnected) {
      store.following.delete(interactionId); // dismissed, or pushed out by newer notices
      continue;
    }
    const call = calls.find((c) => c.interactionIds.includes(interactionId));
    if (!call) continue;
    const outcome = item.dataset.own ? ownCallOutcome(call) : callOutcome(call);
    if (!outcome) continue;
    find(item, ".notice-text").textContent = `${item.dataset.prefix}${outcome}`;
    item.dataset.call = call.state;
    if (call.failureCode) item.dataset.failure = call.failureCode;
    store.following.delete(interactionId);
  }
}

/**
 * What a recent call came to, as the list says it: a Tool that returned after its form was declined or
 * cancelled "succeeded" for the broker, but nothing was approved, so the form's outcome is what is shown.
 * @param {Call} call
 * @returns {string}
 */
function callStateText(call) {
  if (call.state === "failed") return `failed · ${call.failureCode}`;
  if (call.state === "succeeded" && call.formOutcome) return `${call.formOutcome} · the Tool was told`;
  return call.state.replaceAll("_", " ");
}

/** @param {Call[]} calls */
function renderActivity(calls) {
  const section = byId("activity");
  const list = byId("activity-list");
  list.replaceChildren(
    ...calls.slice(0, MAX_ACTIVITY).map((call) => {
      const shown = call.state === "succeeded" && call.formOutcome ? call.formOutcome : call.state;
      const item = el("li", { className: `call state-${shown}` }, [
        el("span", { className: "call-tool", text: call.tool }),
        el("span", { className: "call-state", text: callStateText(call) }),
        el("span", { className: "call-session", text: `session ${call.sessionId}` }),
      ]);
      item.dataset.invocation = call.invocationId;
      item.dataset.state = call.state;
      if (call.formOutcome) item.dataset.formOutcome = call.formOutcome;
      return item;
    }),
  );
  section.hidden = calls.length === 0;
}

/** @param {Server[]} servers */
function renderServers(servers) {
  const section = byId("servers");
  const list = byId("server-list");
  list.replaceChildren(
    ...servers.map((server) => {
      const parts = [server.state, server.transport, `${pluralise(server.tools, "Tool")}`];
      if (server.nextRetryInSeconds !== null) parts.push(`next retry in ${Math.round(server.nextRetryInSeconds)} s`);
      const item = el("li", { className: `server state-${server.state.replaceAll(" ", "-")}` }, [
        el("strong", { className: "server-name", text: server.name }),
        el("span", { className: "server-state", text: parts.join(" · ") }),
      ]);
      if (server.lastError && server.state !== "ready") {
        item.append(el("span", { className: "server-cause", text: server.lastError.summary }));
      }
      item.dataset.server = server.name;
      item.dataset.state = server.state;
      return item;
    }),
  );
  section.hidden = servers.length === 0;
}

/**
 * How many surfaces (tabs, TUIs, scripts) are attached to the Host; `maka status` lists them.
 * @param {number | null} count
 */
function renderSurfaceCount(count) {
  const node = byId("surface-count");
  node.hidden = typeof count !== "number";
  if (typeof count !== "number") return;
  node.dataset.count = String(count);
  node.textContent = `${pluralise(count, "surface")} attached`;
}

/** @param {Store} store */
export async function pollStatus(store) {
  let body;
  try {
    body = await getStatus();
  } catch {
    return;
  }
  if (!body || !body.available) return;
  renderSurfaceCount(body.surfaces);
  renderServers(body.servers);
  renderActivity(body.calls);
  updateFollowed(store, body.calls);
}

/** @param {SignIn[]} items */
function renderSignIns(items) {
  const root = byId("sign-ins");
  const wanted = items.filter((item) => item.state === "sign_in_required");
  const nodes = wanted.map((item) =>
    el("article", { className: "card sign-in", attrs: { "data-server": item.server } }, [
      el("h2", { text: `Sign in to ${item.server}` }),
      el("p", { text: `The MCP server ${item.server} needs you to sign in before its Tools can run. Check the address before you open it:` }),
      el("p", { className: "sign-in-url", text: item.authorization_url }),
      el("a", {
        className: "btn primary",
        text: "Open sign-in page",
        attrs: { href: item.authorization_url, target: "_blank", rel: "noopener noreferrer" },
      }),
    ]),
  );
  root.replaceChildren(...nodes);
}

export async function pollSignIns() {
  try {
    const items = await getSignIns();
    if (items) renderSignIns(items);
  } catch {
    // the connection indicator already reports an unreachable surface
  }
}
