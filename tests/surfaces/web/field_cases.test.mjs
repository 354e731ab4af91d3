// The web page's field rules (surfaces/web/static/js/fields.js) against the shared field cases
// (tests/fixtures/form_field_cases.json), run by Node's test runner from tests/surfaces/web/test_field_cases.py.
// MAKA_FIELD_CASES names the cases with each field as the page receives it (`field`, from field_to_json).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { parseField } from "../../../surfaces/web/static/js/fields.js";

const cases = JSON.parse(readFileSync(process.env.MAKA_FIELD_CASES ?? "", "utf8"));

// What each widget of widgets.js holds before the user touches it.
function untouchedRaw(field) {
  const initial = field.default;
  switch (field.kind) {
    case "date-time":
      return initial === null ? "" : { exact: initial };
    case "number":
    case "integer":
      return initial === null ? "" : String(initial);
    case "multi_select":
      return initial;
    default:
      return initial === null ? "" : initial;
  }
}

// A boolean with no choice and a select with no option are "" in the page's widgets.
function typedRaw(testCase) {
  if (testCase.untouched) return untouchedRaw(testCase.field);
  const input = "browser_input" in testCase ? testCase.browser_input : testCase.input;
  if (input === null && ["boolean", "single_select"].includes(testCase.field.kind)) return "";
  return input;
}

for (const testCase of cases) {
  test(testCase.name, () => {
    const expect = testCase.browser_expect ?? testCase.expect;
    const [value, error] = parseField(testCase.field, typedRaw(testCase), true);
    if ("value" in expect) {
      assert.equal(error, null);
      assert.deepEqual(value, expect.value);
    } else if (expect.omitted) {
      assert.equal(error, null);
      assert.equal(value, undefined);
    } else {
      assert.notEqual(error, null, `refused (${expect.error})`);
      if (expect.error === "ANSWER_MISSING_REQUIRED") assert.equal(error, "Required");
    }
  });
}
