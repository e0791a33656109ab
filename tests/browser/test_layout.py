"""Readable on any screen: at 1400 and 400 px wide nothing overflows its box unseen.

An element whose content is wider than it (scrollWidth > clientWidth) must scroll
(overflow-x auto or scroll); otherwise the excess is clipped or spills over its neighbours.
Screenshots land in screenshots/<page>-<width>.png for a person to look at.
"""
import pytest

from test_pages import SHOTS, browser, pages, server  # noqa: F401  (fixtures)

WIDTHS = [1400, 400]

OVERFLOWING = """() => {
  // MathJax's screen-reader copy of each formula is clipped to nothing on purpose; it would count
  // in every ancestor's scrollWidth, so it is left out of the measurement.
  const hide = document.createElement('style');
  hide.textContent = 'mjx-assistive-mml { display: none !important; }';
  document.head.append(hide);
  const bad = [];
  for (const e of document.querySelectorAll('.bd-article *, .bd-article')) {
    // inside a formula, MathJax positions glyph pieces itself (stretchy delimiters overhang their
    // boxes by a pixel or two by design); the formula's own box is checked like any element
    if (e.parentElement && e.parentElement.closest('mjx-container')) continue;
    // inside a drawing, the SVG places its own text (kvmath.present.svg's figures)
    if (e.parentElement && e.parentElement.closest('svg')) continue;
    if (!e.clientWidth || e.scrollWidth <= e.clientWidth + 1) continue;
    const style = getComputedStyle(e);
    if (style.display === 'none' || style.visibility === 'hidden') continue;
    if (['auto', 'scroll'].includes(style.overflowX)) continue;
    bad.push(`${e.tagName.toLowerCase()}#${e.id}.${[...e.classList].join('.')}: ` +
             `${e.scrollWidth} > ${e.clientWidth} (overflow-x ${style.overflowX})`);
  }
  const doc = document.documentElement;
  if (doc.scrollWidth > doc.clientWidth + 1) bad.push(`page: ${doc.scrollWidth} > ${doc.clientWidth}`);
  hide.remove();
  return bad;
}"""


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("page", pages())
def test_nothing_overflows_unseen(server, browser, page, width):  # noqa: F811
    ctx = browser.new_context(viewport={"width": width, "height": 900})
    tab = ctx.new_page()
    tab.goto(server + page, wait_until="load")
    if tab.evaluate("document.querySelectorAll('div.math, span.math').length") > 0:
        tab.wait_for_function("document.querySelectorAll('mjx-container').length > 0",
                              timeout=20000)
    tab.wait_for_timeout(300)
    bad = tab.evaluate(OVERFLOWING)
    SHOTS.mkdir(exist_ok=True)
    name = page.split("/")[-1].removesuffix(".html")
    tab.screenshot(path=str(SHOTS / f"{name}-{width}.png"), full_page=True)
    ctx.close()
    assert bad == [], f"{page} at {width} px: {bad[:5]}"


def test_decision_table_shows_every_tier_at_400(server, browser):  # noqa: F811
    """Every tier column of the decision table is in the page, reachable by scrolling the table
    (not the page), with the model column sticky."""
    ctx = browser.new_context(viewport={"width": 400, "height": 900})
    tab = ctx.new_page()
    tab.goto(server + "book/answer.html", wait_until="load")
    info = tab.evaluate("""() => {
      const t = [...document.querySelectorAll('.bd-article table')].find(
        t => t.textContent.includes('host-dram') && t.textContent.includes('rdma'));
      const first = t.querySelector('tr > *:first-child');
      return {cols: t.querySelectorAll('tr:first-child > *').length,
              sticky: getComputedStyle(first).position,
              overflow: getComputedStyle(t).overflowX,
              fits: t.getBoundingClientRect().right <= document.documentElement.clientWidth};
    }""")
    ctx.close()
    assert info["cols"] >= 5 and info["sticky"] == "sticky" and info["fits"]
    assert info["overflow"] in ("auto", "scroll")
