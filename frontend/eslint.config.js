// ESLint (flat config): @eslint/js's recommended rules over the UI's sources, the build script and the unit tests,
// each with the globals of where it runs. `npm run lint` fails on any warning.
import js from "@eslint/js";
import globals from "globals";

export default [
  { ignores: ["node_modules/"] },
  js.configs.recommended,
  { linterOptions: { reportUnusedDisableDirectives: "error" } },
  // the app runs in the page (and a notebook's output), the layout worker in a Web Worker
  { files: ["src/**/*.js"], ignores: ["src/worker.js"], languageOptions: { globals: { ...globals.browser } } },
  { files: ["src/worker.js"], languageOptions: { globals: { ...globals.worker } } },
  // the build script and the unit tests run in Node; the tests of DOM code get happy-dom's document (test/dom-env.js)
  { files: ["*.js", "*.mjs", "test/**/*.js"], languageOptions: { globals: { ...globals.node } } },
  { files: ["test/**/*.js"], languageOptions: { globals: { document: "readonly", Node: "readonly" } } },
];
