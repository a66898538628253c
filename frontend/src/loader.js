// The loader of a static view (dist/loader.js): a classic script placed last in the view's box, which also holds
// the bundle (script.uopviz-bundle, text), the answers (script.uopviz-data) and the view to open
// (script.uopviz-view, JSON). It imports the bundle from a Blob URL, so one HTML file (or a notebook's saved
// output) holds everything, and several views on one page each load their own.
//
// It draws once the view is first on screen: a live widget's fallback in a notebook stays hidden (in JupyterLab the
// stylesheet shows it only where the widget failed; elsewhere the live widget hides it, or it hides itself), and a
// notebook of many views draws those scrolled to.
((/** @type {HTMLScriptElement} */ script) => {
  const box = /** @type {HTMLElement} */ (script.parentElement);
  const seen = new IntersectionObserver((entries) => {
    if (!entries.some((e) => e.isIntersecting)) return;
    seen.disconnect();
    // a widget's fallback whose widget is live on this page (VS Code shows both outputs): the widget is the view
    const widget = box.dataset.widget;
    if (widget && [.../** @type {NodeListOf<HTMLElement>} */ (document.querySelectorAll(".uv-widget[data-widget]"))].some((w) => w.dataset.widget === widget)) box.style.display = "none";
    else draw(box);
  });
  seen.observe(box);
})(/** @type {HTMLScriptElement} */ (document.currentScript)); // a classic script, run as it is parsed

/** @param {HTMLElement} box */
async function draw(box) {
  const root = /** @type {HTMLElement} */ (box.querySelector(".uopviz-root"));
  /** @param {string} cls */
  const text = (cls) => /** @type {HTMLScriptElement} */ (box.querySelector(`script.${cls}`)).textContent;
  const url = URL.createObjectURL(new Blob([text("uopviz-bundle")], { type: "text/javascript" }));
  try {
    const { mount, staticSource } = await import(url);
    // A page of its own (`uopviz export`, Trace.to_html) keeps its view in the URL, as the served page does, so a
    // link (or a reload) opens the same node, step and search; a view in a notebook leaves the URL alone.
    const page = box.parentElement?.classList.contains("uv-page") ?? false;
    mount(root, await staticSource(text("uopviz-data")), { hash: page, readOnly: true, initial: JSON.parse(text("uopviz-view")) });
  } catch (err) {
    root.textContent = `uopviz: this page cannot show the trace (${err.message}).`;
  } finally {
    URL.revokeObjectURL(url);
  }
}
