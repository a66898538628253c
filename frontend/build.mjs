// Builds the UI into backend/ui (package data of the installed backend; or the directory given as the first
// argument): app.js (the one ES module the
// web page, the notebook widget and static exports load; the layout worker is inside it), app.css, index.html,
// and loader.js (the classic script that starts a static export's view).
// The output depends on the sources only: no timestamps, no source maps, no absolute paths,
// so tests/frontend/test_bundle.py can compare a fresh build with the committed one byte for byte.
import { build } from "esbuild";
import { copyFile, mkdir } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = resolve(process.argv[2] ?? join(here, "..", "backend", "ui"));
// tsconfigRaw: the build ignores tsconfig.json, which is the type checker's (its strict would add "use strict").
/** @type {import("esbuild").BuildOptions} */
const common = { bundle: true, minify: true, legalComments: "eof", target: "es2020", logLevel: "warning", absWorkingDir: here, tsconfigRaw: {} };

// The worker's bundle, made first and handed to the app as the text of the module "uopviz:worker-source".
const worker = await build({ ...common, entryPoints: ["src/worker.js"], format: "iife", write: false });
/** @type {import("esbuild").Plugin} */
const workerSource = {
  name: "worker-source",
  setup(b) {
    b.onResolve({ filter: /^uopviz:worker-source$/ }, (args) => ({ path: args.path, namespace: "worker-source" }));
    b.onLoad({ filter: /.*/, namespace: "worker-source" }, () => ({ contents: /** @type {import("esbuild").OutputFile[]} */ (worker.outputFiles)[0].text, loader: "text" }));
  },
};

await mkdir(out, { recursive: true });
await Promise.all([
  build({ ...common, entryPoints: ["src/main.js"], format: "esm", outfile: join(out, "app.js"), plugins: [workerSource] }),
  build({ ...common, entryPoints: ["src/loader.js"], format: "iife", outfile: join(out, "loader.js") }),
  build({ ...common, entryPoints: ["src/style.css"], outfile: join(out, "app.css") }),
  copyFile(join(here, "src/index.html"), join(out, "index.html")),
]);
