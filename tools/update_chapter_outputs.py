"""Refresh the ```output blocks of chapters after a deliberate change in what the code prints.

Usage: python tools/update_chapter_outputs.py chapters/06-reverse-mode.md [...]

It runs the chapter exactly as tests/chapters/chapters_test.py does and rewrites each
```output block with what the code block before it printed. Review the diff before committing:
the test exists so that a change in printed output is noticed, and this tool is for after you
noticed it.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.chapters.chapters_test import _execute, _stdout  # noqa: E402

_BLOCK = re.compile(r"(```python\n.*?```\n\s*```output\n)(.*?)(```)", re.S)


def update(path: Path) -> int:
    nb = _execute(path)
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    outputs = {c.source.strip(): _stdout(c) for c in code_cells}
    text = path.read_text()
    changed = 0

    def repl(m):
        nonlocal changed
        code = m.group(1).rsplit("```python\n", 1)[1].split("\n```", 1)[0].strip()
        new = outputs.get(code)
        if new is None or new.strip() == m.group(2).strip():
            return m.group(0)
        changed += 1
        return m.group(1) + new.rstrip() + "\n" + m.group(3)

    path.write_text(_BLOCK.sub(repl, text))
    return changed


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(f"{arg}: {update(Path(arg))} output block(s) updated")
