// A DOM for the tests of modules that build elements: happy-dom's window, its document and Node as globals (what
// src/dom.js reads), closed after the file's tests.
import { after } from "node:test";
import { Window } from "happy-dom";

const window = new Window({ url: "http://127.0.0.1/" });
Object.assign(globalThis, { document: window.document, Node: window.Node });
after(() => window.happyDOM.close());
export { window };
