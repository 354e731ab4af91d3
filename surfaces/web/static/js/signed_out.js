// @ts-check
// The page's sign-in has ended for good (the event stream answered 401 and so did GET /api/session): the page says
// so, and which token signs it in again (GET /api/session's `sign_in`, surfaces/web/sign_in.py), instead of
// "Reconnecting…" forever. Under `maka up` that is the owner token: the ready line's link, or STATE/tokens.json.

import { byId, find } from "./dom.js";

/** @typedef {{token: string, tokens_file: string | null}} SignInHint */

/** @type {SignInHint} */
let hint = { token: "surface", tokens_file: null };

/**
 * Remember which token signs this page in again (from GET /api/session, while the page is still signed in).
 * @param {SignInHint | undefined} given
 */
export function rememberSignIn(given) {
  if (given && typeof given.token === "string") hint = given;
}

/**
 * What the signed-out notice says.
 * @param {SignInHint} about
 * @returns {string}
 */
export function signedOutText(about) {
  if (about.token === "owner") {
    return (
      "The stack at this address no longer accepts this browser's sign-in (it was started with another state dir " +
      "or a new web-session.key, or the sign-in expired). Sign in again with the link in maka up's ready line, " +
      `or with the owner token in ${about.tokens_file || ".state/tokens.json"}.`
    );
  }
  if (about.token === "surface") {
    return (
      "This sign-in is no longer valid (the surface token changed, or the sign-in expired). Sign in again with " +
      "the surface token (MAKA_SURFACE_TOKEN)."
    );
  }
  return "Your sign-in has ended. Sign in again.";
}

/** Show the signed-out notice with its Sign in link (keeping a notification's #/interaction/<id> target). */
export function showSignedOut() {
  const box = byId("signed-out");
  find(box, ".signed-out-text").textContent = signedOutText(hint);
  const link = find(box, "a");
  if (link instanceof HTMLAnchorElement) link.href = `/login${location.hash.startsWith("#/") ? location.hash : ""}`;
  box.hidden = false;
}
