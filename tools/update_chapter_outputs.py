"""Refresh the ```output blocks of chapters after a deliberate change in what the code prints.

Usage: python tools/update_chapter_outputs.py [--timings] chapters/06-reverse-mode.md [...]

It runs the chapter exactly as tests/chapters/chapters_test.py does and rewrites each
```output block with what the code block before it printed. An ```output-timing block is
rewritten only when its words changed (the test compares those with numbers masked), or always
with `--timings`, to show fresh numbers. Review the diff before committing:
the test exists so that a change in printed output is noticed, and this tool is for after you
noticed it.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.chapters.chapters_test import _execute, _mask_numbers, _stdout  # noqa: E402

_BLOCK = re.compile(r"(```python\n.*?```\n\s*```(output|output-timing)\n)(.*?)(```)", re.S)


def update(path: Path, timings: bool = False) -> int:
    nb = _execute(path)
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    outputs = {c.source.strip(): _stdout(c) for c in code_cells}
    text = path.read_text()
    changed = 0

    def repl(m):
        nonlocal changed
        code = m.group(1).rsplit("```python\n", 1)[1].split("\n```", 1)[0].strip()
        new, old = outputs.get(code), m.group(3)
        if new is None or new.strip() == old.strip():
            return m.group(0)
        if (m.group(2) == "output-timing" and not timings
                and _mask_numbers(new.strip()) == _mask_numbers(old.strip())):
            return m.group(0)
        changed += 1
        return m.group(1) + new.rstrip() + "\n" + m.group(4)

    path.write_text(_BLOCK.sub(repl, text))
    return changed


if __name__ == "__main__":
    args = sys.argv[1:]
    timings = "--timings" in args
    for arg in (a for a in args if a != "--timings"):
        print(f"{arg}: {update(Path(arg), timings)} output block(s) updated")
