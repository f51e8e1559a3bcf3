"""JAX's public surface against minijax's, name for name: regenerates docs/public_surface.md (the
coverage figures and the table of JAX public names minijax does not implement) and
minijax/_unimplemented.py (the same names, for the AttributeError that points to that table).

Run from the repository root after adding or removing public names:

    .venv/bin/python tools/public_surface.py

A public name is one that `dir()` of the JAX module lists without a leading underscore;
minijax has it if `hasattr` finds it, or if it is a minijax submodule not imported yet.
tests/public_surface_test.py checks that both files are up to date and that the figures do not
drop.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the order matters: surveying a package after one of its submodules was imported would count
# that submodule too (jax.experimental.pallas lists `tpu` once pallas.tpu is imported)
MODULES = ["jax", "jax.numpy", "jax.lax", "jax.random", "jax.nn", "jax.tree_util", "jax.tree",
           "jax.scipy.special", "jax.sharding", "jax.experimental.pallas",
           "jax.experimental.pallas.tpu"]


def mini_name(jax_name: str) -> str:
    return "minijax" + jax_name[len("jax"):]


def _has(mini, mini_mod: str, name: str) -> bool:
    if hasattr(mini, name):
        return True
    try:
        return importlib.util.find_spec(f"{mini_mod}.{name}") is not None
    except (ImportError, AttributeError, ValueError):
        return False


def survey() -> dict[str, tuple[list[str], list[str]]]:
    """For each JAX module: (its public names, those minijax lacks)."""
    out = {}
    for name in MODULES:
        jax_mod = importlib.import_module(name)
        mini = importlib.import_module(mini_name(name))
        public = sorted(n for n in dir(jax_mod) if not n.startswith("_"))
        out[name] = public, [n for n in public if not _has(mini, mini_name(name), n)]
    return out


_BACKEND = ("gpu", "tpu", "cuda", "rocm", "mosaic", "triton", "dlpack", "ffi", "distributed")
_KINDS = {"module": "a JAX submodule minijax does not have",
          "State": "a configuration option as a context manager (not modelled)",
          "Primitive": "a primitive object JAX exports (not exported by minijax)",
          "_ScalarMeta": "a scalar type minijax does not model"}


# names whose kind does not tell the reason
_REASONS = {"jax.ad": "not modelled: the namespace of gradients of refs (GradRef, DontWant...)",
            "jax.memory": "not modelled: memory spaces (minijax has one)",
            "jax.lib": "backend-specific (jaxlib's own bindings)"}


def reason(jax_name: str, name: str) -> str:
    """Why minijax lacks `jax_name.name`, as far as the name and its kind tell."""
    if f"{jax_name}.{name}" in _REASONS:
        return _REASONS[f"{jax_name}.{name}"]
    jax_mod = importlib.import_module(jax_name)
    if name in getattr(jax_mod, "_deprecations", {}):
        return "deprecated in JAX"
    if any(word in name.lower() for word in _BACKEND):
        return "backend-specific"
    try:
        kind = type(getattr(jax_mod, name)).__name__
    except Exception:  # a name JAX lists but cannot give: say only that
        kind = ""
    return _KINDS.get(kind, "not implemented yet")


def markdown(table: dict) -> str:
    import jax
    lines = ["# JAX's public names in minijax", "",
             f"Measured against JAX {jax.__version__} by `tools/public_surface.py`, which writes "
             "this page: a name is public when `dir()` of the JAX module lists it without a "
             "leading underscore. Asking minijax for one of the names below raises an "
             "`AttributeError` that names this page.", "",
             "| module | minijax has | of JAX's public names | coverage |",
             "| --- | --- | --- | --- |"]
    for name, (public, missing) in table.items():
        have = len(public) - len(missing)
        lines.append(f"| `{name}` | {have} | {len(public)} | {100 * have / len(public):.0f}% |")
    for name, (_, missing) in table.items():
        lines += ["", f"## `{name}`: not in `{mini_name(name)}`", "", "| name | reason |",
                  "| --- | --- |"]
        lines += [f"| `{name}.{n}` | {reason(name, n)} |" for n in missing]
    return "\n".join(lines) + "\n"


def python(table: dict) -> str:
    lines = ['"""The JAX public names minijax does not implement, by module (written by',
             'tools/public_surface.py; the table with reasons is docs/public_surface.md)."""',
             "", "UNIMPLEMENTED = {"]
    for name, (_, missing) in table.items():
        lines.append(f"    {mini_name(name)!r}: frozenset(\"\"\"")
        row = "       "
        for n in missing:
            if len(row) + len(n) + 1 > 99:
                lines.append(row)
                row = "       "
            row += " " + n
        lines += ([row] if row.strip() else []) + ['    """.split()),']
    lines += ["}", "", "",
              "def missing(module: str, name: str) -> AttributeError:",
              '    """The AttributeError for `module.name`: JAX\'s name, if it is one, is not '
              'implemented."""',
              "    if name in UNIMPLEMENTED.get(module, ()):",
              "        jax_name = 'jax' + module[len('minijax'):]",
              "        return AttributeError(",
              "            f\"module {module!r} has no attribute {name!r}: {jax_name}.{name} is a "
              "JAX public name \"",
              "            \"not implemented in minijax (docs/public_surface.md lists them)\")",
              "    return AttributeError(f\"module {module!r} has no attribute {name!r}\")", ""]
    return "\n".join(lines)


def fresh_survey() -> dict[str, tuple[list[str], list[str]]]:
    """`survey()` in a new interpreter that has imported only jax and minijax: `dir(jax)` also
    lists every submodule some other code has imported (jax.extend, jax.experimental, ...), so
    the count taken inside a test run would depend on what ran before it."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import public_surface; "
            "print(json.dumps(public_surface.survey()))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code, str(ROOT / "tools")], check=True,
                         capture_output=True, text=True, cwd=ROOT, env=env).stdout
    return {k: (pub, miss) for k, (pub, miss) in json.loads(out.splitlines()[-1]).items()}


def main() -> None:
    sys.path.insert(0, str(ROOT))
    table = fresh_survey()
    (ROOT / "docs" / "public_surface.md").write_text(markdown(table))
    (ROOT / "minijax" / "_unimplemented.py").write_text(python(table))
    for name, (public, missing) in table.items():
        print(f"{name:16s} {len(public) - len(missing):4d} of {len(public)}")


if __name__ == "__main__":
    main()
