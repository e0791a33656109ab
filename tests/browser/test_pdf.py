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
