"""The chapters as a site (tools/build_site.py, `make docs`): build it into a temporary
directory, then check what a reader would hit — every relative link and asset in the HTML
resolves to a built file, every linked source file is a rendered page (not a download), each
chapter's exercises are numbered 1, 2, 3, ... and the math renderer ships with the site. With
no browser at hand, what a reader sees is checked in the HTML: the chapters' figures are image
files of the site, every output block carries its styling class, long plotting cells are
folded, every `file.py: Symbol` pointer links to the line defining the symbol, and the
learner's pages are in every page's navigation."""

from __future__ import annotations

import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import build_site  # noqa: E402

# One xdist worker runs this module (`make test` distributes with --dist loadgroup), so
# its module fixture (the site build) is computed once, not once per worker.
# Slow: the whole site built with mkdocs.
pytestmark = [pytest.mark.xdist_group("site_test"), pytest.mark.slow]

CHAPTERS = sorted((ROOT / "chapters").glob("[0-9][0-9]-*.md"))


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    base = tmp_path_factory.mktemp("site")
    build_site.build(base / "site", base / "docs")
    return base / "site"


class _Refs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.refs: list[str] = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("href", "src") and value:
                self.refs.append(value)


def _resolves(site: Path, page: Path, ref: str) -> bool:
    parts = urlsplit(ref)
    if parts.scheme or parts.netloc or not parts.path:
        return True  # absolute URLs are not ours; "#frag" points into the page itself
    base = site if parts.path.startswith("/") else page.parent  # 404.html links from the root
    target = (base / unquote(parts.path).lstrip("/")).resolve()
    return target.is_file() or (target / "index.html").is_file()


def test_every_relative_link_resolves(site):
    broken = []
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > len(CHAPTERS)
    for page in pages:
        parser = _Refs()
        parser.feed(page.read_text())
        broken += [f"{page.relative_to(site)}: {ref}" for ref in parser.refs
                   if not _resolves(site, page, ref)]
    assert not broken, "links that resolve to no built file:\n" + "\n".join(broken)


def test_no_external_assets(site):
    """Fonts, scripts and styles all ship with the site (no CDN at run time)."""
    for page in [site / "index.html", site / "chapters" / "06-reverse-mode" / "index.html"]:
        parser = _Refs()
        parser.feed(page.read_text())
        assets = [r for r in parser.refs if urlsplit(r).scheme and
                  not r.startswith("https://github.com")]
        external = [r for r in assets if re.search(r"\.(js|css)\b|fonts\.", r)]
        assert not external, f"{page.relative_to(site)} loads {external}"


def test_source_links_are_pages(site):
    html = (site / "chapters" / "03-jaxprs" / "index.html").read_text()
    assert 'href="../../minijax/core.py/"' in html
    page = (site / "minijax" / "core.py" / "index.html").read_text()
    assert "class DynamicJaxprTrace" not in page  # sanity: core.py holds no such class
    assert "Primitive" in page and 'class="language-python highlight"' in page


def test_pointers_link_to_their_line(site):
    """`minijax/core.py: Primitive.bind` in a chapter's prose links to the line that defines
    it on core.py's page, where an anchor of that name exists; pointers in code blocks stay."""
    html = (site / "chapters" / "13-shard-map" / "index.html").read_text()
    line = build_site.symbol_lines(ROOT / "minijax" / "shard_map.py")["_shard_map_lowering"]
    src_line = (ROOT / "minijax" / "shard_map.py").read_text().splitlines()[line - 1]
    assert "def _shard_map_lowering" in src_line
    assert f'href="../../minijax/shard_map.py/#__codelineno-0-{line}"' in html
    page = (site / "minijax" / "shard_map.py" / "index.html").read_text()
    assert f'id="__codelineno-0-{line}"' in page
    text = "`minijax/core.py: Primitive.bind` and\n```python\n`minijax/core.py: Primitive`\n```\n"
    linked = build_site._link_pointers(text, Path("chapters/00-x.md"))
    bind = build_site.symbol_lines(ROOT / "minijax" / "core.py")["Primitive.bind"]
    assert linked.startswith(f"[`minijax/core.py: Primitive.bind`](../minijax/core.py"
                             f"#__codelineno-0-{bind})")
    assert linked.endswith("```python\n`minijax/core.py: Primitive`\n```\n")


