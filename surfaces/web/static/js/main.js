// @ts-check
// Maka web surface: renders the Host's pending forms and sends user answers. Uses only the JSON API under
// /api/ (session, events, status, sign-ins, interactions/{id}/answer). Every server-supplied string is put
// into the page as DOM text (textContent / option.text / attribute values), never parsed as HTML.
//
// Modules: state.js (the one store, passed explicitly), fields.js (the field rules, pure), widgets.js (field
// widgets), cards.js (the forms), answer.js (answering), sse.js (live updates), signed_out.js (a sign-in that ended), status.js (notices, servers,
// calls, sign-ins), history.js (settled forms: who answered, never a value), undo.js (Dismiss with undo),
// drafts.js, api.js, dom.js, time.js.

import { answer } from "./answer.js";
import { getSession } from "./api.js";
import { revealLinked, tick } from "./cards.js";
import { pollHistory } from "./history.js";
import { rememberSignIn } from "./signed_out.js";
import { connect, setConnection } from "./sse.js";
import { createStore, updateSkew } from "./state.js";
import { pollSignIns, pollStatus } from "./status.js";
import { flushDismissals } from "./undo.js";

/** @typedef {import("./state.js").Card} Card */

const SIGN_IN_POLL_MS = 2000;
const STATUS_POLL_MS = 2000;
const HISTORY_POLL_MS = 3000;

async function start() {
  const store = createStore();
  /** @param {Card} card @param {string} action */
  const onAnswer = (card, action) => void answer(store, card, action);
  let response;
  try {
    response = await getSession();
  } catch {
    setConnection("failed", "Cannot reach the web surface");
    return;
  }
  if (response.status === 401) {
    location.assign("/login");
    return;
  }
  /** @type {{csrf: string, server_time: string, undo_seconds?: number, person?: string | null, sign_in?: import("./signed_out.js").SignInHint}} */
  const session = await response.json();
  store.csrf = session.csrf;
  rememberSignIn(session.sign_in);
  showPerson(session.person);
  if (typeof session.undo_seconds === "number") store.undoMs = session.undo_seconds * 1000;
  updateSkew(store, session.server_time);
  connect(store, onAnswer);
  addEventListener("hashchange", () => revealLinked(store)); // #/interaction/<id>: a notification's link
  addEventListener("pagehide", () => flushDismissals(store)); // the tab closes within a Dismiss's undo window
  setInterval(() => tick(store), 1000);
  void pollSignIns();
  setInterval(pollSignIns, SIGN_IN_POLL_MS);
  void pollStatus(store);
  setInterval(() => void pollStatus(store), STATUS_POLL_MS);
  void pollHistory();
  setInterval(() => void pollHistory(), HISTORY_POLL_MS);
}

/**
 * Show who is signed in with OpenID Connect, and the Sign out button.
 * @param {string | null | undefined} person
 */
function showPerson(person) {
  const form = document.getElementById("sign-out");
  const who = document.getElementById("person");
  if (!person || !form || !who) return;
  who.textContent = person;
  form.hidden = false;
}

void start();
