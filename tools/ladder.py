"""The ladder's skeleton: the reference package chapters/ladder/solution/tinyjax with each
`# BUILD rung N: what to build` ... `# END BUILD` block cut out. A block becomes
`raise NotImplementedError("rung N: what to build (chapters/ladder/README.md)")`, or the
line given after `# stub:` (for tables a later import needs to exist, e.g. `jvp_rules = {}`).

    .venv/bin/python tools/ladder.py DEST    # writes DEST/tinyjax (refuses to overwrite)

`make ladder` does this once into chapters/exercises/mine/ladder/ and runs the ladder's tests
on it (tests/chapters/ladder_test.py).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

SOLUTION = Path(__file__).resolve().parents[1] / "chapters" / "ladder" / "solution" / "tinyjax"
_BUILD = re.compile(r"^(\s*)# BUILD rung (\d+): (.*)$")


def skeleton_text(text: str) -> str:
    """`text` with its BUILD blocks replaced (see the module docstring)."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = _BUILD.match(lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        indent, rung, what = m.groups()
        i += 1
        while lines[i].strip().startswith("#") and not lines[i].strip().startswith("# stub:") \
                and not lines[i].strip().startswith("# END BUILD"):
            what += " " + lines[i].strip().lstrip("# ")  # the description goes on
            i += 1
        stub = None
        if lines[i].strip().startswith("# stub:"):
            stub = lines[i].strip()[len("# stub:"):].strip()
            i += 1
        while lines[i].strip() != "# END BUILD":
            i += 1
        i += 1
        out.append(f"{indent}# rung {rung}: {what}")
        out.append(indent + (stub or f'raise NotImplementedError("rung {rung}: {what} '
                                      f'(chapters/ladder/README.md)")'))
    return "\n".join(out) + "\n"


def write_skeleton(dest: Path) -> Path:
    """Write the skeleton package to `dest/tinyjax`; returns that folder."""
    pkg = Path(dest) / "tinyjax"
    pkg.mkdir(parents=True, exist_ok=True)
    for src in sorted(SOLUTION.glob("*.py")):
        (pkg / src.name).write_text(skeleton_text(src.read_text()))
    return pkg


if __name__ == "__main__":
    target = Path(sys.argv[1])
    if (target / "tinyjax").exists():
        sys.exit(f"{target / 'tinyjax'} exists: it is your work, not overwritten")
    print(f"your package to fill in: {write_skeleton(target)}")
