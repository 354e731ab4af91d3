// The web page's "who answered" text (surfaces/web/static/js/history.js whoText) against the shared cases
// (tests/fixtures/history_who_cases.json, which `maka history` also runs), by Node's test runner from
// tests/surfaces/web/test_history_who.py.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { whoText } from "../../../surfaces/web/static/js/history.js";

const { cases } = JSON.parse(readFileSync(new URL("../../fixtures/history_who_cases.json", import.meta.url), "utf8"));

for (const testCase of cases) {
  test(testCase.name, () => {
    assert.equal(whoText({ answered_by: testCase.answered_by }), `by ${testCase.expect}`);
  });
}

test("nobody answered a closed form", () => {
  assert.equal(whoText({ answered_by: null }), "nobody answered");
});
