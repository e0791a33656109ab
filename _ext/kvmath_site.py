"""Local Sphinx extension for the book's site: the version footer and the calculator's files.

* ``config-inited``: every page's footer shows the kvmath version, git commit and build date
  (``html_theme_options['extra_footer']``, a sphinx-book-theme option).
* ``config-inited``: empties the execution cache unless it was executed from the inputs as they
  are now (``book_inputs``), so the chapters are executed again rather than shown stale.
* ``setup``: a rarer cyclic garbage collection for the build process (speed only).
* ``html-page-context``: each script once per page. sphinx-thebe and sphinx-togglebutton add
  their inline configuration on every ``env-before-read-docs``, which a jupyter-book build
  emits more than once, so every page declared ``const THEBE_JS_URL`` twice and threw.
* ``doctree-resolved``: a figure's image without alt text of its own is described by the
  figure's caption (a glued matplotlib figure otherwise reads as its file's hash to a screen
  reader; tests/browser/test_pages.py fails on an image without a describing alt text).
* ``builder-inited``: writes the calculator's generated JavaScript (formulas from the SymPy
  expressions, data from the bundled tables; :mod:`kvmath.present.calculator`) into a build-time static
  folder and adds it to the pages, so no formula or number is typed into JavaScript.
"""
from __future__ import annotations

import datetime
import gc
import html
import shutil
from pathlib import Path

from kvmath.version import version_info


def _footer(app, config):
    v = version_info()
    built = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    text = (f'<p class="kvmath-version">kvmath {html.escape(v["version"])} · commit '
            f'<code>{html.escape(v["commit"])}</code> ({html.escape(v["date"])}) · built '
            f'{built}</p>')
    opts = dict(config.html_theme_options or {})
    opts["extra_footer"] = opts.get("extra_footer", "") + text
    config.html_theme_options = opts


def _fresh_cache(app, config):
    from book_inputs import cache_is_current

    cache = Path(app.outdir).parent / ".jupyter_cache"
    if cache.exists() and not cache_is_current(cache):
        shutil.rmtree(cache)
        shutil.rmtree(app.doctreedir, ignore_errors=True)  # pages parsed from those outputs too


def _calculator_files(app):
    from kvmath.present.calculator import write_static

    out = Path(app.outdir).parent / "kvcalc_static"
    names = write_static(out)
    # the hand-written user interface (no formula, no number) runs after the generated files
    shutil.copy(Path(__file__).with_name("kvcalc.js"), out / "kvcalc.js")
    names.append("kvcalc.js")
    app.config.html_static_path.append(str(out))
    for name in names:
        app.add_js_file(name, defer="defer")


def _figure_alts(app, doctree, docname):
    from docutils import nodes

    for figure in doctree.findall(nodes.figure):
        captions = list(figure.findall(nodes.caption))
        if not captions:
            continue
        words = " ".join(captions[0].astext().split())
        for image in figure.findall(nodes.image):
            alt = image.get("alt", "")
            if not alt or alt == image.get("uri") or "_images/" in alt or len(alt.split()) < 3:
                image["alt"] = words


def _script_key(js):
    attributes = getattr(js, "attributes", {}) or {}
    # an inline script is added with filename None once and "" once: both mean no file
    return (getattr(js, "filename", str(js)) or None, tuple(sorted(map(str, attributes.items()))))


def _scripts_once(app, pagename, templatename, context, doctree):
    seen, kept = set(), []
    for js in context.get("script_files", []):
        key = _script_key(js)
        if key not in seen:
            seen.add(key)
            kept.append(js)
    # in place: it is the builder's own list, to which later handlers (MathJax) still add
    context.get("script_files", [])[:] = kept


def setup(app):
    # The build makes millions of docutils nodes that live to the end: a rarer cyclic GC saves a
    # fifth of its time (it changes no output; the process ends with the build).
    gc.freeze()
    gc.set_threshold(200_000, 50, 50)
    app.connect("config-inited", _footer)
    app.connect("config-inited", _fresh_cache)
    app.connect("builder-inited", _calculator_files)
    app.connect("doctree-resolved", _figure_alts)
    # early: html-page-context stops at the first handler that returns a template
    app.connect("html-page-context", _scripts_once, priority=100)
    # _static/kvmath.css is added to every page by jupyter-book (it adds each CSS file there)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
