"""Every chapter runs: its ```python blocks execute in order, in one kernel, and each
```output block shows exactly what the code block before it printed.

Pictures drawn by the chapter's code (minijax.viz.render) carry a hash of their DOT source;
the test fails if running the chapter redrew one from a different source (a stale picture).

Timings differ on every run, so a block tagged ```output-timing is compared with its numbers
masked: the same lines, words and units, any numbers. Every block right after a code block
must be one of the two (a ```text block there would go unchecked, and go stale).

Chapters are plain markdown read by jupytext (```python fences become code cells) and executed
with nbclient, the engine nbmake uses, each in a fresh kernel process whose environment lacks
what tests/conftest.py sets for the suite (eight CPU devices): a chapter that needs devices or
flags asks for them in its own first cell, as a learner opening it alone would need.

Links to source files and `file.py: Symbol` pointers must name files and symbols that exist. The
prose speaks to a learner about the code: it never mentions how the work on it was organised
(issues, targets, criteria, sessions).
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "chapters").glob("[0-9][0-9]-*.md"))


_DEVICE_COUNT_FLAG = re.compile(r"--xla_force_host_platform_device_count=\d+")


def _fresh_env(environ=os.environ) -> dict[str, str]:
    """This process's environment less the device count tests/conftest.py asked for."""
    env = dict(environ)
    flags = " ".join(_DEVICE_COUNT_FLAG.sub("", env.pop("XLA_FLAGS", "")).split())
    if flags:
        env["XLA_FLAGS"] = flags
    return env


def _execute(path: Path):
    import jupytext
    from nbclient import NotebookClient

    nb = jupytext.read(path)
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(ROOT)}}).execute(env=_fresh_env())
    return nb


def test_chapters_run_without_the_suites_device_count():
    assert "xla_force_host_platform_device_count" in os.environ["XLA_FLAGS"]  # conftest's
    assert "xla_force_host_platform_device_count" not in _fresh_env().get("XLA_FLAGS", "")
    other = {"XLA_FLAGS": "--xla_cpu_enable_fast_math=false "
                          "--xla_force_host_platform_device_count=8"}
    assert _fresh_env(other) == {"XLA_FLAGS": "--xla_cpu_enable_fast_math=false"}


def _stdout(cell) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", [])
                   if o.get("output_type") == "stream" and o.get("name") == "stdout")


