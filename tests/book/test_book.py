"""The book's own rules: sources and notebooks in sync, stored outputs, no hand-typed numbers."""
import re
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from refresh_notebooks import notebook_from_source  # noqa: E402

TOC = yaml.safe_load((ROOT / "_toc.yml").read_text())
#: pages that are not chapters (no MyST source, no code): the bibliography is a plain page
NOT_CHAPTERS = {"bibliography"}
CHAPTERS = [name for name in [Path(TOC["root"]).name] + [Path(c["file"]).name for c in TOC["chapters"]]
            if name not in NOT_CHAPTERS]

# Numbers that are names or definitions, not results: "Eq. 2" of a paper, the SI definition.
ALLOWED = ["Eq. 1", "Eq. 2", "1 GB = 10⁹", "1 GB/s = 10⁹", "2:4 structured"]


def source(name):
    return ROOT / "chapters" / f"{name}.md"


def stored(name):
    return nbformat.read(ROOT / "book" / f"{name}.ipynb", as_version=4)


def test_every_chapter_has_source_and_notebook():
    for name in CHAPTERS:
        assert source(name).is_file(), name
        assert (ROOT / "book" / f"{name}.ipynb").is_file(), name
    for md in (ROOT / "book").glob("*.md"):
        assert md.stem in NOT_CHAPTERS, f"{md.name}: chapters are notebooks made from chapters/"
        assert not md.with_suffix(".ipynb").exists(), "a .md beside an .ipynb breaks the build"


@pytest.mark.parametrize("name", CHAPTERS)
def test_notebook_matches_its_source(name):
    """A notebook edited by hand, or a source changed without `make refresh-notebooks`, fails."""
    want = notebook_from_source(source(name))
    have = stored(name)
    assert [(c.cell_type, c.source) for c in want.cells] == \
           [(c.cell_type, c.source) for c in have.cells]
    assert [c.metadata.get("tags", []) for c in want.cells] == \
           [c.metadata.get("tags", []) for c in have.cells]


@pytest.mark.parametrize("name", CHAPTERS)
def test_notebook_carries_outputs(name):
    """Strict nbval compares only stored outputs: a cleared notebook would pass silently."""
    code = [c for c in stored(name).cells if c.cell_type == "code"]
    assert code and all(c.execution_count is not None for c in code), "not executed"
    with_outputs = [c for c in code if c.outputs]
    assert len(with_outputs) >= len(code) // 2, "most code cells have no stored output"
    for c in code:
        for out in c.outputs:
            assert out.output_type != "error", f"stored error in {name}"
            assert out.output_type != "stream" or out.name != "stderr", f"stderr in {name}"


def test_figure_cells_skip_output_comparison():
    """Glued figures embed PNG bytes that vary with the matplotlib version."""
    for name in CHAPTERS:
        for c in stored(name).cells:
            if c.cell_type == "code" and "plt.subplots" in c.source:
                assert "nbval-ignore-output" in c.metadata.get("tags", []), name


def prose(text):
    """The markdown a reader sees as prose: no code cells, math, roles, literals or options."""
    text = re.sub(r"^---\n.*?\n---\n", "", text, flags=re.S)
    text = re.sub(r"```\{code-cell\}.*?```", "", text, flags=re.S)
    text = re.sub(r"^:[a-z-]+:.*$", "", text, flags=re.M)  # directive options
    text = re.sub(r"\$\$.*?\$\$", "", text, flags=re.S)
    text = re.sub(r"\$[^$\n]+\$", "", text)
    text = re.sub(r"\{[a-z:]+\}`[^`]*`", "", text)  # roles: glue, ref, numref
    text = re.sub(r"`[^`]*`", "", text)
    text = re.sub(r"^\([^)]*\)=$", "", text, flags=re.M)  # targets
    text = re.sub(r"\]\([^)]*\)", "]", text)  # link targets
    text = re.sub(r"^\s*\d+\.\s", "", text, flags=re.M)  # ordered-list markers
    for phrase in ALLOWED:
        text = text.replace(phrase, "")
    return text


NUMBER = re.compile(r"(?<![\w.\-/'’])\d+(?:[.,]\d+)*(?![\w\-])")


@pytest.mark.parametrize("name", CHAPTERS)
def test_no_hand_typed_number_in_prose(name):
    found = NUMBER.findall(prose(source(name).read_text()))
    assert found == [], f"{name}: numbers in prose must be glued: {found}"


def test_prose_checker_can_fail():
    assert NUMBER.findall(prose("reload takes 196 ms, {glue:text}`x:.3g` else")) == ["196"]
    assert NUMBER.findall(prose("Llama-3.1-70B on PCIe Gen5 x16, Eq. 2")) == []


@pytest.mark.parametrize("name", CHAPTERS)
def test_glue_roles_are_well_formed(name):
    text = source(name).read_text()
    for role in re.findall(r"\{glue:[a-z]*\}`([^`]*)`", text):
        assert "}" not in role and "{" not in role, f"{name}: malformed glue role {role!r}"
    # issue 36: a role inside a code literal is not parsed, and shows raw ("`--engine
    # {glue:text}`x``" read "{glue:text}x" on the page)
    prose_text = re.sub(r"```\{code-cell\}.*?```", "", text, flags=re.S)
    assert not re.search(r"``?[^`\n]*\{glue:[a-z]*\}`[^`\n]+``", prose_text), \
        f"{name}: a glue role inside a code literal renders raw"


