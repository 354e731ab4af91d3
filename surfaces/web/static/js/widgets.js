// @ts-check
// One field's widget: its control, label, hints and inline error, read through the field rules of fields.js.

import { el, fold } from "./dom.js";
import { constraintText, parseField, toLocalInput } from "./fields.js";
import { nextId } from "./state.js";
import { displayText, optionText } from "./untrusted.js";

/** @typedef {import("./fields.js").Field} Field */
/** @typedef {import("./fields.js").RawInput} RawInput */
/** @typedef {import("./state.js").Card} Card */
/** @typedef {import("./state.js").FieldEntry} FieldEntry */
/** @typedef {import("./state.js").Store} Store */
/**
 * @typedef {object} Control
 * @property {HTMLElement} node what goes into the page
 * @property {HTMLElement | undefined} focus what takes the focus (and carries aria-describedby)
 * @property {() => RawInput} read the widget's raw input
 * @property {HTMLElement[]} watch the inputs whose edits re-check the field
 */

const FILTER_THRESHOLD = 8; // option lists longer than this get a filter box

/**
 * @param {number} count
 * @param {(query: string) => void} onFilter
 * @param {string} labelText
 */
function filterBox(count, onFilter, labelText) {
  const input = el("input", {
    className: "filter",
    attrs: { type: "search", placeholder: `Filter ${count} options…`, "aria-label": `Filter options of ${labelText}` },
  });
  input.addEventListener("input", () => onFilter(fold(input.value.trim())));
  return input;
}

/** @type {Record<string, string>} */
const INPUT_TYPES = { string: "text", email: "email", uri: "url", date: "date", "date-time": "datetime-local" };

/**
 * @param {Field} field
 * @param {string} id
 * @returns {Control | null}
 */
function buildControl(field, id) {
  const c = field.constraints || {};
  switch (field.kind) {
    case "string":
    case "email":
    case "uri":
    case "date":
    case "date-time": {
      const type = INPUT_TYPES[field.kind];
      const input = el("input", { attrs: { id, type, autocomplete: "off", spellcheck: field.kind === "string" } });
      const fallback = typeof field.default === "string" ? field.default : null;
      if (field.kind === "date-time") {
        input.step = "1";
        // An untouched default is sent exactly as the server gave it (offset, fractions of a second), not
        // re-rendered through local time: read() returns it while the input still shows its initial value.
        /** @type {string | null} */
        let initial = null;
        if (fallback !== null) {
          input.value = toLocalInput(fallback);
          initial = input.value; // as the browser normalised it (it may drop ":00" seconds)
        }
        return {
          node: input,
          focus: input,
          read: () => (fallback !== null && initial !== null && input.value === initial ? { exact: fallback } : input.value),
          watch: [input],
        };
      }
      if (field.kind === "string" && c.maxLength !== undefined && (c.maxLength ?? 0) > 200) {
        const area = el("textarea", { attrs: { id, rows: 3, autocomplete: "off" } });
        if (fallback !== null) area.value = displayText(fallback, { multiline: true });
        return { node: area, focus: area, read: () => area.value, watch: [area] };
      }
      // A server's default is shown (and sent, if kept) as the untrusted-text rule shows it, as in the TUI.
      if (fallback !== null) input.value = displayText(fallback);
      return { node: input, focus: input, read: () => input.value, watch: [input] };
    }
    case "number":
    case "integer": {
      // Plain text, not type=number: the typed digits are kept exactly (no rounding past 2^53, no "0x10").
      const input = el("input", {
        attrs: { id, type: "text", inputmode: field.kind === "integer" ? "numeric" : "decimal", autocomplete: "off", spellcheck: false },
      });
      if (field.default !== null && field.default !== undefined) input.value = String(field.default);
      return { node: input, focus: input, read: () => input.value, watch: [input] };
    }
    case "boolean": {
      // Yes / No radios: without a default nothing is chosen, so a required boolean needs a real choice and an
      // optional one is left out unless the user picks (one rule in every surface and the authority).
      const group = el("div", { className: "yes-no", attrs: { role: "radiogroup", "aria-labelledby": `${id}-label` } });
      /** @type {HTMLInputElement[]} */
      const radios = [];
      /** @type {Array<[string, boolean]>} */
      const choices = [["Yes", true], ["No", false]];
      for (const [text, value] of choices) {
        const radioId = `${id}-${text.toLowerCase()}`;
        const radio = el("input", { attrs: { id: radioId, type: "radio", name: id } });
        radio.checked = field.default === value;
        radio.dataset.value = String(value);
        radios.push(radio);
        group.append(el("label", { className: "check", attrs: { for: radioId } }, [radio, el("span", { text })]));
      }
      const read = () => {
        const chosen = radios.find((r) => r.checked);
        return chosen ? chosen.dataset.value === "true" : "";
      };
      return { node: group, focus: radios[0], read, watch: radios };
    }
    case "single_select": {
      const select = el("select", { attrs: { id } });
      const placeholder = el("option", { text: "Choose…", attrs: { value: "" } });
      select.append(placeholder);
      for (const option of field.options) {
        const node = new Option(optionText(option.label, option.value), option.value);
        select.append(node);
      }
      select.value = typeof field.default === "string" ? field.default : "";
      /** @type {HTMLElement[]} */
      const nodes = [select];
      if (field.options.length > FILTER_THRESHOLD) {
        select.size = Math.min(8, field.options.length + 1);
        const box = filterBox(field.options.length, (query) => {
          for (const node of select.options) {
            if (!node.value) continue;
            node.hidden = Boolean(query) && !fold(node.text).includes(query) && !fold(node.value).includes(query);
          }
        }, field.label);
        nodes.unshift(box);
      }
      return { node: el("div", { className: "select-wrap" }, nodes), focus: select, read: () => select.value, watch: [select] };
    }
    case "multi_select": {
      const list = el("div", { className: "checks", attrs: { role: "group", "aria-labelledby": `${id}-label` } });
      /** @type {HTMLInputElement[]} */
      const boxes = [];
      const chosen = new Set(Array.isArray(field.default) ? field.default : []);
      // Untouched and without a default, an optional multi select is left out (like a boolean); once the
      // user picks or unpicks, the picks are sent ([] included).
      let touched = field.default !== null && field.default !== undefined;
      field.options.forEach((option, index) => {
        const boxId = `${id}-o${index}`;
        const box = el("input", { attrs: { id: boxId, type: "checkbox" } });
        box.value = option.value;
        box.checked = chosen.has(option.value);
        box.addEventListener("change", () => {
          touched = true;
        });
        boxes.push(box);
        const row = el("label", { className: "check", attrs: { for: boxId } }, [box, el("span", { text: optionText(option.label, option.value) })]);
        row.dataset.search = fold(`${option.label}\u0000${option.value}`);
        list.append(row);
      });
      /** @type {HTMLElement[]} */
      const nodes = [list];
      if (field.options.length > FILTER_THRESHOLD) {
        nodes.unshift(filterBox(field.options.length, (query) => {
          for (const row of list.children) {
            if (row instanceof HTMLElement) row.hidden = Boolean(query) && !(row.dataset.search ?? "").includes(query);
          }
        }, field.label));
      }
      return {
        node: el("div", { className: "multi-wrap" }, nodes),
        focus: boxes[0],
        read: () => (touched ? boxes.filter((b) => b.checked).map((b) => b.value) : null),
        watch: boxes,
      };
    }
    default:
      return null;
  }
}

