// @ts-check
// Drafts: what was typed survives a tab reload (sessionStorage: this tab only). Saved per form as the values
// of its inputs in DOM order (the same view renders the same DOM); cleared when the form leaves the page
// (submitted, declined, dismissed, closed elsewhere).

/** @typedef {import("./state.js").Card} Card */
/** @typedef {HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement} DraftInput */

const DRAFT_PREFIX = "maka.draft.";

/**
 * @param {Card} card
 * @returns {DraftInput[]}
 */
function draftInputs(card) {
  /** @type {NodeListOf<DraftInput>} */
  const nodes = card.el.querySelectorAll(".field-list input, .field-list select, .field-list textarea");
  return [...nodes].filter((node) => node.type !== "search");
}

/**
 * @param {DraftInput} node
 * @returns {node is HTMLInputElement}
 */
function isToggle(node) {
  return node.type === "checkbox" || node.type === "radio";
}

/** @param {Card} card */
function saveDraft(card) {
  const values = draftInputs(card).map((node) => (isToggle(node) ? node.checked : node.value));
  try {
    sessionStorage.setItem(DRAFT_PREFIX + card.view.id, JSON.stringify(values));
  } catch {
    // storage full or disabled: drafts are a convenience only
  }
}

/**
 * Puts a saved draft back into a freshly rendered card and saves every later edit.
 * @param {Card} card
 * @returns {Card}
 */
export function restoreDraft(card) {
  /** @type {unknown} */
  let values = null;
  try {
    values = JSON.parse(sessionStorage.getItem(DRAFT_PREFIX + card.view.id) || "null");
  } catch {
    values = null;
  }
  const inputs = draftInputs(card);
  if (Array.isArray(values) && values.length === inputs.length) {
    const saved = values;
    inputs.forEach((node, index) => {
      const value = saved[index];
      if (isToggle(node)) node.checked = value === true;
      else if (typeof value === "string") node.value = value;
    });
    card.el.dataset.draft = "restored";
  }
  for (const node of inputs) {
    node.addEventListener("input", () => saveDraft(card));
    node.addEventListener("change", () => saveDraft(card));
  }
  return card;
}

/** @param {string} id */
export function clearDraft(id) {
  try {
    sessionStorage.removeItem(DRAFT_PREFIX + id);
  } catch {
    // nothing stored
  }
}
