// Maka web surface: renders the Host's pending forms and sends user answers.
// Uses only the JSON API under /api/ (session, events, sign-ins, interactions/{id}, interactions/{id}/answer).
// Every server-supplied string is put into the page as DOM text (textContent / option.text /
// attribute values), never parsed as HTML.

"use strict";

const FILTER_THRESHOLD = 8; // option lists longer than this get a filter box
const MAX_NOTICES = 8;
const MAX_SAFE_INTEGER = 2 ** 53;

const state = {
  csrf: "",
  skewMs: 0, // server clock minus browser clock
  cards: new Map(), // interaction id -> {view, el, fields: [{field, read, showError}], busy}
  inFlight: new Set(), // ids with an answer POST under way from this tab
  seq: 0,
  following: new Map(), // interaction id -> notice element that follows its call to the end
};

// --- small DOM helpers ------------------------------------------------------------------------

function el(tag, options = {}, children = []) {
  const node = document.createElement(tag);
  if (options.className) node.className = options.className;
  if (options.text !== undefined) node.textContent = options.text;
  for (const [name, value] of Object.entries(options.attrs || {})) {
    if (value !== undefined && value !== null && value !== false) node.setAttribute(name, String(value));
  }
  for (const child of children) if (child) node.append(child);
  return node;
}

function setText(root, selector, text) {
  const node = root.querySelector(selector);
  node.textContent = text;
  return node;
}

function nextId(prefix) {
  state.seq += 1;
  return `${prefix}-${state.seq}`;
}

function newSubmissionId() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function codePoints(text) {
  return Array.from(text).length;
}

function fold(text) {
  return text.normalize("NFKC").toLocaleLowerCase();
}

function pluralise(n, word) {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

// --- time ---------------------------------------------------------------------------------------

function updateSkew(serverTime) {
  const server = Date.parse(serverTime);
  if (!Number.isNaN(server)) state.skewMs = server - Date.now();
}

function serverNow() {
  return Date.now() + state.skewMs;
}

function timeLeftText(expiresAt) {
  if (!expiresAt) return { text: "no time limit", urgent: false, expired: false };
  const left = Date.parse(expiresAt) - serverNow();
  if (left <= 0) return { text: "time is up", urgent: true, expired: true };
  const seconds = Math.ceil(left / 1000);
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = seconds % 60;
  const pad = (n) => String(n).padStart(2, "0");
  const text = h ? `${h}h ${pad(m)}m left` : m ? `${m}m ${pad(s)}s left` : `${s}s left`;
  return { text, urgent: seconds <= 60, expired: false };
}

// "Form 1 of 2 · this round must be answered by 14:05:09": the round's one deadline (the server's
// requestState expires then) and this form's place in it; empty for a form outside a round.
function roundText(round) {
  if (!round || !round.size) return "";
  const parts = [];
  if (round.size > 1) parts.push(`Form ${round.position} of ${round.size}`);
  if (round.deadline) {
    const when = new Date(Date.parse(round.deadline) - state.skewMs);
    const all = round.size > 1 ? "all forms of this round" : "this form";
    parts.push(`answer ${all} by ${when.toLocaleTimeString()}`);
  }
  return parts.join(" · ");
}

function showRound(card) {
  const node = card.el.querySelector(".round");
  const text = roundText(card.view.round);
  node.textContent = text;
  node.hidden = !text;
}

function tick() {
  for (const card of state.cards.values()) {
    const timer = card.el.querySelector(".timer");
    const left = timeLeftText(card.view.expires_at);
    timer.textContent = left.text;
    timer.classList.toggle("urgent", left.urgent);
    timer.classList.toggle("expired", left.expired);
  }
}

// --- date-time conversion (datetime-local shows local time; the form wants RFC 3339) -----------

function toLocalInput(iso) {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return "";
  const pad = (n) => String(n).padStart(2, "0");
  return (
    `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}` +
    `T${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`
  );
}

function fromLocalInput(value) {
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) return null;
  return date.toISOString().replace(/\.\d{3}Z$/, "Z");
}

// --- field widgets ------------------------------------------------------------------------------

const FORMAT_HINTS = {
  email: "An email address, like name@example.com",
  uri: "A web address, like https://example.com/path",
  date: "A date",
  "date-time": "A date and time (your local time zone)",
};

