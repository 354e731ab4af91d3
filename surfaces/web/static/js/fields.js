// @ts-check
// The field rules of the web page: typed input → the value sent, or a user-facing error. Pure (no DOM), so
// Node runs it against tests/fixtures/form_field_cases.json next to the Python authority
// (services/core/form/answer.py) and the CLI/TUI rule (surfaces/common/form_input.py).
// Error messages never quote the value the user typed (it may be a secret).

export const MAX_SAFE_INTEGER = 2 ** 53;

/** @typedef {{value: string, label: string}} FieldOption */
/**
 * @typedef {object} Constraints
 * @property {number} [minLength]
 * @property {number} [maxLength]
 * @property {string} [format]
 * @property {number} [minimum]
 * @property {number} [maximum]
 * @property {number} [minItems]
 * @property {number} [maxItems]
 */
/** @typedef {string | number | boolean | string[]} FormValue */
/**
 * A field as the server's view has it (surfaces/web/views.py, `field_to_json`).
 * @typedef {object} Field
 * @property {string} name
 * @property {string} kind "string" | "email" | "uri" | "date" | "date-time" | "number" | "integer" | "boolean" | "single_select" | "multi_select"
 * @property {string} label
 * @property {string} description
 * @property {boolean} required
 * @property {Constraints} constraints
 * @property {FormValue | null} default
 * @property {FieldOption[]} options
 */
/**
 * What a widget holds: text (text-like, number and integer fields; `{exact}` for an untouched date-time
 * default, sent verbatim), a boolean or "" (nothing chosen), the chosen option value or "", the picked option
 * values or null (a multi select left untouched without a default).
 * @typedef {string | boolean | string[] | null | {exact: string}} RawInput
 */
/**
 * [value, error]: value undefined = left out of the answer; error is a user-facing message (never the value).
 * @typedef {[FormValue | undefined, string | null]} Parsed
 */

/** @param {string} text */
export function codePoints(text) {
  return Array.from(text).length;
}

/**
 * @param {number} n
 * @param {string} word
 */
export function pluralise(n, word) {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

// --- date-time conversion (datetime-local shows local time; the form wants RFC 3339) -----------

/** @param {number} n */
const pad2 = (n) => String(n).padStart(2, "0");

/** @param {string} iso */
export function toLocalInput(iso) {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return "";
  return (
    `${date.getFullYear()}-${pad2(date.getMonth() + 1)}-${pad2(date.getDate())}` +
    `T${pad2(date.getHours())}:${pad2(date.getMinutes())}:${pad2(date.getSeconds())}`
  );
}

/**
 * @param {string} value
 * @returns {string | null}
 */
export function fromLocalInput(value) {
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) return null;
  return date.toISOString().replace(/\.\d{3}Z$/, "Z");
}

// --- hints ----------------------------------------------------------------------------------------

/** @type {Record<string, string>} */
const FORMAT_HINTS = {
  email: "An email address, like name@example.com",
  uri: "A web address, like https://example.com/path",
  date: "A date",
  "date-time": "A date and time (your local time zone)",
};

/** @param {Field} field */
export function constraintText(field) {
  const c = field.constraints || {};
  const parts = [];
  /** @param {number} n */
  const num = (n) => String(n);
  if (field.kind === "number" || field.kind === "integer") {
    parts.push(field.kind === "integer" ? "A whole number" : "A number");
    if (c.minimum !== undefined && c.maximum !== undefined) parts.push(`between ${num(c.minimum)} and ${num(c.maximum)}`);
    else if (c.minimum !== undefined) parts.push(`of at least ${num(c.minimum)}`);
    else if (c.maximum !== undefined) parts.push(`of at most ${num(c.maximum)}`);
    return parts.join(" ");
  }
  if (FORMAT_HINTS[field.kind]) parts.push(FORMAT_HINTS[field.kind]);
  if (c.minLength !== undefined && c.maxLength !== undefined) parts.push(`${c.minLength} to ${pluralise(c.maxLength, "character")}`);
  else if (c.minLength === 1) parts.push("Must not be empty");
  else if (c.minLength !== undefined) parts.push(`at least ${pluralise(c.minLength, "character")}`);
  else if (c.maxLength !== undefined) parts.push(`at most ${pluralise(c.maxLength, "character")}`);
  if (field.kind === "multi_select") {
    if (c.minItems !== undefined && c.maxItems !== undefined) parts.push(`Pick ${c.minItems} to ${c.maxItems}`);
    else if (c.minItems !== undefined) parts.push(`Pick at least ${c.minItems}`);
    else if (c.maxItems !== undefined) parts.push(`Pick at most ${c.maxItems}`);
    else parts.push("Pick any");
  }
  return parts.join(" · ");
}

