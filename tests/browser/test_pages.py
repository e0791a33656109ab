"""Open every built page in headless Debian chromium: math typeset, images loaded, links whole.

Runs after `make book` (make test does both). Skipped when /usr/bin/chromium is absent
(.ci/run installs it). Screenshots land in screenshots/ (ignored by git) for a person to look at.
"""
import functools
import http.server
import shutil
import threading
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urldefrag, urljoin, urlparse

import pytest

ROOT = Path(__file__).resolve().parents[2]
HTML = ROOT / "_build" / "html"
SHOTS = ROOT / "screenshots"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-quic"]

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium not installed")


def pages():
    if not HTML.is_dir():
        return []
    return sorted(p.relative_to(HTML).as_posix() for p in (HTML / "book").glob("*.html"))


class _Anchors(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.hrefs = set(), []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "a" and a.get("href"):
            self.hrefs.append(a["href"])


@functools.lru_cache(maxsize=None)
def parse(path):
    p = _Anchors()
    p.feed(Path(path).read_text(encoding="utf-8"))
    return p


@pytest.fixture(scope="module")
def server():
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(HTML))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        yield b
        b.close()


def test_book_was_built():
    assert pages(), "no pages in _build/html/book: run `make book` first"


@pytest.mark.parametrize("page", pages())
def test_page_renders(server, browser, page):
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = ctx.new_page()
    external = []
    tab.on("request", lambda r: external.append(r.url)
           if not r.url.startswith((server, "data:", "blob:")) else None)
    errors = []
    # any script error fails the page (sphinx-thebe's configuration had been included twice,
    # redeclaring THEBE_JS_URL on every page; the book's extension now keeps each script once)
    tab.on("pageerror", lambda e: errors.append(str(e)))
    tab.goto(server + page, wait_until="load")
    has_math = tab.evaluate("document.querySelectorAll('.math, div.math, span.math').length") > 0
    if has_math:
        tab.wait_for_function("document.querySelectorAll('mjx-container').length > 0",
                              timeout=20000)
        unrendered = tab.evaluate(
            "[...document.querySelectorAll('span.math, div.math')]"
            ".filter(e => !e.querySelector('mjx-container')).length")
        assert unrendered == 0, f"{page}: {unrendered} math elements not typeset"
    broken = tab.evaluate(
        "[...document.images].filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src)")
    assert broken == [], f"{page}: images not loaded: {broken}"
    assert external == [], f"{page}: requests left the machine: {external[:5]}"
    assert errors == [], f"{page}: script errors: {errors}"
    SHOTS.mkdir(exist_ok=True)
    tab.screenshot(path=str(SHOTS / (Path(page).stem + ".png")), full_page=True)
    ctx.close()


@pytest.mark.parametrize("page", pages())
def test_internal_links_resolve(page):
    src = HTML / page
    for href in parse(src).hrefs:
        url = urlparse(href)
        if url.scheme or href.startswith("mailto:"):
            continue
        target, frag = urldefrag(urljoin(page, href))
        path = HTML / unquote(target) if target else src
        if path.is_dir():
            path = path / "index.html"
        assert path.exists(), f"{page}: broken link {href}"
        if frag and path.suffix == ".html":
            assert frag in parse(path).ids, f"{page}: missing anchor {href}"
