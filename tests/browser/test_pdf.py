"""The one-PDF book (`make pdf`): every chapter is in it, stamped with version and commit."""
import re
import shutil
import unicodedata
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PDF = ROOT / "_build" / "kvmath.pdf"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium not installed")


def chapter_titles():
    """Each chapter's H1 title, from its source (the bibliography page from its file)."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    titles = []
    for f in [toc["root"]] + [c["file"] for c in toc["chapters"]]:
        name = Path(f).name
        src = ROOT / "chapters" / f"{name}.md"
        src = src if src.exists() else ROOT / "book" / f"{name}.md"
        titles.append(re.search(r"^# (.+)$", src.read_text(), flags=re.M).group(1).strip())
    return titles


def test_pdf_has_every_chapter_and_its_stamp():
    from pypdf import PdfReader

    from kvmath.version import version_info

    assert PDF.is_file(), "no _build/kvmath.pdf: run `make pdf`"
    reader = PdfReader(str(PDF))
    text = " ".join((p.extract_text() or "") for p in reader.pages)
    flat = re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text))  # ligatures: "ﬂ" -> "fl"
    for title in chapter_titles():
        words = re.sub(r"\s+", " ", title.split(":")[0]).strip()
        assert words in flat, f"chapter {title!r} missing from the PDF"
    v = version_info()
    assert f"commit {v['commit']}" in flat and f"kvmath {v['version']}" in flat


def test_pdf_pages_are_numbered_through_and_bookmarked():
    """issue 19: page numbers restarted at 1 in every chapter and there were no bookmarks, so
    "kvmath.pdf p. N" could not be cited. Every footer counts through the whole book, and every
    chapter has a bookmark on its first page with its sections beneath it."""
    from pypdf import PdfReader

    reader = PdfReader(str(PDF))
    n = len(reader.pages)
    for i in (0, n // 2, n - 1):
        text = re.sub(r"\s+", " ", reader.pages[i].extract_text() or "")
        assert f"page {i + 1} of {n}" in text, (i, text[-200:])
    top, children = [], 0

    def walk(nodes, depth):
        nonlocal children
        for node in nodes:
            if isinstance(node, list):
                walk(node, depth + 1)
            elif depth == 0:
                top.append((node.title, reader.get_destination_page_number(node)))
            else:
                children += 1
    walk(reader.outline, 0)
    titles = [t for t, _ in top]
    for title in chapter_titles():
        assert any(t.startswith(title.split(":")[0]) for t in titles), (title, titles)
    assert [p for _, p in top] == sorted(p for _, p in top)  # in reading order
    assert children >= 3 * len(top)  # sections beneath the chapters


def test_pdf_carries_the_figures():
    """issue 36: the PDF reads as a document with its figures: the drawn ones (SVG, whose words
    are text in the PDF too) and every raster image of the built pages."""
    from pypdf import PdfReader

    reader = PdfReader(str(PDF))
    text = re.sub(r"\s+", " ", " ".join((p.extract_text() or "") for p in reader.pages))
    # the answer page's figure and the worked example's, by the words drawn in them
    assert "prompt length (tokens, log scale)" in text
    assert "where the reload's time goes" in text

    html = ROOT / "_build" / "html"
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    want = 0
    for f in [toc["root"]] + [c["file"] for c in toc["chapters"]]:
        page = (html / f"{f}.html").read_text(encoding="utf-8")
        article = re.search(r"<article[^>]*bd-article.*?</article>", page, flags=re.S)
        want += len(re.findall(r"<img\b", article.group(0) if article else ""))
    have = sum(len(p.images) for p in reader.pages)
    assert have >= want, (have, want)
