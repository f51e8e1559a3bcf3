"""JAX's own tutorials, run cell by cell under `jax` and under `minijax`, their outputs compared.

Usage, from the repository root:

    .venv/bin/python tools/tutorials.py                  # every page in PAGES
    .venv/bin/python tools/tutorials.py jaxpr pytrees    # some pages
    .venv/bin/python tools/tutorials.py --diff jaxpr     # also show each cell that differs
    .venv/bin/python tools/tutorials.py --extract        # re-read the cells from a JAX checkout

The cells come from `tools/jax_tutorial_cells.json`, an extract of the code cells of the MyST
sources (`docs/*.md`) of JAX's documentation, Apache-2.0, Copyright the JAX authors (the file
names the commit it was read from). `--extract` rebuilds it from a bare clone of
github.com/jax-ml/jax given by `--repo` (default: the mirror the project was built next to).

Each page runs in two child processes, one per module, with all its cells in one namespace, in
order; a page that asks for them gets 8 CPU devices. Under minijax, every `import jax...`
written in a cell (or in a function a cell defines) imports `minijax...` instead, `jax._src.X`
included (`minijax_name`): the mapping is applied to the tutorial's code only, not through
`sys.modules`, because minijax itself imports JAX's runtime (device buffers, the MLIR
builders) under the name `jax`. A cell's output
is what it prints plus the repr of its last expression (as a notebook shows it); an exception
is shown by its type's name. `%timeit` runs its statement once and prints a fixed line; other
IPython magics are dropped. Before comparing, memory addresses (and the object ids JAX's
`Var` prints as `id=...`) and timing figures (a number with a unit of time) are masked.

Counted are the cells that run under JAX 0.10.2 (the documentation is newer than that version:
a cell that raises under JAX without the `raises-exception` tag is left out). For each page,
and in total: cells, identical, equal up to float rounding (the same text but for numbers that
agree to 1e-5 relative), and errors under minijax only.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import contextlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CELLS = ROOT / "tools" / "jax_tutorial_cells.json"
JAX_MIRROR = Path("/work/.mirror/jax-ml+jax/repo")

# name -> (path under docs/, needs 8 devices). Pages that run on a CPU in seconds.
PAGES = {
    "key-concepts": ("key-concepts.md", False),
    "jit-compilation": ("jit-compilation.md", False),
    "automatic-vectorization": ("automatic-vectorization.md", False),
    "automatic-differentiation": ("automatic-differentiation.md", False),
    "pytrees": ("pytrees.md", False),
    "random-numbers": ("random-numbers.md", False),
    "control-flow": ("control-flow.md", False),
    "stateful-computations": ("stateful-computations.md", False),
    "jaxpr": ("jaxpr.md", False),
    "jax-primitives": ("jax-primitives.md", False),
    "custom-interpreters": ("notebooks/Writing_custom_interpreters_in_Jax.md", False),
    "thinking-in-jax": ("notebooks/thinking_in_jax.md", False),
    "sharp-bits": ("notebooks/Common_Gotchas_in_JAX.md", False),
    "external-callbacks": ("external-callbacks.md", False),
    "gradient-checkpointing": ("gradient-checkpointing.md", False),
    "higher-order": ("higher-order.md", False),
    "jacobian-vector-products": ("jacobian-vector-products.md", False),
    "custom-derivatives": ("notebooks/Custom_derivative_rules_for_Python_code.md", False),
    "autodiff-cookbook": ("notebooks/autodiff_cookbook.md", False),
    "debugging": ("debugging.md", False),
    "101-arrays": ("new_docs/101/arrays.md", True),
    "101-random": ("new_docs/101/random.md", False),
    "101-pytrees": ("new_docs/101/pytrees.md", False),
    "101-transformations": ("new_docs/101/transformations.md", False),
    "101-state": ("new_docs/101/state.md", False),
}

_FENCE = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```\s*$", re.S | re.M)
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{4,}|(?<=id=)\d{6,}")
_TIMING = re.compile(r"\d+(\.\d+)?\s*(s|sec|seconds|ms|µs|us|ns)\b")
_NUMBER = re.compile(r"-?\d+\.?\d*(?:e[+-]?\d+)?")


# ---------------------------------------------------------------- extracting the cells

def cells_of(markdown: str) -> list[dict]:
    """The code cells of a MyST page: their source and tags (`:tags: [...]` option lines or a
    `---` YAML header inside the fence)."""
    cells = []
    for body in _FENCE.findall(markdown):
        lines, tags = body.split("\n"), []
        if lines and lines[0].strip() == "---":
            end = lines.index("---", 1)
            header, lines = lines[1:end], lines[end + 1:]
        else:
            n = 0
            while n < len(lines) and lines[n].startswith(":"):
                n += 1
            header, lines = lines[:n], lines[n:]
        for line in header:
            if line.lstrip(":").startswith("tags:"):
                tags = re.findall(r"[\w-]+", line.split(":", 2)[-1])
        cells.append({"source": "\n".join(lines).strip("\n"), "tags": tags})
    return cells


def extract(repo: Path) -> dict:
    def show(*args):
        return subprocess.run(["git", "-C", str(repo), *args], check=True,
                              capture_output=True, text=True).stdout
    commit = show("rev-parse", "HEAD").strip()
    pages = {name: {"path": "docs/" + path,
                    "cells": cells_of(show("show", f"HEAD:docs/{path}"))}
             for name, (path, _) in PAGES.items()}
    return {"source": "https://github.com/jax-ml/jax", "commit": commit,
            "license": "Apache-2.0; Copyright the JAX authors. Code cells extracted unchanged "
                       "from the MyST sources of JAX's documentation.",
            "pages": pages}


# ---------------------------------------------------------------- running one page (child)

def _python_source(source: str) -> str:
    """A cell's source as plain Python: `%timeit stmt` runs `stmt` once and prints a fixed
    line, other magics and shell escapes are dropped."""
    out = []
    for line in source.split("\n"):
        stripped = line.lstrip()
        indent = line[:len(line) - len(stripped)]
        if stripped.startswith("%timeit") or stripped.startswith("%%timeit"):
            stmt = re.sub(r"^%%?timeit(\s+-\w+\s*\d*)*", "", stripped).strip()
            if stmt:
                out.append(f"{indent}{stmt}; print('<timeit>')")
            else:
                out.append(f"{indent}print('<timeit>')")
        elif stripped.startswith(("%", "!")):
            out.append(f"{indent}pass")
        else:
            out.append(line)
    return "\n".join(out)


def minijax_name(name: str) -> str:
    """The module a tutorial's `import name` gets under minijax: `jax.X` is `minijax.X`, and
    `jax._src.X` is `minijax.X` too (minijax/X.py mirrors jax/_src/X.py), but for
    `jax._src.lib`: jaxlib's MLIR bindings, which minijax lowers with as well."""
    if name.startswith("jax._src.lib") or not (name == "jax" or name.startswith("jax.")):
        return name
    return "minijax" + name[3:].replace("._src", "", 1) if name.startswith("jax._src") \
        else "minijax" + name[3:]


