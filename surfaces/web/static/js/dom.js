// @ts-check
// Small DOM helpers. Every server-supplied string goes into the page as DOM text (textContent, option text,
// attribute values), never parsed as HTML, and every text set here passes untrusted.js's displayText (no
// control, bidi or zero-width character; runs of blank lines collapsed).

import { displayText } from "./untrusted.js";

/** @typedef {Record<string, string | number | boolean | null | undefined>} Attributes */

/**
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {{className?: string, text?: string, attrs?: Attributes}} [options]
 * @param {Array<Node | null | undefined>} [children]
 * @returns {HTMLElementTagNameMap[K]}
 */
export function el(tag, options = {}, children = []) {
  const node = document.createElement(tag);
  if (options.className) node.className = options.className;
  if (options.text !== undefined) node.textContent = displayText(options.text, { multiline: true });
  for (const [name, value] of Object.entries(options.attrs || {})) {
    if (value !== undefined && value !== null && value !== false) node.setAttribute(name, String(value));
  }
  for (const child of children) if (child) node.append(child);
  return node;
}

/**
 * The page's element with this id (index.html always has it).
 * @param {string} id
 * @returns {HTMLElement}
 */
export function byId(id) {
  const node = document.getElementById(id);
  if (!node) throw new Error(`the page has no #${id}`);
  return node;
}

/**
 * The first element under `root` matching `selector` (the card template always has it).
 * @param {ParentNode} root
 * @param {string} selector
 * @returns {HTMLElement}
 */
export function find(root, selector) {
  const node = root.querySelector(selector);
  if (!(node instanceof HTMLElement)) throw new Error(`no ${selector} here`);
  return node;
}

/**
 * @param {ParentNode} root
 * @param {string} selector
 * @param {string} text
 */
export function setText(root, selector, text) {
  const node = find(root, selector);
  node.textContent = displayText(text, { multiline: true });
  return node;
}

/** @param {string} text */
export function fold(text) {
  return text.normalize("NFKC").toLocaleLowerCase();
}