def _norm(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


_OUTPUT_BLOCK = re.compile(r"^```(output|output-timing)\n(.*?)^```", re.S | re.M)
_ANY_BLOCK = re.compile(r"^```(\S*)\n")
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def _mask_numbers(text: str) -> str:
    """Each number becomes `#` and runs of spaces one space (column widths change with the
    numbers): what an output-timing block and the printed text must agree on."""
    return "\n".join(" ".join(_NUMBER.sub("#", line).split()) for line in text.splitlines())


_PICTURE = re.compile(r"\]\((img/[\w.-]+\.svg)\)")
_STAMP = re.compile(r"<!-- minijax\.viz DOT source sha256: (\w+) -->")


def _picture_stamps(path: Path) -> dict[str, str | None]:
    """For each SVG the chapter shows, the DOT-source hash that minijax.viz.render stamped in
    it (None if absent): the chapter's own code redraws them, so a changed hash after running
    it means the committed picture no longer showed what the code draws."""
    stamps = {}
    for rel in _PICTURE.findall(path.read_text()):
        svg = path.parent / rel
        m = _STAMP.search(svg.read_text()) if svg.exists() else None
        stamps[rel] = m.group(1) if m else None
    return stamps


def _shipped_files() -> dict[Path, str]:
    """The chapters and their non-SVG pictures, by content hash: running a chapter must leave
    them as they are (a learner's run writes its own plots to chapters/out/, which git ignores).
    SVGs are redrawn where Graphviz is installed and are checked by their DOT-source stamps."""
    files = list((ROOT / "chapters").glob("*.md")) + [
        p for p in (ROOT / "chapters" / "img").iterdir() if p.is_file() and p.suffix != ".svg"]
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


# Chapters that need a program the machine may lack: without it they are skipped, saying why.
_NEEDS = {"32-ffi": ("a C++ compiler (c++ or g++) on the PATH to build its FFI handlers",
                     lambda: shutil.which("c++") or shutil.which("g++"))}


@pytest.mark.slow  # a fresh kernel per chapter, each running its programs; `make chapter N=..`
@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_runs_and_outputs_match(path):
    if path.stem in _NEEDS and not _NEEDS[path.stem][1]():
        pytest.skip(f"{path.name} needs {_NEEDS[path.stem][0]}")
    before = _picture_stamps(path)
    shipped = _shipped_files()
    nb = _execute(path)
    after = _picture_stamps(path)
    rewritten = sorted(p.relative_to(ROOT).as_posix() for p, h in _shipped_files().items()
                       if shipped.get(p) != h)
    assert not rewritten, (f"{path.name}: running the chapter rewrote or added {rewritten}; "
                           "write what a run produces to chapters/out/")
    stale = [rel for rel in before if after[rel] is not None and after[rel] != before[rel]]
    assert not stale, (f"{path.name}: running the chapter redrew {stale}, which showed an older "
                       "program: commit the redrawn pictures")
    cells = nb.cells
    for i, cell in enumerate(cells[:-1]):
        nxt = cells[i + 1]
        if cell.cell_type != "code" or nxt.cell_type != "markdown":
            continue
        source = nxt.source.lstrip()
        fence = _ANY_BLOCK.match(source)
        if fence and fence.group(1) not in ("output", "output-timing"):
            raise AssertionError(
                f"{path.name}: the block after code cell {i} is tagged {fence.group(1)!r}; "
                "tag what the code prints `output` (or `output-timing`) so that it is checked")
        m = _OUTPUT_BLOCK.match(source)
        if m:
            shown, printed = _norm(m.group(2)), _norm(_stdout(cell))
            if m.group(1) == "output-timing":
                shown, printed = _mask_numbers(shown), _mask_numbers(printed)
            assert printed == shown, (
                f"{path.name}: the output shown after code cell {i} differs from what it prints"
                f"\n--- shown ---\n{m.group(2)}\n--- printed ---\n{_stdout(cell)}")


_LINK = re.compile(r"\]\((\.\./[^)#\s]+)(?:#[^)]*)?\)")
_SYMBOL = re.compile(r"`((?:minijax|compare|tests)/[\w/]+\.py):? ([A-Za-z_][\w.]*)`")


def _defined_names(py: Path) -> set[str]:
    tree = ast.parse(py.read_text())
    names: set[str] = set()

    def visit(node, prefix=""):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(prefix + child.name)
                visit(child, prefix + child.name + ".")
            elif isinstance(child, (ast.Assign, ast.AnnAssign)) and not prefix:
                targets = child.targets if isinstance(child, ast.Assign) else [child.target]
                for t in targets:
                    if isinstance(t, ast.Name):
                        names.add(t.id)
    visit(tree)
    return names


@pytest.mark.parametrize("path", CHAPTERS + [ROOT / "chapters" / "README.md"],
                         ids=[p.stem for p in CHAPTERS] + ["README"])
def test_links_and_symbols_exist(path):
    text = path.read_text()
    for rel in _LINK.findall(text):
        assert (path.parent / rel).resolve().exists(), f"{path.name}: broken link {rel}"
    for file, symbol in _SYMBOL.findall(text):
        py = ROOT / file
        assert py.exists(), f"{path.name}: {file} does not exist"
        assert symbol in _defined_names(py), f"{path.name}: {file} has no symbol {symbol}"


_BOOKKEEPING = re.compile("|".join([
    r"\bissues? (?:behind|asks?|tracker|#?\d+)\b", r"\b(?:the|this|that|an|our|github) issues?\b",
    r"\btargets? (?:is|was|were|are) (?:met|missed|reached)\b",
    r"\b(?:step-time|speed|accuracy|performance|time) targets?\b",
    r"\bcriteri(?:on|a)\b", r"\bdone means\b", r"\b(?:this|our|the) session'?s?\b", r"\bdeadline\b",
    r"\bthe lead\b", r"\bworktree\b", r"\bpull request\b",
    r"\b(?:this|the) (?:chapter|page)s? (?:was|were) (?:written|run) on\b",
]), re.I)
_CODE = re.compile(r"^```.*?^```|`[^`\n]*`", re.S | re.M)


def _bookkeeping(text: str) -> list[str]:
    """Phrases about how the work was organised, in the prose (code and output blocks and
    inline code left out)."""
    return [m.group(0) for m in _BOOKKEEPING.finditer(_CODE.sub(" ", text))]


@pytest.mark.parametrize("path", CHAPTERS + [ROOT / "chapters" / "README.md"],
                         ids=[p.stem for p in CHAPTERS] + ["README"])
def test_prose_keeps_no_bookkeeping(path):
    found = _bookkeeping(path.read_text())
    assert not found, (f"{path.name} talks about how the work was organised: {found}; say "
                       "what the code does and prints instead")


def test_bookkeeping_check_finds_phrases_and_skips_code():
    assert _bookkeeping("The issue behind it asks for more. The step-time target is met; the "
                        "criterion was 5%. This session's machine has no GPU.") == [
        "The issue", "step-time target", "criterion", "This session's"]
    assert _bookkeeping("A target jaxlib registers; the CPU issues a call.\n"
                        "```python\nThread(target=work)  # the issue\n```\n`the session`; "
                        "a profiling session") == []


def test_timing_blocks_compare_words_not_numbers():
    shown = "minijax  gather   0.43 ms   scatter-add   2.11 ms\ncores busy 1.00: True"
    assert _mask_numbers(shown) == _mask_numbers(
        "minijax  gather  12.5 ms   scatter-add 101.00 ms\ncores busy 2: True")
    assert _mask_numbers(shown) != _mask_numbers(
        "minijax  gather   0.43 s   scatter-add   2.11 ms\ncores busy 1.00: True")
    assert _mask_numbers(shown) != _mask_numbers(shown.replace("True", "False"))


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_pictures_exist(path):
    """Every picture a chapter shows is in chapters/img; from chapter 02 on, each chapter on a
    transformation shows at least one (they are drawn by its own code)."""
    pictures = re.findall(r"!\[[^\]]*\]\((img/[^)]+)\)", path.read_text())
    for rel in pictures:
        assert (path.parent / rel).is_file(), f"{path.name}: missing picture {rel}"
    if "02" <= path.name[:2] <= "10":
        assert pictures, f"{path.name} shows no picture"


_EXERCISE = re.compile(r"^\*\*(\d+)\. ", re.M)


def _unfinished_exercises(text: str) -> list[str]:
    """Numbered exercises of the chapter's Exercises section with neither a solution (a folded
    <summary>Solution, or a skeleton under chapters/exercises/ that `make exercise` tests) nor
    the words "Open problem"."""
    if "## Exercises" not in text:
        return []
    section = re.split(r"^## ", text.split("## Exercises", 1)[1], flags=re.M)[0]
    parts = _EXERCISE.split(section)
    return [n for n, body in zip(parts[1::2], parts[2::2])
            if "<summary>Solution" not in body and "Open problem" not in body
            and not re.search(r"\]\(exercises/\w+\.py\)", body)]


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_every_exercise_is_solved_or_marked_open(path):
    assert not _unfinished_exercises(path.read_text()), (
        f"{path.name}: exercises {_unfinished_exercises(path.read_text())} have no solution "
        "and are not marked as an open problem")


def test_unfinished_exercise_check_finds_one():
    text = ("## Exercises\n\n**1. A.** Do it.\n\n<details><summary>Solution</summary>x"
            "</details>\n\n**2. B.** Do that.\n\n**3. C.** *Open problem.*\n\n## Next\n")
    assert _unfinished_exercises(text) == ["2"]
