// The page's untrusted-text rule (surfaces/web/static/js/untrusted.js) against the shared cases
// (tests/fixtures/untrusted_text_cases.json), run by Node's test runner from tests/surfaces/web/test_untrusted_text.py.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { displayText, shownText } from "../../../surfaces/web/static/js/untrusted.js";

const { cases } = JSON.parse(readFileSync(new URL("../../fixtures/untrusted_text_cases.json", import.meta.url), "utf8"));

for (const testCase of cases) {
  test(testCase.name, () => {
    const shown = shownText(testCase.input, { multiline: testCase.multiline });
    assert.equal(shown.text, testCase.expect);
    assert.equal(shown.altered, testCase.altered);
    assert.equal(displayText(shown.text, { multiline: testCase.multiline }), shown.text);
  });
}
