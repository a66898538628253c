// Builds the UI into frontend/dist (or the directory given as the first argument).
// The output depends on the sources only: no timestamps, no source maps, no absolute paths,
// so tests/frontend/test_bundle.py can compare a fresh build with the committed one byte for byte.
import { build } from "esbuild";
import { copyFile, mkdir } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = resolve(process.argv[2] ?? join(here, "dist"));
const common = { bundle: true, minify: true, legalComments: "eof", target: "es2020", logLevel: "warning", absWorkingDir: here };

await mkdir(out, { recursive: true });
await Promise.all([
  // app.js is an ES module exporting mount() and the data sources, so a Jupyter widget can import it too.
  build({ ...common, entryPoints: ["src/main.js"], format: "esm", outfile: join(out, "app.js") }),
  build({ ...common, entryPoints: ["src/worker.js"], format: "iife", outfile: join(out, "worker.js") }),
  build({ ...common, entryPoints: ["src/style.css"], outfile: join(out, "app.css") }),
  copyFile(join(here, "src/index.html"), join(out, "index.html")),
]);
