// @ts-check
// One rendering rule for untrusted text, the page's copy of surfaces/common/untrusted.py: every server-supplied
// string shown on the page passes displayText. C0 controls and DEL become control pictures (ESC → ␛), C1,
// bidi, zero-width and other format characters become U+FFFD, CR LF and U+2028/U+2029 are newlines (kept only
// in multiline text, else spaces), tabs are spaces, and runs of blank lines collapse to one. Both copies run
// tests/fixtures/untrusted_text_cases.json.

export const MARKER = "\ufffd";

const BIDI_AND_ZERO_WIDTH = new Set([..."\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c\u200b\u200c\u200d\u2060\ufeff"]);
const FORMAT = /^[\p{Cf}\p{Cs}]$/u;

/**
 * The replacement of one character, or null when it is shown as it is.
 * @param {string} char
 * @returns {string | null}
 */
function picture(char) {
  const code = char.codePointAt(0) ?? 0;
  if (code < 0x20) return String.fromCharCode(0x2400 + code);
  if (code === 0x7f) return "\u2421";
  if ((code >= 0x80 && code <= 0x9f) || BIDI_AND_ZERO_WIDTH.has(char)) return MARKER;
  if (code < 0xa0) return null;
  return FORMAT.test(char) ? MARKER : null;
}

/**
 * Untrusted text as the page shows it, and whether a character was replaced by a marker.
 * @param {string} text
 * @param {{multiline?: boolean}} [options]
 * @returns {{text: string, altered: boolean}}
 */
export function shownText(text, options = {}) {
  const multiline = options.multiline === true;
  const out = [];
  let altered = false;
  for (const char of String(text).replace(/\r\n|[\u2028\u2029]/g, "\n")) {
    if (char === "\n") {
      out.push(multiline ? "\n" : " ");
      continue;
    }
    if (char === "\t") {
      out.push(" ");
      continue;
    }
    const shown = picture(char);
    if (shown === null) {
      out.push(char);
    } else {
      out.push(shown);
      altered = true;
    }
  }
  let shown = out.join("");
  if (multiline) shown = shown.replace(/\n(?:[ ]*\n){2,}/g, "\n\n");
  return { text: shown, altered };
}

/**
 * `text` safe to show: no control, C1, bidi, zero-width or format character survives (each is a marker).
 * @param {string} text
 * @param {{multiline?: boolean}} [options]
 */
export function displayText(text, options = {}) {
  return shownText(text, options).text;
}

/** @param {string} text */
export function wasAltered(text) {
  return shownText(text, { multiline: true }).altered;
}

/**
 * An option's display text: its label, else its value, else a visible "(empty)", never a blank choice.
 * @param {string} label
 * @param {string} value
 */
export function optionText(label, value) {
  return displayText(label).trim() || displayText(value).trim() || "(empty)";
}
