"""One PDF of the whole book, for attaching to a design review: `make pdf` (after `make book`).

Every page of the built site (`_build/html`, in the order of `_toc.yml`) is printed by the
system's Debian Chromium through Playwright, offline (the pages are served on localhost), with
MathJax typeset first; the pages are joined by pypdf behind a cover that names the version, git
commit and build date. Every page's footer carries the same stamp and its page number, counted
through the whole book (printed once over all pages, so "kvmath.pdf p. N" can be cited), and the
PDF has a bookmark per chapter with its sections beneath it.

    python scripts/build_pdf.py [--out _build/kvmath.pdf]

Exits 2 with one line when Chromium or the built site is missing.
"""
from __future__ import annotations

import argparse
import datetime as dt
import functools
import http.server
import io
import shutil
import sys
import threading
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "_build" / "html"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-quic"]
#: print styles: drop the site's navigation and let wide tables wrap on paper
PRINT_CSS = """
.bd-header, .bd-sidebar-primary, .bd-sidebar-secondary, .bd-footer, .bd-footer-content,
.header-article, .prev-next-area, .bd-header-article, .bd-search, #kvcalc-app button {
  display: none !important; }
.bd-main .bd-content .bd-article-container { max-width: 100% !important; }
table { font-size: 8pt !important; } td, th { white-space: normal !important; }
.table-wrapper, .pst-scrollable-table-container { overflow: visible !important; }
"""


def pages():
    """The built pages in reading order (the table of contents)."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]] + [c["file"] for c in toc["chapters"]]
    return [f"{f}.html" for f in files]


#: the page's headings as a reader sees them, in document order (Chromium's own outline titles
#: run words together across line breaks and repeat a heading's permalink text)
HEADINGS_JS = """Array.from(document.querySelectorAll('h1,h2,h3,h4,h5,h6'))
  .filter(h => h.getClientRects().length > 0)
  .map(h => h.innerText.replace(/[#\u00b6]/g, '').replace(/\\s+/g, ' ').trim())"""


def _bookmarks(pdf, headings):
    """(depth, title, page index) per bookmark of one printed page: Chromium's outline (its
    depth and pages), titled by the page's own headings where they pair one to one; the in-page
    table of contents ("Contents") is left out."""
    items = []

    def walk(nodes, depth):
        for node in nodes:
            if isinstance(node, list):
                walk(node, depth + 1)
            else:
                items.append((depth, node.title, pdf.get_destination_page_number(node)))
    walk(pdf.outline, 0)
    items = [(d, t, p) for d, t, p in items if t.strip() != "Contents"]
    headings = [h for h in headings if h != "Contents"]
    if len(headings) == len(items):
        items = [(d, h, p) for (d, _, p), h in zip(items, headings)]
    return [(d, " ".join(t.split()), p) for d, t, p in items]


def build(out: Path):
    from playwright.sync_api import sync_playwright
    from pypdf import PdfReader, PdfWriter

    sys.path.insert(0, str(ROOT))
    from kvmath.version import version_info

    v = version_info()
    stamp = (f"kvmath {v['version']}, commit {v['commit']} ({v['date']}), "
             f"built {dt.date.today().isoformat()}")
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(HTML))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}/"
    writer = PdfWriter()
    footer = (f"<div style='font-size:7px;width:100%;text-align:center;color:#555'>{stamp}"
              " &middot; page <span class='pageNumber'></span> of <span class='totalPages'>"
              "</span></div>")
    margin = {"top": "12mm", "bottom": "14mm", "left": "10mm", "right": "10mm"}
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
            tab = browser.new_page()
            tab.set_content(f"<html><body style='font-family:sans-serif;margin-top:30%;"
                            f"text-align:center'><h1>kvmath: reload or recompute the KV cache?"
                            f"</h1><p>{stamp}</p></body></html>")
            writer.append(PdfReader(io.BytesIO(tab.pdf(format="A4"))))
            for page in pages():
                tab.goto(base + page, wait_until="load")
                tab.add_style_tag(content=PRINT_CSS)
                if tab.evaluate("document.querySelectorAll('span.math, div.math').length"):
                    tab.wait_for_function("document.querySelectorAll('mjx-container').length > 0",
                                          timeout=30000)
                title = tab.evaluate("(document.querySelector('h1') || {}).textContent || ''")
                # the page's headings become its bookmarks (tagged: Chromium's outline needs
                # the structure tree): the chapter's title with its sections beneath
                pdf = PdfReader(io.BytesIO(tab.pdf(
                    format="A4", print_background=True, display_header_footer=True,
                    header_template="<div></div>", footer_template="<div></div>",
                    margin=margin, outline=True, tagged=True)))
                start = len(writer.pages)
                writer.append(pdf, import_outline=False)
                marks = _bookmarks(pdf, tab.evaluate(HEADINGS_JS))
                if not marks:  # a page without headings: one bookmark for it
                    marks = [(0, title.strip().rstrip("#").strip() or page, 0)]
                parents = {}
                for depth, text, at in marks:
                    parents[depth] = writer.add_outline_item(
                        title=text, page_number=start + at, parent=parents.get(depth - 1))
            # the footers, printed once over as many pages as the book has, so the page
            # numbers run through it, then laid over each page
            blank = "<div style='height:1px;break-after:page'></div>" * (len(writer.pages) - 1)
            tab.set_content(f"<html><body>{blank}<div style='height:1px'></div></body></html>")
            over = PdfReader(io.BytesIO(tab.pdf(format="A4", display_header_footer=True,
                                                header_template="<div></div>",
                                                footer_template=footer, margin=margin)))
            if len(over.pages) != len(writer.pages):
                raise RuntimeError(f"footer pages {len(over.pages)} != book pages "
                                   f"{len(writer.pages)}")
            for page, stamp_page in zip(writer.pages, over.pages):
                page.merge_page(stamp_page)
            browser.close()
    finally:
        httpd.shutdown()
    writer.add_metadata({"/Title": "kvmath", "/Subject": stamp})
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "wb") as fh:
        writer.write(fh)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(ROOT / "_build" / "kvmath.pdf"))
    args = p.parse_args(argv)
    if not Path(CHROMIUM).exists():
        print("build_pdf: error: Debian chromium is not installed (apt-get install chromium)",
              file=sys.stderr)
        return 2
    missing = [pg for pg in pages() if not (HTML / pg).is_file()]
    if missing:
        print(f"build_pdf: error: {HTML / missing[0]} is missing: run `make book` first",
              file=sys.stderr)
        return 2
    print(f"wrote {build(Path(args.out))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
