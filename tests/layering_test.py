"""The layers of `minijax/` hold (read from the source with `ast`, nothing imported).

Three checks, each with the figure the README's "Where to read" section promises:

- no module-level import cycle among minijax's modules (a submodule importing names from a
  package above it is not a cycle: Python has started that package first either way);
- JAX and jaxlib are imported only through the doors: `minijax/interpreters/mlir.py` (IR
  builders and dialects), `minijax/xla_bridge.py` (backend, devices, runtime names),
  `minijax/compiler.py` (compile, buffers), `minijax/interpreters/pxla.py` (executors) and the
  Mosaic package `minijax/experimental/pallas/mosaic/` (Pallas kernels lowered to Mosaic's
  dialects; `jaxlib.mlir` and `jaxlib.mosaic` only, never `jax`);
- a function-level import of a minijax module is a last resort: at most `MAX_LOCAL_IMPORTS`
  of them, and each one carries a comment on its line (or the line above) saying why it cannot
  sit at the top of the file.

JAX keeps the same discipline (`jax/_src/core.py` knows nothing of arrays or lowering) and
explains its own local imports in comments.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "minijax"
DOORS = {"minijax.interpreters.mlir", "minijax.xla_bridge", "minijax.compiler",
         "minijax.interpreters.pxla"}
MOSAIC_DOOR = "minijax.experimental.pallas.mosaic"  # jaxlib.mlir and jaxlib.mosaic only
MOSAIC_ALLOWED = ("jaxlib.mlir", "jaxlib.mosaic")
BACKEND = ("jax", "jaxlib")
MAX_LOCAL_IMPORTS = 60


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
PACKAGES = {name for name, p in MODULES.items() if p.name == "__init__.py"}


def _resolve(importer: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = importer.split(".")
    if importer not in PACKAGES:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imported_modules(importer: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The modules an import statement runs, minijax or not (`from m import sub` runs `m.sub`)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = _resolve(importer, node)
    subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES]
    return [base] + subs


class _Imports(ast.NodeVisitor):
    """Collects (node, inside_function) for every import statement of one file."""

    def __init__(self) -> None:
        self.found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []
        self.depth = 0

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_Lambda = visit_FunctionDef

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        self.found.append((node, self.depth > 0))

    visit_ImportFrom = visit_Import

    def visit_If(self, node: ast.If) -> None:
        # `if TYPE_CHECKING:` imports never run.
        if isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            return
        self.generic_visit(node)


def scan() -> dict[str, tuple[list[tuple[ast.AST, bool]], list[str]]]:
    out = {}
    for name, path in MODULES.items():
        source = path.read_text()
        visitor = _Imports()
        visitor.visit(ast.parse(source))
        out[name] = (visitor.found, source.splitlines())
    return out


SCAN = scan()


def _with_parents(target: str) -> list[str]:
    """`a.b.c` runs `a`, `a.b` and `a.b.c`: the minijax ones among them."""
    parts = target.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)
            if ".".join(parts[:i]) in MODULES]


def module_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, (found, _) in SCAN.items():
        for node, local in found:
            if local:
                continue
            for target in imported_modules(name, node):
                for dep in _with_parents(target):
                    # A package's __init__ runs before any of its submodules: an edge from a
                    # submodule up to a package that contains it is no cycle.
                    if dep == name or name.startswith(dep + "."):
                        continue
                    graph[name].add(dep)
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return components


def real_cycles() -> list[list[str]]:
    return find_cycles(module_graph())


def _allowed(importer: str, target: str) -> bool:
    if importer in DOORS:
        return True
    if importer == MOSAIC_DOOR or importer.startswith(MOSAIC_DOOR + "."):
        return any(target == a or target.startswith(a + ".") for a in MOSAIC_ALLOWED)
    return False


def backend_imports() -> list[str]:
    bad = []
    for name, (found, lines) in SCAN.items():
        for node, _ in found:
            for target in imported_modules(name, node):
                if target.split(".")[0] in BACKEND and not _allowed(name, target):
                    bad.append(f"{MODULES[name].relative_to(ROOT)}:{node.lineno}: "
                               f"{lines[node.lineno - 1].strip()}")
    return bad


def local_imports() -> list[tuple[str, int, bool]]:
    """(file, line, has_reason) for each function-level import of a minijax module."""
    out = []
    for name, (found, lines) in SCAN.items():
        for node, local in found:
            if not local:
                continue
            targets = imported_modules(name, node)
            if not any(t == "minijax" or t.startswith("minijax.") for t in targets):
                continue
            line = lines[node.lineno - 1]
            above = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
            end = lines[node.end_lineno - 1]
            has_reason = "#" in line or "#" in end or above.startswith("#")
            out.append((str(MODULES[name].relative_to(ROOT)), node.lineno, has_reason))
    return out


def test_no_module_level_import_cycle():
    cycles = real_cycles()
    assert not cycles, "module-level import cycles in minijax/: " + "; ".join(
        " <-> ".join(c) for c in cycles)


def test_backend_only_through_the_doors():
    bad = backend_imports()
    assert not bad, ("JAX/jaxlib imported outside minijax/interpreters/mlir.py, "
                     "minijax/xla_bridge.py, minijax/compiler.py, minijax/interpreters/pxla.py "
                     "and (jaxlib.mlir, jaxlib.mosaic only) "
                     "minijax/experimental/pallas/mosaic/:\n" + "\n".join(bad))


def test_the_mosaic_door_admits_jaxlib_mlir_only():
    mosaic = MOSAIC_DOOR + ".lowering"
    assert _allowed(mosaic, "jaxlib.mlir.dialects.arith")
    assert _allowed(mosaic, "jaxlib.mosaic.python.tpu")
    assert not _allowed(mosaic, "jax._src.pallas.mosaic.lowering")
    assert not _allowed("minijax.experimental.pallas.pallas_call", "jaxlib.mlir")


def test_function_level_imports_are_few_and_explained():
    found = local_imports()
    unexplained = [f"{f}:{n}" for f, n, ok in found if not ok]
    assert not unexplained, ("function-level imports without a comment saying why they cannot "
                             "be at the top:\n" + "\n".join(unexplained))
    assert len(found) <= MAX_LOCAL_IMPORTS, (
        f"{len(found)} function-level imports of minijax modules (at most {MAX_LOCAL_IMPORTS})")


def test_core_imports_nothing_above_itself():
    allowed = {"minijax.config", "minijax.dtypes", "minijax.effects", "minijax.util",
               "minijax.tree_util", "minijax.errors", "minijax"}
    found, _ = SCAN["minijax.core"]
    used = {t for node, _ in found for t in imported_modules("minijax.core", node)
            if t.startswith("minijax")}
    assert used <= allowed, f"core imports {sorted(used - allowed)}"


# The checks themselves must be able to fail: run them on small made-up sources.
@pytest.mark.parametrize("edges,expected", [
    ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
    ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
])
def test_find_cycles_on_small_graphs(edges, expected):
    assert find_cycles(edges) == expected


def test_the_scanner_sees_local_imports_and_comments():
    visitor = _Imports()
    visitor.visit(ast.parse("import numpy\ndef f():\n    from minijax import core\n"))
    assert [(type(n).__name__, local) for n, local in visitor.found] == [
        ("Import", False), ("ImportFrom", True)]