/**
 * One field's element; its entry (read, focus, showError) is added to `card.fields`.
 * @param {Store} store
 * @param {Field} field
 * @param {Card} card
 * @returns {HTMLElement}
 */
export function buildField(store, field, card) {
  const id = nextId(store, "f");
  const control = buildControl(field, id);
  const wrap = el("div", { className: `field kind-${field.kind}` });
  wrap.dataset.name = field.name;
  wrap.dataset.kind = field.kind;
  const label = el("label", { className: "label", attrs: { for: field.kind === "multi_select" || field.kind === "boolean" ? undefined : id, id: `${id}-label` } });
  label.append(el("span", { className: "label-text", text: field.label }));
  if (field.required) {
    label.append(el("span", { className: "required", text: "*", attrs: { "aria-hidden": "true", title: "required" } }));
    label.append(el("span", { className: "sr-only", text: " (required)" }));
  }
  const help = field.description ? el("p", { className: "help", text: field.description, attrs: { id: `${id}-help` } }) : null;
  const hintText = constraintText(field);
  const hint = hintText ? el("p", { className: "hint", text: hintText }) : null;
  const error = el("p", { className: "field-error", attrs: { id: `${id}-error`, role: "alert" } });
  error.hidden = true;
  if (!control) {
    wrap.append(label, el("p", { className: "field-error", text: "This field kind is not supported by this page." }));
    card.fields.push({ field, read: () => null, showError: () => {}, focus: () => {} });
    return wrap;
  }
  const describedBy = [help && `${id}-help`, `${id}-error`].filter(Boolean).join(" ");
  control.focus?.setAttribute("aria-describedby", describedBy);
  wrap.append(...[label, help, control.node, hint, error].filter((node) => node !== null));
  /** @type {FieldEntry} */
  const entry = {
    field,
    read: control.read,
    focus: () => control.focus?.focus(),
    showError(message) {
      error.textContent = message || "";
      error.hidden = !message;
      wrap.classList.toggle("invalid", Boolean(message));
      for (const node of control.watch) node.setAttribute("aria-invalid", message ? "true" : "false");
    },
  };
  // Once a field shows an error, re-check it as the user edits so the message clears when fixed.
  for (const node of control.watch) {
    const recheck = () => {
      if (wrap.classList.contains("invalid")) entry.showError(parseField(field, entry.read(), true)[1]);
    };
    node.addEventListener("input", recheck);
    node.addEventListener("change", recheck);
  }
  card.fields.push(entry);
  return wrap;
}
