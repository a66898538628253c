import assert from "node:assert/strict";
import { test } from "node:test";
import { columnWidths } from "../src/columns.js";

test("columnWidths: a wide page keeps the stylesheet's; a narrow view keeps 40% of its width for the graph", () => {
  assert.equal(columnWidths(1600), null);
  assert.equal(columnWidths(0), null); // not laid out yet
  assert.deepEqual(columnWidths(1280), { side: 218, panel: 384 });
  for (const width of [534, 700, 900]) {
    const { side, panel } = /** @type {{side: number, panel: number}} */ (columnWidths(width));
    assert.ok(width - side - panel >= 0.4 * width - 1, `${width}: ${side} + ${panel}`);
  }
});
