// Modules that exist only at build time: build.mjs hands the layout worker's bundle to the app as this module's text.
declare module "uopviz:worker-source" {
  const source: string;
  export default source;
}