def _mapped_import(original):
    def _import(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and globals is not None and globals.get("__tutorial_page__"):
            name = minijax_name(name)
        return original(name, globals, locals, fromlist, level)
    return _import


def run_cell(source: str, namespace: dict) -> dict:
    """Run one cell; its printed text (plus the last expression's repr) and the error type."""
    buffer = io.StringIO()
    error = None
    with contextlib.redirect_stdout(buffer):
        try:
            tree = ast.parse(_python_source(source))
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                last = ast.Expression(tree.body.pop().value)
            exec(compile(tree, "<cell>", "exec"), namespace)
            if last is not None:
                value = eval(compile(last, "<cell>", "eval"), namespace)
                if value is not None and not source.rstrip().endswith(";"):
                    print(repr(value))
        except BaseException as e:  # a cell's error is part of its output
            if isinstance(e, KeyboardInterrupt):
                raise
            error = type(e).__name__
            print(f"<raises {error}>")
    return {"output": buffer.getvalue(), "error": error}


def run_page(cells: list[dict], module: str) -> list[dict]:
    import random

    import numpy as np
    os.environ.setdefault("MPLBACKEND", "Agg")
    # importing JAX draws from NumPy's global random state: import it before seeding, under
    # both modules (minijax imports it too, as its backend, but later), so that the cells'
    # `np.random` calls draw the same numbers
    import jax  # noqa: F401
    if module == "minijax":
        builtins.__import__ = _mapped_import(builtins.__import__)
    namespace = {"__name__": "__main__", "__tutorial_page__": True}
    np.random.seed(0)
    random.seed(0)
    return [run_cell(cell["source"], namespace) for cell in cells]


# ---------------------------------------------------------------- comparing (parent)

def normalise(text: str) -> str:
    return _TIMING.sub("<time>", _ADDRESS.sub("0x…", text))


def equal_up_to_rounding(a: str, b: str, rtol: float = 1e-5) -> bool:
    """The same text but for numbers that agree to `rtol` (and the spaces that align them)."""
    a, b = " ".join(a.split()), " ".join(b.split())
    if _NUMBER.sub("#", a) != _NUMBER.sub("#", b):
        return False
    for x, y in zip(_NUMBER.findall(a), _NUMBER.findall(b)):
        fx, fy = float(x), float(y)
        if abs(fx - fy) > rtol * max(abs(fx), abs(fy)) + 1e-6:
            return False
    return True


def run_child(name: str, module: str, timeout: float) -> list[dict] | str:
    env = dict(os.environ, PYTHONPATH=str(ROOT), MPLBACKEND="Agg")
    if PAGES[name][1]:
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") +
                            " --xla_force_host_platform_device_count=8").strip()
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", name, module]
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout,
                              cwd=ROOT)
    except subprocess.TimeoutExpired:
        return f"timed out after {timeout:.0f} s"
    lines = proc.stdout.strip().splitlines()
    if proc.returncode or not lines:
        return f"exit {proc.returncode}: {proc.stderr.strip()[-400:]}"
    return json.loads(lines[-1])


