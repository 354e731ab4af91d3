// @ts-check
// The sign-in page (login.html) keeps the link target the page was opened on through sign-in. A notification's
// link (`/#/interaction/<id>`) reaches this page through redirects that keep its fragment, but a browser never
// sends a fragment to a server: this page hands it on as `next`, a path of this origin the server checks
// (surfaces/web/oidc.py return_to), to /oidc/login, whose callback returns there, and to the token form.
// With OpenID Connect only (`data-oidc-only`) the page goes on to the identity provider by itself.

/**
 * Where to return after sign-in: the page with the fragment this page was opened on, "/" without one.
 * @param {string} hash location.hash
 * @returns {string}
 */
export function returnTo(hash) {
  return hash.startsWith("#/") ? `/${hash}` : "/";
}

function start() {
  const next = returnTo(location.hash);
  const target = `/oidc/login?next=${encodeURIComponent(next)}`;
  const link = document.getElementById("oidc-sign-in");
  if (link instanceof HTMLAnchorElement) link.href = target;
  const field = document.getElementById("next");
  if (field instanceof HTMLInputElement) field.value = next;
  if (document.body.hasAttribute("data-oidc-only")) location.replace(target);
}

start();