@pytest.mark.parametrize("name", CHAPTERS)
def test_chapter_shape(name):
    text = source(name).read_text()
    assert re.search(r"^\(chap-[a-z-]+\)=\n# ", text, flags=re.M), "chapter needs a stable label"
    assert ":class: tip" in text.split("\n## ")[0], "chapter must open with its takeaway"
    assert "## Exercises" in text and ":class: dropdown" in text.split("## Exercises")[1]


@pytest.mark.parametrize("name", CHAPTERS)
def test_figures_captioned_named_and_referenced(name):
    text = source(name).read_text()
    for key, body in re.findall(r"```\{glue:figure\} (\S+)\n(.*?)```", text, flags=re.S):
        label = re.search(r":name: (\S+)", body)
        assert label, f"{name}: figure {key} has no :name:"
        caption = body.split(label.group(0))[1].strip()
        assert caption, f"{name}: figure {key} has no caption"
        assert f"{{numref}}`{label.group(1)}`" in text, f"{name}: figure {key} never referenced"


@pytest.mark.parametrize("name", CHAPTERS)
def test_chapter_imports_only_the_facade(name):
    """Chapters stand on kvmath.book alone (issue 19): the package can move beneath them."""
    text = source(name).read_text()
    imports = re.findall(r"^\s*(?:from|import) (kvmath[\w.]*)", text, re.M)
    assert imports and set(imports) == {"kvmath.book"}, sorted(set(imports))


def test_facade_holds_what_the_chapters_use():
    """Every name of kvmath.book is used by some chapter (a facade that only grows is no facade)."""
    import ast
    import kvmath.book as facade
    tree = ast.parse(Path(facade.__file__).read_text())
    names = {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
    used = set()
    for name in CHAPTERS:
        for body in re.findall(r"^from kvmath\.book import (\([^)]*\)|[^\n]+)", source(name).read_text(), re.M):
            used.update(p.split(" as ")[0].strip() for p in body.strip("()").replace("\n", " ").split(",")
                        if p.strip())
    assert names == used, (names - used, used - names)


#: words that state a computed result (a verdict, where it flips, a break-even, a limit): a
#: takeaway sentence holding one glues its numbers or is checked by the chapter's code (a rule
#: of the physics, "no faster than its drives", is the derivation's, not a result)
CLAIM = re.compile(r"\b(wins?|won|loses?|beats?|flips?|outgrows?|break-even|crosses|"
                   r"crossings?)\b", flags=re.I)


def takeaway(text):
    """(the takeaway's text, the chapter's source before it)."""
    start = text.index("```{admonition} Takeaway")
    end = text.index("\n```", start + 3)
    return text[start:end], text[:start]


def claims(text):
    """The takeaway's sentences that state a computed fact without gluing a number."""
    body = re.sub(r"^:class:.*$|^```\{admonition\} Takeaway$", "", text, flags=re.M)
    sentences = re.split(r"(?<=[.!?])\s+(?=[A-Z{])", " ".join(body.split()))
    return [s for s in sentences if CLAIM.search(prose(s)) and "{glue:" not in s]


@pytest.mark.parametrize("name", CHAPTERS)
def test_takeaway_states_no_computed_fact_unglued_or_unchecked(name):
    """issue 36: a takeaway had come to contradict its numbers. Every value a takeaway glues is
    computed in the chapter's code, and a takeaway sentence that states a result (a verdict,
    where it flips, a break-even) without gluing its number is checked: an assert in a code
    cell before the takeaway (the chapter's "takeaway's claims, checked")."""
    text = source(name).read_text()
    box, before = takeaway(text)
    code = "\n".join(re.findall(r"```\{code-cell\}.*?```", before, flags=re.S))
    every = "\n".join(re.findall(r"```\{code-cell\}.*?```", text, flags=re.S))
    for key in re.findall(r"\{glue:text\}`([^`:]+)", box):
        assert re.search(rf"glue\(\s*[\"']{re.escape(key)}[\"']|glue\(\s*f[\"']", every), \
            f"{name}: the takeaway glues {key!r}, which no code of the chapter computes"
    unchecked = claims(box)
    if unchecked:
        assert re.search(r"^\s*assert ", code, flags=re.M), \
            f"{name}: the takeaway states {unchecked[0]!r} with no assert before it"


def test_takeaway_check_can_fail():
    assert claims("```{admonition} Takeaway\n:class: tip\nReload wins by far. Nothing else.")
    assert not claims("```{admonition} Takeaway\n:class: tip\nReload wins by "
                      "{glue:text}`x:.3g`×. The tables say where.")


@pytest.mark.parametrize("name", CHAPTERS)
def test_every_role_is_glued(name):
    """Issue 34 item 7: a chapter's prose never shows a raw role: every {glue:...} role carries a
    backticked name, and every name a role or a glue directive reads is glued by the chapter's
    own code in the stored notebook (a misspelt or removed name would print the role itself)."""
    prose = re.sub(r"```.*?```", "", source(name).read_text(), flags=re.S)
    glued = {out.metadata["scrapbook"]["name"] for c in stored(name).cells
             if c.cell_type == "code" for out in c.outputs
             if "scrapbook" in out.get("metadata", {})}
    raw = [m.group(0) for m in re.finditer(r"\{glue(?::[a-z]+)?\}(?!`)", prose)]
    assert not raw, f"{name}: roles without a name: {raw[:3]}"
    names = {m.group(1).split(":")[0] for m in re.finditer(r"\{glue(?::[a-z]+)?\}`([^`]+)`", prose)}
    names |= set(re.findall(r"```\{glue(?::[a-z]+)?\}\s+(\S+)", source(name).read_text()))
    assert names <= glued, f"{name}: not glued: {sorted(names - glued)[:5]}"