def jax_outputs(name: str, cells: list[dict], timeout: float) -> list[dict] | str:
    """The page's outputs under JAX, cached (per page, its cells, JAX's version and the code
    that runs them) in ~/.cache/minijax-tutorials: they do not change when minijax does."""
    import hashlib
    import inspect
    from importlib.metadata import version
    runner = [inspect.getsource(f) for f in (run_page, run_cell, _python_source)]
    key = hashlib.sha256(json.dumps([cells, version("jax"), PAGES[name], runner]).encode())
    key = key.hexdigest()
    path = Path.home() / ".cache" / "minijax-tutorials" / f"{name}-{key[:16]}.json"
    if path.exists():
        return json.loads(path.read_text())
    ref = run_child(name, "jax", timeout)
    if not isinstance(ref, str):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(ref))
    return ref


def compare_page(name: str, cells: list[dict], timeout: float = 600) -> dict:
    """Run one page under both modules; per counted cell its verdict."""
    ref, mini = jax_outputs(name, cells, timeout), run_child(name, "minijax", timeout)
    if isinstance(ref, str) or isinstance(mini, str):
        return {"page": name, "failed": ref if isinstance(ref, str) else mini, "cells": []}
    verdicts = []
    for i, (cell, r, m) in enumerate(zip(cells, ref, mini)):
        if r["error"] and "raises-exception" not in cell["tags"]:
            continue  # fails under JAX 0.10.2 itself
        a, b = normalise(r["output"]), normalise(m["output"])
        if a == b:
            verdict = "identical"
        elif r["error"] == m["error"] and equal_up_to_rounding(a, b):
            verdict = "rounding"
        elif m["error"] and not r["error"]:
            verdict = "error"
        else:
            verdict = "differs"
        verdicts.append({"cell": i, "verdict": verdict, "jax": a, "minijax": b,
                         "source": cell["source"]})
    return {"page": name, "cells": verdicts}


def summary(result: dict) -> dict:
    v = [c["verdict"] for c in result["cells"]]
    return {"cells": len(v), "identical": v.count("identical"),
            "rounding": v.count("identical") + v.count("rounding"), "error": v.count("error")}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("pages", nargs="*", help=f"page names (default all): {', '.join(PAGES)}")
    parser.add_argument("--child", nargs=2, metavar=("PAGE", "MODULE"), help=argparse.SUPPRESS)
    parser.add_argument("--extract", action="store_true", help="rebuild the cells file")
    parser.add_argument("--repo", type=Path, default=JAX_MIRROR, help="bare clone of jax")
    parser.add_argument("--diff", action="store_true", help="show each cell that differs")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    if args.extract:
        CELLS.write_text(json.dumps(extract(args.repo), indent=1, ensure_ascii=False) + "\n")
        print(f"wrote {CELLS.relative_to(ROOT)}")
        return 0
    pages = json.loads(CELLS.read_text())["pages"]
    if args.child:
        name, module = args.child
        outputs = run_page(pages[name]["cells"], module)
        sys.stdout.flush()
        sys.__stdout__.write("\n" + json.dumps(outputs) + "\n")
        return 0
    names = args.pages or list(PAGES)
    results, total = [], {"cells": 0, "identical": 0, "rounding": 0, "error": 0}
    if not args.json:
        print(f"{'page':28} {'cells':>5} {'identical':>9} {'rounding':>9} {'error':>6}")
    for name in names:
        result = compare_page(name, pages[name]["cells"])
        results.append(result)
        s = summary(result)
        for k in total:
            total[k] += s[k]
        if args.json:
            continue
        if "failed" in result:
            print(f"{name:28} failed: {result['failed']}")
            continue
        print(f"{name:28} {s['cells']:5} {s['identical']:9} {s['rounding']:9} {s['error']:6}",
              flush=True)
        for c in result["cells"] if args.diff else []:
            if c["verdict"] != "identical":
                print(f"--- {name} cell {c['cell']} ({c['verdict']})\n{c['source']}\n"
                      f"--- jax:\n{c['jax']}--- minijax:\n{c['minijax']}")
    if args.json:
        print(json.dumps({"total": total, "pages": results}))
        return 0
    n = max(total["cells"], 1)
    print(f"{'total':28} {total['cells']:5} {total['identical']:9} {total['rounding']:9} "
          f"{total['error']:6}")
    print(f"identical {total['identical'] / n:.1%}, up to float rounding "
          f"{total['rounding'] / n:.1%}, errors under minijax only {total['error'] / n:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
