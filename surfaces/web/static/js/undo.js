// @ts-check
// Dismiss with undo: the card is folded behind "Dismissed — Undo" for the store's undo window; nothing is sent
// until it ends, and Undo brings the form back with its draft (its fields were only hidden, never removed).
// Leaving the page (closing the tab, navigating away: `pagehide`) within the window sends every pending
// dismissal at once, as a `keepalive` request that outlives the page: the person saw it dismissed, so it is.

import { el, find } from "./dom.js";

/** @typedef {import("./state.js").Card} Card */
/** @typedef {import("./state.js").Store} Store */

/**
 * @param {number} leftMs
 */
function countdownText(leftMs) {
  return `Dismissed — sending in ${Math.max(0, Math.ceil(leftMs / 1000))} s.`;
}

/**
 * Starts the card's dismissal countdown; `send` runs when it ends (never after Undo or once the card is gone),
 * or with `keepalive` true when the page goes first (flushDismissals).
 * @param {Store} store
 * @param {Card} card
 * @param {(keepalive: boolean) => void} send
 */
export function dismissWithUndo(store, card, send) {
  if (card.dismissing) return;
  const due = Date.now() + store.undoMs;
  const text = el("span", { className: "undo-text", text: countdownText(store.undoMs) });
  const undo = el("button", { className: "btn primary undo", text: "Undo", attrs: { type: "button" } });
  const bar = el("div", { className: "undo-bar", attrs: { role: "status" } }, [text, undo]);
  card.el.classList.add("dismissing");
  card.el.append(bar);
  const ticker = setInterval(() => {
    text.textContent = countdownText(due - Date.now());
  }, 250);
  const fire = setTimeout(() => {
    stop();
    send(false);
  }, store.undoMs);
  function stop() {
    clearInterval(ticker);
    clearTimeout(fire);
    bar.remove();
    card.el.classList.remove("dismissing");
    card.dismissing = null;
  }
  card.dismissing = {
    stop,
    flush: () => {
      stop();
      send(true);
    },
  };
  undo.addEventListener("click", () => {
    stop();
    /** @type {HTMLButtonElement} */ (find(card.el, 'button[data-action="cancel"]')).focus();
  });
  undo.focus();
}

/**
 * Ends a card's countdown without sending (the form settled elsewhere, or the card went).
 * @param {Card} card
 */
export function stopDismissal(card) {
  if (card.dismissing) card.dismissing.stop();
}

/**
 * Sends every dismissal still counting down, now (the `pagehide` of the page: the tab closes or navigates away
 * within the undo window, and the person believes those forms dismissed).
 * @param {Store} store
 */
export function flushDismissals(store) {
  for (const card of [...store.cards.values()]) card.dismissing?.flush();
}
