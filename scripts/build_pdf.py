"""One PDF of the whole book, for attaching to a design review: `make pdf` (after `make book`).

Every page of the built site (`_build/html`, in the order of `_toc.yml`) is printed by the
system's Debian Chromium through Playwright, offline (the pages are served on localhost), with
MathJax typeset first; the pages are joined by pypdf behind a cover that names the version, git
commit and build date, and every page's footer carries the same stamp.

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
              " &middot; page <span class='pageNumber'></span></div>")
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
                pdf = tab.pdf(format="A4", print_background=True, display_header_footer=True,
                              header_template="<div></div>", footer_template=footer,
                              margin={"top": "12mm", "bottom": "14mm", "left": "10mm",
                                      "right": "10mm"})
                writer.append(PdfReader(io.BytesIO(pdf)))
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
