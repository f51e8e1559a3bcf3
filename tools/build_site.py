"""Build the chapters as a static site: `make docs`, or `python tools/build_site.py [SITE_DIR]`.

1. Lays out a docs tree (build/docs): the chapters and their pictures, the chapter index as the
   landing page, and one page per source file the chapters link to, showing the file highlighted
   with line numbers. A chapter's link `../minijax/core.py` becomes a link to that page, so
   every link on the site opens a page instead of downloading a `.py` file.
2. Vendors MathJax 2 from the `jupyter-server-mathjax` wheel (fetched once with `pip download`
   and cached in build/vendor), so that `$...$` formulas render with no CDN at run time.
3. Runs `mkdocs build --strict` with mkdocs.yml, plus a navigation listing every chapter.

tests/site_test.py builds the site into a temporary directory with `build` and checks that
every relative link resolves and that each chapter's exercises are numbered in order.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = ROOT / "chapters"
MATHJAX_WHEEL = "jupyter-server-mathjax==0.2.6"
MATHJAX_PREFIX = "jupyter_server_mathjax/static/"

# A markdown link or image target: ](target) or ](target#fragment)
_LINK = re.compile(r"\]\(([^)\s#]+)(#[^)\s]*)?\)")


def _docs_path(repo_path: Path) -> Path:
    """Where a repository file lands in the docs tree (repo_path is relative to ROOT)."""
    if repo_path == Path("chapters/README.md"):
        return Path("index.md")
    if repo_path.suffix == ".py":
        return repo_path.with_name(repo_path.name + ".md")  # its rendered page
    return repo_path


def _rewrite_links(text: str, src: Path, needed: set[Path]) -> str:
    """Point each relative link of `src` (a repository path) at the target's place in the docs
    tree, relative to where `src` itself lands; collect the linked files in `needed`."""
    here = _docs_path(src).parent

    def repl(m: re.Match) -> str:
        target, frag = m.group(1), m.group(2) or ""
        if re.match(r"^[a-z]+:", target) or target.startswith("/"):
            return m.group(0)
        repo = Path(os.path.normpath(src.parent / target))
        if repo.parts and repo.parts[0] == "..":
            return m.group(0)
        needed.add(repo)
        new = Path(os.path.relpath(_docs_path(repo), here))
        return f"]({new.as_posix()}{frag})"

    return _LINK.sub(repl, text)


# A pointer in the prose: `minijax/core.py: Primitive.bind` (file, then a dotted symbol), not
# already the text of a link. Fenced code blocks are left alone.
_POINTER = re.compile(r"(?<!\[)`((?:minijax|compare|tests|tools)/[\w/]+\.py):? ([A-Za-z_][\w.]*)`")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)


def symbol_lines(py: Path) -> dict[str, int]:
    """Line of each function, class, method (`Class.method`) and module-level name of `py`."""
    import ast
    lines: dict[str, int] = {}

    def visit(node, prefix=""):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                lines.setdefault(prefix + child.name, child.lineno)
                visit(child, prefix + child.name + ".")
            elif isinstance(child, (ast.Assign, ast.AnnAssign)) and not prefix:
                targets = child.targets if isinstance(child, ast.Assign) else [child.target]
                for t in targets:
                    if isinstance(t, ast.Name):
                        lines.setdefault(t.id, child.lineno)
    visit(ast.parse(py.read_text()))
    return lines


def _link_pointers(text: str, src: Path) -> str:
    """Turn each `file.py: Symbol` pointer of `src` into a link to that symbol's line on the
    file's source page (its line anchors are `__codelineno-0-N`: the page's one code block)."""
    cache: dict[str, dict[str, int]] = {}

    def repl(m: re.Match) -> str:
        file, symbol = m.group(1), m.group(2)
        py = ROOT / file
        if not py.is_file():
            return m.group(0)
        line = cache.setdefault(file, symbol_lines(py)).get(symbol)
        if line is None:
            return m.group(0)
        rel = os.path.relpath(py, ROOT / src.parent)
        return f"[{m.group(0)}]({Path(rel).as_posix()}#__codelineno-0-{line})"

    out, last = [], 0
    for fence in _FENCE.finditer(text):  # prose between fenced blocks only
        out += [_POINTER.sub(repl, text[last:fence.start()]), fence.group(0)]
        last = fence.end()
    return "".join(out + [_POINTER.sub(repl, text[last:])])


_PYTHON_CELL = re.compile(r"^```python\n(.*?)^```\n", re.S | re.M)
FOLD_LINES = 12  # a plotting cell longer than this is folded on the site


def _fold_plotting_cells(text: str) -> str:
    """Wrap each long cell that only draws a figure (it calls `savefig`) in a closed
    <details>, so the argument around it reads on; the code stays one click away."""
    def repl(m: re.Match) -> str:
        body = m.group(1)
        n = body.count("\n")
        if "savefig(" not in body or n <= FOLD_LINES:
            return m.group(0)
        return (f'<details markdown="1">\n<summary>The plotting code ({n} lines)</summary>\n\n'
                f"{m.group(0)}\n</details>\n")
    return _PYTHON_CELL.sub(repl, text)


def _source_page(repo_path: Path) -> str:
    text = (ROOT / repo_path).read_text()
    longest = max((len(r) for r in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return (f"# {repo_path.as_posix()}\n\n"
            f"The source file `{repo_path.as_posix()}` as of this build of the site.\n\n"
            f'{fence} python linenums="1"\n{text}\n{fence}\n')


def _vendor_mathjax(dest: Path) -> None:
    cache = ROOT / "build" / "vendor"
    wheels = sorted(cache.glob("jupyter_server_mathjax-*.whl"))
    if not wheels:  # download into a fresh folder, then move: parallel builds may race here
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=cache) as tmp:
            subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                            "--only-binary=:all:", MATHJAX_WHEEL, "-d", tmp], check=True)
            for wheel in Path(tmp).glob("*.whl"):
                os.replace(wheel, cache / wheel.name)
        wheels = sorted(cache.glob("jupyter_server_mathjax-*.whl"))
    with zipfile.ZipFile(wheels[-1]) as zf:
        for name in zf.namelist():
            if name.startswith(MATHJAX_PREFIX) and not name.endswith("/"):
                out = dest / name[len(MATHJAX_PREFIX):]
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(zf.read(name))


def _title(md: Path) -> str:
    first = md.read_text().splitlines()[0]
    return re.sub(r"^#\s*", "", first).replace("`", "")


def layout(docs: Path) -> list:
    """Write the docs tree into `docs`; return the navigation (mkdocs `nav`)."""
    if docs.exists():
        shutil.rmtree(docs)
    docs.mkdir(parents=True)
    shutil.copytree(CHAPTERS / "img", docs / "chapters" / "img")
    shutil.copytree(ROOT / "tools" / "site", docs / "extra")
    pages = sorted(CHAPTERS.glob("[0-9][0-9]-*.md")) + [CHAPTERS / "LAYOUT.md",
                                                          CHAPTERS / "README.md"]
    needed: set[Path] = set()
    queue = [md.relative_to(ROOT) for md in pages]
    done: set[Path] = set()
    while queue:  # the pages, then every markdown file they link to, and so on
        src = queue.pop()
        if src in done:
            continue
        done.add(src)
        out = docs / _docs_path(src)
        out.parent.mkdir(parents=True, exist_ok=True)
        found: set[Path] = set()
        text = (ROOT / src).read_text()
        if src.parts[0] == "chapters":
            text = _fold_plotting_cells(_link_pointers(text, src))
        out.write_text(_rewrite_links(text, src, found))
        queue += [p for p in found if p.suffix == ".md" and (ROOT / p).is_file()]
        needed |= found
    for repo in sorted(needed - done):
        if not (ROOT / repo).is_file():
            continue  # a broken link: mkdocs --strict (and tests/chapters) report it
        out = docs / _docs_path(repo)
        if out.exists():
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        if repo.suffix == ".py":
            out.write_text(_source_page(repo))
        else:
            shutil.copyfile(ROOT / repo, out)
    _vendor_mathjax(docs / "extra" / "mathjax")
    learner = [{title: page} for title, page in (
        ("Exercises", "chapters/exercises/README.md"),
        ("Build your own JAX", "chapters/ladder/README.md")) if (docs / page).exists()]
    return ([{"Home": "index.md"}, {"Layout: the modules in pipeline order": "chapters/LAYOUT.md"}]
            + [{_title(p): f"chapters/{p.name}"} for p in pages[:-2]] + learner)


def build(site_dir: Path, docs_dir: Path) -> None:
    from mkdocs.commands.build import build as mkdocs_build
    from mkdocs.config import load_config

    nav = layout(docs_dir)
    cfg = load_config(str(ROOT / "mkdocs.yml"), docs_dir=str(docs_dir),
                      site_dir=str(site_dir), nav=nav, strict=True)
    mkdocs_build(cfg)


if __name__ == "__main__":
    site = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "site"
    build(site.resolve(), ROOT / "build" / "docs")
    print(f"site built in {site}")