def test_output_blocks_are_styled_apart_from_code(site):
    html = (site / "chapters" / "13-shard-map" / "index.html").read_text()
    assert html.count('class="language-output highlight"') >= 10
    assert 'class="language-python highlight"' in html
    assert "div.language-output::before" in (site / "extra" / "extra.css").read_text()


def test_long_plotting_cells_are_folded(site):
    html = (site / "chapters" / "28-ragged-dot-gmm" / "index.html").read_text()
    folded = re.findall(r"<details>\s*<summary>The plotting code \((\d+) lines\)</summary>"
                        r"(.*?)</details>", html, re.S)
    assert folded and all(int(n) > build_site.FOLD_LINES for n, _ in folded)
    assert all("savefig" in body and 'class="language-python highlight"' in body
               for _, body in folded)
    short = "```python\nfig.savefig('a.png')\n```\n"
    assert build_site._fold_plotting_cells(short) == short


def test_math_renders_offline(site):
    mathjax = site / "extra" / "mathjax"
    html = (site / "chapters" / "06-reverse-mode" / "index.html").read_text()
    assert 'class="arithmatex"' in html
    (config,) = re.findall(r'src="[./]*extra/mathjax/MathJax\.js\?config=([\w-]+)"', html)
    # the combined configuration holds the code of the TeX input and HTML-CSS output, and the
    # fonts that mathjax-config.js asks for ship with it
    assert "HTML-CSS" in (mathjax / "config" / f"{config}.js").read_text()
    fonts = mathjax / "jax" / "output" / "HTML-CSS" / "fonts" / "STIX-Web"
    assert (fonts / "fontdata.js").is_file()
    assert list((mathjax / "fonts" / "HTML-CSS" / "STIX-Web" / "woff").rglob("*.woff"))
    assert 'webFont: "STIX-Web"' in (site / "extra" / "mathjax-config.js").read_text()


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_exercises_numbered_in_order(site, path):
    html = (site / "chapters" / path.stem / "index.html").read_text()
    section = html.split('id="exercises"', 1)[1].split("<h2", 1)[0]
    numbers = [int(n) for n in re.findall(r"<strong>(\d+)\.\s", section)]
    assert numbers == list(range(1, len(numbers) + 1)) and numbers, (path.name, numbers)
    assert "<ol>" not in section.split("<details", 1)[0], (
        f"{path.name}: an exercise is a markdown list item, which renders as its own list")


def test_navigation_lists_every_chapter(site):
    html = (site / "index.html").read_text()
    for path in CHAPTERS:
        assert f'href="chapters/{path.stem}/"' in html, path.name
    for page in ("exercises", "ladder"):  # the learner's pages too
        assert f'href="chapters/{page}/"' in html, page


# The figures drawn by the chapters' own code (compare/_figures.py), one per chapter.
FIGURES = {"12-sharding": "12-sum-all-reduce.png", "13-shard-map": "13-collectives.png",
           "14-callbacks-effects": "14-token-chain.png",
           "21-mixture-of-experts": "21-dispatch-combine.png",
           "24-memory-offloading": "24-offload-timeline.png"}
_MAGIC = {".png": b"\x89PNG\r\n\x1a\n", ".svg": b"<"}


def _page(site: Path, stem: str) -> str:
    return (site / "chapters" / stem / "index.html").read_text()


