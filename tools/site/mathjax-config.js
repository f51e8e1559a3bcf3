// MathJax 2 (vendored from the jupyter-server-mathjax wheel by tools/build_site.py) typesets
// the \( ... \) and \[ ... \] that pymdownx.arithmatex wraps in elements of class "arithmatex".
// The wheel is the MathJax that the Jupyter notebook served: the combined configuration
// TeX-AMS-MML_HTMLorMML-full (loaded by mkdocs.yml's script URL, it holds the TeX input and the
// HTML-CSS output code) and the STIX-Web web fonts, which the settings below choose, as the
// notebook did.
window.MathJax = {
  tex2jax: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: false,
    processEnvironments: false,
    ignoreClass: ".*",
    processClass: "arithmatex",
  },
  "HTML-CSS": { availableFonts: [], preferredFont: null, webFont: "STIX-Web", imageFont: null },
  showMathMenu: false,
};