// --- parsing --------------------------------------------------------------------------------------

/**
 * @param {string} value
 * @returns {boolean}
 */
function isUri(value) {
  try {
    return Boolean(new URL(value).protocol);
  } catch {
    return false;
  }
}

/**
 * A real calendar date as YYYY-MM-DD (not 2026-02-30, which Date.parse would roll over to March).
 * @param {string} value
 */
function isRealDate(value) {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(value) || value.startsWith("0000")) return false;
  const time = Date.parse(`${value}T00:00:00Z`);
  return !Number.isNaN(time) && new Date(time).toISOString().startsWith(value);
}

/**
 * One widget's raw input → [value, error]. With `validate` false (decline, dismiss) nothing is refused.
 * @param {Field} field
 * @param {RawInput} raw
 * @param {boolean} validate
 * @returns {Parsed}
 */
export function parseField(field, raw, validate) {
  const c = field.constraints || {};
  /** @returns {Parsed} */
  const missing = () => (field.required && validate ? [undefined, "Required"] : [undefined, null]);
  switch (field.kind) {
    case "string":
    case "email":
    case "uri":
    case "date":
    case "date-time": {
      if (raw !== null && typeof raw === "object" && "exact" in raw) return [raw.exact, null]; // the untouched default, verbatim
      if (typeof raw !== "string" || raw === "") return missing();
      /** @type {string | null} */
      let value = field.kind === "string" ? raw : raw.trim();
      if (field.kind === "date-time") {
        value = fromLocalInput(value);
        if (value === null) return [undefined, "Enter a real date and time"];
      }
      if (!validate) return [value, null];
      const length = codePoints(value);
      if (c.minLength !== undefined && length < c.minLength) return [value, `Use at least ${pluralise(c.minLength, "character")}`];
      if (c.maxLength !== undefined && length > c.maxLength) return [value, `Use at most ${pluralise(c.maxLength, "character")}`];
      // Syntax only, like the Host: internal names such as ops@corp.local or a@localhost are addresses too.
      if (field.kind === "email" && !/^\S+@[^\s@]+$/.test(value)) return [value, "Enter an email address like name@example.com"];
      if (field.kind === "uri" && !isUri(value)) return [value, "Enter a full address like https://example.com"];
      if (field.kind === "date" && !isRealDate(value)) return [value, "Enter a real date"];
      return [value, null];
    }
    case "number":
    case "integer": {
      if (typeof raw !== "string") return missing();
      const text = raw.trim();
      if (text === "") return missing();
      // Exact JSON syntax (no hex, no "1e3" for an integer); integers are range-checked as BigInt so nothing
      // past 2^53 is silently rounded (9007199254740993 is refused, not sent as ...992).
      if (field.kind === "integer") {
        if (!/^-?(0|[1-9]\d*)$/.test(text)) return [undefined, "Enter a whole number"];
        const big = BigInt(text);
        if (big > BigInt(MAX_SAFE_INTEGER) || big < -BigInt(MAX_SAFE_INTEGER)) return [undefined, "This number is too large"];
      } else if (!/^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?$/.test(text)) {
        return [undefined, "Enter a number like 42 or -3.5"];
      }
      const value = Number(text);
      if (!Number.isFinite(value)) return [undefined, "This number is too large"];
      if (!validate) return [value, null];
      if (c.minimum !== undefined && value < c.minimum) return [value, `Must be at least ${c.minimum}`];
      if (c.maximum !== undefined && value > c.maximum) return [value, `Must be at most ${c.maximum}`];
      return [value, null];
    }
    case "boolean":
      if (typeof raw !== "boolean") return missing(); // nothing chosen: required → "Required", optional → left out
      return [raw, null];
    case "single_select":
      if (typeof raw !== "string" || raw === "") return missing();
      return [raw, null];
    case "multi_select": {
      // Untouched without a default: optional → left out; required → [] (nothing picked is an answer; minItems
      // decides), the same rule as the Host's.
      /** @type {string[]} */
      let picks;
      if (Array.isArray(raw)) picks = raw;
      else if (!field.required) return [undefined, null];
      else picks = [];
      if (!validate) return [picks, null];
      if (c.minItems !== undefined && picks.length < c.minItems) return [picks, `Pick at least ${c.minItems}`];
      if (c.maxItems !== undefined && picks.length > c.maxItems) return [picks, `Pick at most ${c.maxItems}`];
      return [picks, null];
    }
    default:
      return [undefined, null];
  }
}