@pytest.mark.parametrize("stem", sorted(FIGURES))
def test_figures_show_on_the_site(site, stem):
    """Each picture the page shows is an image file of the built site (PNG or SVG by its first
    bytes, not an empty or pointer file) with its description as alt text; the chapter's
    figure is among them, and a python cell of the chapter draws it."""
    page = site / "chapters" / stem / "index.html"
    imgs = re.findall(r'<img alt="([^"]+)" src="([^"]+)"', page.read_text())
    shown = {}
    for alt, src in imgs:
        target = (page.parent / unquote(src)).resolve()
        assert target.is_file() and target.stat().st_size > 1000, (stem, src)
        assert target.read_bytes().lstrip().startswith(_MAGIC[target.suffix]), (stem, src)
        shown[target.name] = alt
    assert FIGURES[stem] in shown, (stem, sorted(shown))
    cells = re.findall(r"^```python\n(.*?)^```", (ROOT / "chapters" / f"{stem}.md").read_text(),
                       re.S | re.M)
    assert any(f'"chapters/img/{FIGURES[stem]}"' in c for c in cells), stem


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_every_output_block_is_styled(site, path):
    """Each ```output block renders as div.language-output and each ```output-timing block as
    div.language-output-timing (extra.css labels both): none as plain code."""
    text, html = path.read_text(), _page(site, path.stem)
    for kind in ("output", "output-timing"):
        blocks = len(re.findall(rf"^```{kind}\n", text, re.M))
        styled = html.count(f'<div class="language-{kind} highlight">')
        assert styled == blocks, (path.name, kind, styled, blocks)
    assert "div.language-output-timing::before" in (site / "extra" / "extra.css").read_text()


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_no_long_plotting_cell_left_open(site, path):
    """Outside the folded <details>, no python cell that saves a figure is longer than
    FOLD_LINES lines (each rendered line carries one line anchor)."""
    html = re.sub(r"<details>.*?</details>", "", _page(site, path.stem), flags=re.S)
    cells = re.findall(r'<div class="language-python highlight">(.*?)</code></pre></div>',
                       html, re.S)
    lines = [len(re.findall(r'<a id="__codelineno-', c)) for c in cells if "savefig" in c]
    open_long = [n for n in lines if n > build_site.FOLD_LINES]
    assert not open_long, (path.name, open_long)


_PROSE_POINTER = re.compile(r'(<a href="([^"]*)">)?<code>((?:minijax|compare|tests|tools)/'
                            r'[\w/]+\.py):? ([A-Za-z_][\w.]*)</code>')


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_every_pointer_reaches_its_line(site, path):
    """Each `file.py: Symbol` in the prose is a link to the file's page, at the anchor of the
    line that defines the symbol (`def`, `class` or an assignment of that name)."""
    page = site / "chapters" / path.stem / "index.html"
    found = _PROSE_POINTER.findall(page.read_text())
    for _, href, file, symbol in found:
        assert href, f"{path.name}: {file}: {symbol} is not a link"
        target, _, anchor = href.partition("#")
        assert (page.parent / target / "index.html").resolve() == site / file / "index.html"
        line = int(re.fullmatch(r"__codelineno-0-(\d+)", anchor).group(1))
        assert f'id="{anchor}"' in (site / file / "index.html").read_text(), (path.name, href)
        name = symbol.rsplit(".", 1)[-1]
        src = (ROOT / file).read_text().splitlines()[line - 1]
        assert re.match(rf"\s*(?:(?:async )?def |class ){name}\b|{name}\s*[:=]", src), (
            f"{path.name}: {file}: {symbol} links to line {line}: {src!r}")


@pytest.mark.parametrize("stem", sorted(FIGURES))
def test_learner_pages_in_every_pages_navigation(site, stem):
    html = _page(site, stem)
    for page, title in (("exercises", "Exercises"), ("ladder", "Build your own JAX")):
        assert re.search(rf'<a href="\.\./{page}/" class="md-nav__link">\s*'
                         rf'(?:<span[^>]*>\s*)?{title}', html), (stem, page)