function constraintText(field) {
  const c = field.constraints || {};
  const parts = [];
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

function filterBox(count, onFilter, labelText) {
  const input = el("input", {
    className: "filter",
    attrs: { type: "search", placeholder: `Filter ${count} options…`, "aria-label": `Filter options of ${labelText}` },
  });
  input.addEventListener("input", () => onFilter(fold(input.value.trim())));
  return input;
}

function buildControl(field, id) {
  const c = field.constraints || {};
  switch (field.kind) {
    case "string":
    case "email":
    case "uri":
    case "date":
    case "date-time": {
      const type = { string: "text", email: "email", uri: "url", date: "date", "date-time": "datetime-local" }[field.kind];
      const input = el("input", { attrs: { id, type, autocomplete: "off", spellcheck: field.kind === "string" } });
      if (field.kind === "date-time") {
        input.step = "1";
        // An untouched default is sent exactly as the server gave it (offset, fractions of a second), not
        // re-rendered through local time: read() returns it while the input still shows its initial value.
        let initial = null;
        if (field.default !== null && field.default !== undefined) {
          input.value = toLocalInput(field.default);
          initial = input.value; // as the browser normalised it (it may drop ":00" seconds)
        }
        return {
          node: input,
          focus: input,
          read: () => (initial !== null && input.value === initial ? { exact: field.default } : input.value),
          watch: [input],
        };
      }
      if (field.kind === "string" && c.maxLength !== undefined && (c.maxLength ?? 0) > 200) {
        const area = el("textarea", { attrs: { id, rows: 3, autocomplete: "off" } });
        if (field.default !== null) area.value = field.default;
        return { node: area, focus: area, read: () => area.value, watch: [area] };
      }
      if (field.default !== null && field.default !== undefined) {
        input.value = field.kind === "date-time" ? toLocalInput(field.default) : field.default;
      }
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
      const radios = [];
      for (const [text, value] of [["Yes", true], ["No", false]]) {
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
        const node = new Option(option.label, option.value);
        select.append(node);
      }
      select.value = field.default ?? "";
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
      const boxes = [];
      const chosen = new Set(field.default || []);
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
        const row = el("label", { className: "check", attrs: { for: boxId } }, [box, el("span", { text: option.label })]);
        row.dataset.search = fold(`${option.label}\u0000${option.value}`);
        list.append(row);
      });
      const nodes = [list];
      if (field.options.length > FILTER_THRESHOLD) {
        nodes.unshift(filterBox(field.options.length, (query) => {
          for (const row of list.children) row.hidden = Boolean(query) && !row.dataset.search.includes(query);
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

// Returns [value, error]: value undefined = omit; error is a user-facing message (never the value).
function parseField(field, raw, validate) {
  const c = field.constraints || {};
  const missing = () => (field.required && validate ? [undefined, "Required"] : [undefined, null]);
  switch (field.kind) {
    case "string":
    case "email":
    case "uri":
    case "date":
    case "date-time": {
      if (raw !== null && typeof raw === "object") return [raw.exact, null]; // the untouched default, verbatim
      if (raw === "") return missing();
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
      if (field.kind === "uri") {
        let ok = false;
        try {
          ok = Boolean(new URL(value).protocol);
        } catch {
          ok = false;
        }
        if (!ok) return [value, "Enter a full address like https://example.com"];
      }
      if (field.kind === "date" && (!/^\d{4}-\d{2}-\d{2}$/.test(value) || Number.isNaN(Date.parse(value)))) return [value, "Enter a real date"];
      return [value, null];
    }
    case "number":
    case "integer": {
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
      if (raw === "") return missing(); // nothing chosen: required → "Required", optional → left out
      return [raw, null];
    case "single_select":
      if (raw === "") return missing();
      return [raw, null];
    case "multi_select": {
      // Untouched without a default: optional → left out; required → [] (nothing picked is an answer; minItems
      // decides), the same rule as the Host's.
      if (raw === null) {
        if (!field.required) return [undefined, null];
        raw = [];
      }
      if (!validate) return [raw, null];
      if (c.minItems !== undefined && raw.length < c.minItems) return [raw, `Pick at least ${c.minItems}`];
      if (c.maxItems !== undefined && raw.length > c.maxItems) return [raw, `Pick at most ${c.maxItems}`];
      return [raw, null];
    }
    default:
      return [undefined, null];
  }
}

function buildField(field, card) {
  const id = nextId("f");
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
    card.fields.push({ field, read: () => undefined, showError: () => {}, focus: () => {} });
    return wrap;
  }
  const describedBy = [help && `${id}-help`, `${id}-error`].filter(Boolean).join(" ");
  control.focus?.setAttribute("aria-describedby", describedBy);
  wrap.append(...[label, help, control.node, hint, error].filter(Boolean));
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

// --- cards ----------------------------------------------------------------------------------------

function toolLabel(view) {
  return view.requester.claimed_tool || view.tool_name || "A Tool";
}

function renderCard(view) {
  const template = document.getElementById("form-card");
  const node = template.content.firstElementChild.cloneNode(true);
  node.dataset.id = view.id;
  node.dataset.session = view.session_id;
  const card = { view, el: node, fields: [], busy: false };
  const r = view.requester;
  setText(node, ".provider-name", r.provider_display_name || r.provider_id || "Unknown provider");
  setText(node, ".provider-id", r.provider_display_name && r.provider_id ? `(${r.provider_id})` : "");
  setText(node, ".claimed-server", r.claimed_server || "unnamed");
  setText(node, ".claimed-tool", r.claimed_tool || "unnamed");
  setText(node, ".session", `Session ${view.session_id}${view.tool_name ? ` · called as ${view.tool_name}` : ""}`);
  const message = setText(node, ".message", view.message);
  message.hidden = !view.message;
  showRound(card);
  const list = node.querySelector(".field-list");
  for (const field of view.fields) list.append(buildField(field, card));
  const form = node.querySelector("form");
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    answer(card, "accept");
  });
  for (const button of node.querySelectorAll("button[data-action]")) {
    if (button.dataset.action !== "accept") button.addEventListener("click", () => answer(card, button.dataset.action));
  }
  state.cards.set(view.id, card);
  return card;
}

function placeCards() {
  const container = document.getElementById("forms");
  const sorted = [...state.cards.values()].sort((a, b) => (a.view.created_at || "").localeCompare(b.view.created_at || ""));
  for (const card of sorted) if (card.el.parentNode !== container || container.lastElementChild !== card.el) container.append(card.el);
  const count = state.cards.size;
  document.getElementById("empty").hidden = count > 0;
  document.getElementById("pending-count").textContent = `${count} waiting`;
  document.title = count ? `(${count}) Maka — forms waiting for you` : "Maka — forms waiting for you";
  tick();
}

function upsert(view) {
  if (view.state !== "pending") {
    settle(view, null);
    return;
  }
  if (state.cards.has(view.id)) {
    const card = state.cards.get(view.id);
    card.view = view; // keep the user's edits; refresh times and state
    showRound(card);
  } else {
    restoreDraft(renderCard(view));
  }
  placeCards();
}

function removeCard(id) {
  const card = state.cards.get(id);
  if (!card) return null;
  card.el.remove();
  state.cards.delete(id);
  clearDraft(id);
  placeCards();
  return card;
}

function notice(kind, title, text) {
  const box = document.getElementById("notices");
  const dismiss = el("button", { className: "notice-close", text: "×", attrs: { type: "button", "aria-label": "Dismiss this notice" } });
  const item = el("div", { className: `notice ${kind}`, attrs: { role: "status" } }, [
    el("strong", { className: "notice-title", text: title }),
    el("span", { className: "notice-text", text }),
    dismiss,
  ]);
  dismiss.addEventListener("click", () => item.remove());
  box.prepend(item);
  while (box.children.length > MAX_NOTICES) box.lastElementChild.remove();
  return item;
}

const OWN_ACTION_TEXT = {
  accept: "You submitted the form; the Tool continues.",
  decline: "You declined; the Tool was told.",
  cancel: "You dismissed the form; the Tool was told.",
};

// A form stopped being pending. `ownAction` is set when this tab's answer won. Every tab that showed
// the card follows its call to the end (completed, failed with its code, stopped), whichever surface
// answered it: the outcome comes from the broker's recent calls (pollStatus), never from the answer.
function settle(view, ownAction) {
  const card = removeCard(view.id);
  const title = toolLabel(card ? card.view : view);
  if (ownAction) {
    followCall(view.id, notice("own", title, OWN_ACTION_TEXT[ownAction] || "Answer sent."), "You answered; ");
  } else if (card) {
    const elsewhere = view.state === "answered";
    const reason = elsewhere ? "answered on another surface" : view.close_text || "closed";
    const item = notice(elsewhere ? "elsewhere" : "closed", title, `Closed: ${reason}.`);
    followCall(view.id, item, elsewhere ? "Answered on another surface; " : `Closed: ${reason}; `);
  }
}

// --- answering ------------------------------------------------------------------------------------

function collect(card, action) {
  // No prototype: a field may be named "__proto__" (or "constructor"), and its value must still be sent.
  const values = Object.create(null);
  let firstInvalid = null;
  for (const entry of card.fields) {
    const [value, error] = parseField(entry.field, entry.read(), action === "accept");
    if (action !== "accept") continue;
    entry.showError(error);
    if (error && !firstInvalid) firstInvalid = entry;
    if (value !== undefined && !error) values[entry.field.name] = value;
  }
  return { values, firstInvalid };
}

function formError(card, text) {
  const node = card.el.querySelector(".form-error");
  node.textContent = text || "";
  node.hidden = !text;
}

function setBusy(card, busy) {
  card.busy = busy;
  card.el.classList.toggle("busy", busy);
  for (const button of card.el.querySelectorAll("button[data-action]")) button.disabled = busy;
}

function fieldForPath(card, path) {
  for (const entry of card.fields) {
    const name = entry.field.name;
    const pointer = "/" + name.replaceAll("~", "~0").replaceAll("/", "~1");
    for (const candidate of [pointer, "/" + name]) {
      if (path === candidate || path.startsWith(candidate + "/")) return entry;
    }
  }
  return null;
}

async function answer(card, action) {
  if (card.busy) return;
  formError(card, "");
  let values = {};
  if (action === "accept") {
    const collected = collect(card, action);
    if (collected.firstInvalid) {
      formError(card, "Fix the highlighted fields to submit.");
      collected.firstInvalid.focus();
      return;
    }
    values = collected.values;
  } else {
    for (const entry of card.fields) entry.showError(null);
  }
  const id = card.view.id;
  setBusy(card, true);
  state.inFlight.add(id);
  let response;
  let body = null;
  try {
    response = await fetch(`/api/interactions/${encodeURIComponent(id)}/answer`, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-Maka-CSRF": state.csrf },
      body: JSON.stringify({ session_id: card.view.session_id, submission_id: newSubmissionId(), action, values }),
    });
    body = await response.json().catch(() => null);
  } catch {
    state.inFlight.delete(id);
    setBusy(card, false);
    formError(card, "Could not reach the Maka web surface. Check the connection and try again.");
    return;
  }
  state.inFlight.delete(id);
  if (response.ok && body && body.interaction) {
    if (body.server_time) updateSkew(body.server_time);
    settle(body.interaction, action);
    return;
  }
  setBusy(card, false);
  const error = (body && body.error) || { reason: `HTTP_${response.status}`, message: "", violations: [] };
  if (response.status === 409 || response.status === 404) {
    removeCard(id);
    const current = body && body.interaction;
    let text;
    if (error.reason === "ALREADY_SETTLED" || (current && current.state === "answered")) {
      text = "Already answered on another surface; your answer was not sent.";
    } else if (current && current.close_text) {
      text = `Closed: ${current.close_text}; your answer was not sent.`;
    } else {
      text = "This form is no longer pending; your answer was not sent.";
    }
    notice("elsewhere", toolLabel(card.view), text);
    return;
  }
  if (response.status === 422 || response.status === 400) {
    let unplaced = [];
    for (const violation of error.violations || []) {
      const entry = fieldForPath(card, violation.path);
      const text = violation.reason === "ANSWER_MISSING_REQUIRED" ? "Required" : violation.description || violation.reason;
      if (entry) entry.showError(text);
      else unplaced.push(text);
    }
    formError(card, ["The host did not accept these values.", ...unplaced].join(" "));
    return;
  }
  if (response.status === 401) {
    location.assign("/login");
    return;
  }
  formError(card, `The answer could not be delivered (${error.reason}). Try again.`);
}

// --- live updates ---------------------------------------------------------------------------------

function setConnection(kind, text) {
  const node = document.getElementById("connection");
  node.className = `connection ${kind}`;
  node.textContent = text;
}

function applySnapshot(pending) {
  const ids = new Set(pending.map((view) => view.id));
  for (const [id, card] of [...state.cards]) {
    if (ids.has(id) || state.inFlight.has(id)) continue;
    removeCard(id);
    followCall(id, notice("closed", toolLabel(card.view), "No longer pending."), "No longer pending; ");
  }
  for (const view of pending) upsert(view);
  placeCards();
  document.body.dataset.ready = "true";
}

function connect() {
  const source = new EventSource("/api/events");
  source.addEventListener("open", () => setConnection("live", "Live"));
  source.addEventListener("error", () => setConnection("connecting", "Reconnecting…"));
  source.addEventListener("snapshot", (event) => {
    const data = JSON.parse(event.data);
    updateSkew(data.server_time);
    applySnapshot(data.pending);
    setConnection("live", "Live");
  });
  for (const kind of ["opened", "answered", "closed"]) {
    source.addEventListener(kind, (event) => {
      const data = JSON.parse(event.data);
      updateSkew(data.server_time);
      const view = data.interaction;
      if (state.inFlight.has(view.id) && view.state !== "pending") return; // our POST reports the outcome
      if (view.state === "pending") upsert(view);
      else settle(view, null);
    });
  }
  // A committed answer that never reached the Tool (the call ended first) - docs/security.md.
  source.addEventListener("delivery", (event) => {
    const data = JSON.parse(event.data);
    const view = data.interaction;
    if (view.delivery !== "lost") return;
    notice(
      "closed",
      toolLabel(view),
      `Your answer was recorded but never reached the Tool: ${view.delivery_lost_text || "the call ended"} first (nothing was retried).`,
    );
  });
  source.addEventListener("disconnected", () => setConnection("connecting", "Host unreachable — retrying…"));
  source.addEventListener("failure", (event) => {
    const data = JSON.parse(event.data);
    setConnection("failed", `Disconnected (${data.reason})`);
  });
}

// --- OAuth sign-in prompts (Host-owned, like forms; docs/security.md "OAuth") ------------------
// The authorization URL is shown in full and opened only by the user's click: never automatically.

const SIGN_IN_POLL_MS = 2000;

function renderSignIns(items) {
  const root = document.getElementById("sign-ins");
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

async function pollSignIns() {
  try {
    const response = await fetch("/api/sign-ins", { credentials: "same-origin" });
    if (response.ok) renderSignIns((await response.json()).sign_ins || []);
  } catch {
    // the connection indicator already reports an unreachable surface
  }
}

async function start() {
  let response;
  try {
    response = await fetch("/api/session", { credentials: "same-origin" });
  } catch {
    setConnection("failed", "Cannot reach the web surface");
    return;
  }
  if (response.status === 401) {
    location.assign("/login");
    return;
  }
  const session = await response.json();
  state.csrf = session.csrf;
  updateSkew(session.server_time);
  connect();
  setInterval(tick, 1000);
  pollSignIns();
  setInterval(pollSignIns, SIGN_IN_POLL_MS);
  pollStatus();
  setInterval(pollStatus, STATUS_POLL_MS);
}

// --- drafts: what was typed survives a tab reload (sessionStorage: this tab only) -----------------
// Saved per form as the values of its inputs in DOM order (the same view renders the same DOM);
// cleared when the form leaves the page (submitted, declined, dismissed, closed elsewhere).

const DRAFT_PREFIX = "maka.draft.";

function draftInputs(card) {
  return [...card.el.querySelectorAll(".field-list input, .field-list select, .field-list textarea")].filter(
    (node) => node.type !== "search",
  );
}

function isToggle(node) {
  return node.type === "checkbox" || node.type === "radio";
}

function saveDraft(card) {
  const values = draftInputs(card).map((node) => (isToggle(node) ? node.checked : node.value));
  try {
    sessionStorage.setItem(DRAFT_PREFIX + card.view.id, JSON.stringify(values));
  } catch {
    // storage full or disabled: drafts are a convenience only
  }
}

function restoreDraft(card) {
  let values = null;
  try {
    values = JSON.parse(sessionStorage.getItem(DRAFT_PREFIX + card.view.id) || "null");
  } catch {
    values = null;
  }
  const inputs = draftInputs(card);
  if (Array.isArray(values) && values.length === inputs.length) {
    inputs.forEach((node, index) => {
      if (isToggle(node)) node.checked = values[index] === true;
      else if (typeof values[index] === "string") node.value = values[index];
    });
    card.el.dataset.draft = "restored";
  }
  for (const node of inputs) {
    node.addEventListener("input", () => saveDraft(card));
    node.addEventListener("change", () => saveDraft(card));
  }
  return card;
}

function clearDraft(id) {
  try {
    sessionStorage.removeItem(DRAFT_PREFIX + id);
  } catch {
    // nothing stored
  }
}

// --- status: MCP servers, recent calls, and each answered form's call followed to its end --------

const STATUS_POLL_MS = 2000;
const MAX_ACTIVITY = 10;
const FINAL_TEXT = {
  succeeded: "the Tool completed.",
  failed: "the Tool failed",
  lost: "the call was lost (its outcome is unknown).",
  stopped: "the call was stopped.",
};

function callOutcome(call) {
  if (call.state === "succeeded") return call.isError ? "the Tool completed and reported an error." : FINAL_TEXT.succeeded;
  if (call.state === "failed") return `${FINAL_TEXT.failed} (${call.failureCode || "FAILED"}).`;
  return FINAL_TEXT[call.state] || null;
}

// `prefix` starts the notice's text once the call ended ("You answered; the Tool completed.").
function followCall(interactionId, item, prefix) {
  item.dataset.interaction = interactionId;
  item.dataset.prefix = prefix;
  item.dataset.call = "running";
  state.following.set(interactionId, item);
}

function updateFollowed(calls) {
  for (const [interactionId, item] of [...state.following]) {
    if (!item.isConnected) {
      state.following.delete(interactionId); // dismissed, or pushed out by newer notices
      continue;
    }
    const call = calls.find((c) => c.interactionIds.includes(interactionId));
    if (!call) continue;
    const outcome = callOutcome(call);
    if (!outcome) continue;
    item.querySelector(".notice-text").textContent = `${item.dataset.prefix}${outcome}`;
    item.dataset.call = call.state;
    if (call.failureCode) item.dataset.failure = call.failureCode;
    state.following.delete(interactionId);
  }
}

function renderActivity(calls) {
  const section = document.getElementById("activity");
  const list = document.getElementById("activity-list");
  list.replaceChildren(
    ...calls.slice(0, MAX_ACTIVITY).map((call) => {
      const stateText = call.state === "failed" ? `failed · ${call.failureCode}` : call.state.replaceAll("_", " ");
      const item = el("li", { className: `call state-${call.state}` }, [
        el("span", { className: "call-tool", text: call.tool }),
        el("span", { className: "call-state", text: stateText }),
        el("span", { className: "call-session", text: `session ${call.sessionId}` }),
      ]);
      item.dataset.invocation = call.invocationId;
      item.dataset.state = call.state;
      return item;
    }),
  );
  section.hidden = calls.length === 0;
}

function renderServers(servers) {
  const section = document.getElementById("servers");
  const list = document.getElementById("server-list");
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

// How many surfaces (tabs, TUIs, scripts) are attached to the Host; `maka status` lists them.
function renderSurfaceCount(count) {
  const node = document.getElementById("surface-count");
  node.hidden = typeof count !== "number";
  if (node.hidden) return;
  node.dataset.count = String(count);
  node.textContent = `${pluralise(count, "surface")} attached`;
}

async function pollStatus() {
  let body;
  try {
    const response = await fetch("/api/status", { credentials: "same-origin" });
    if (!response.ok) return;
    body = await response.json();
  } catch {
    return;
  }
  if (!body.available) return;
  renderSurfaceCount(body.surfaces);
  renderServers(body.servers);
  renderActivity(body.calls);
  updateFollowed(body.calls);
}

start();
