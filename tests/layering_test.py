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
  sit at the top of the file;
- imports go down the floors (`FLOORS`: foundations, interpreters, compile and jit, lax, numpy,
  api, the surface), at the top of a file or inside a function; the few that go up are listed
  in `UPWARD_ALLOWED`, each with its reason;
- the import knot, the largest set of modules that all reach each other through their imports
  (function-level ones included), has at most `KNOT_MAX` modules (issue 46: it had 50 while
  the foundations asked `compiler.py` which backend, and lax reached up into api and numpy).

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
MAX_LOCAL_IMPORTS = 40  # 53 before issue 46, 30 after
KNOT_MAX = 25  # the floor it reached (issue 46); the interpreters, lax and the runtime

# The floors of minijax, bottom up (the README's "Where to read", chapters/LAYOUT.md): a module
# may import a module on its own floor or below. A module belongs to the floor of the longest
# name here that it is or sits under; one named nowhere is on the surface, the top floor.
FLOORS = (
    ("foundations", ("minijax.config", "minijax.dtypes", "minijax.util", "minijax.tree_util",
                     "minijax.effects", "minijax.traceback_util", "minijax.monitoring",
                     "minijax.version", "minijax._unimplemented", "minijax.xla_bridge",
                     "minijax.mesh", "minijax.partition_spec", "minijax.named_sharding",
                     "minijax.sharding_impls", "minijax.core", "minijax.errors",
                     "minijax.ad_util", "minijax.api_util", "minijax._tree_fastpath")),
    ("interpreters", ("minijax.interpreters", "minijax.array")),
    ("compile and jit", ("minijax.compiler", "minijax.interpreters.pxla", "minijax.stages",
                         "minijax.pjit", "minijax.dispatch")),
    ("lax", ("minijax.lax", "minijax.prng")),  # prng: the key primitives, on lax
    ("numpy", ("minijax.numpy", "minijax.custom_derivatives", "minijax.custom_batching",
               "minijax.shard_map")),
    ("api", ("minijax.api",)),
)
SURFACE = len(FLOORS)

# (importer, imported module or package) -> why it goes up a floor; each is inside a function.
UPWARD_ALLOWED = {
    ("minijax.array", "minijax.compiler"):
        "an Array made on the host is put on the device when first used (compiler's buffers)",
    ("minijax.interpreters.batching", "minijax.lax"):
        "moving, broadcasting and reshaping a batch axis binds lax's primitives",
    ("minijax.interpreters.partial_eval", "minijax.dispatch"):
        "a value moved to another memory splits into a device_put_p equation (as in JAX)",
    ("minijax.numpy.array_constructors", "minijax.api"): "fromfunction is vmap, per dimension",
    ("minijax.numpy.lax_numpy", "minijax.api"): "apply_along_axis is vmap of func1d",
    ("minijax.numpy.vectorize", "minijax.api"): "vectorize is vmap over the loop dimensions",
}


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


def module_graph(with_local: bool = False) -> dict[str, set[str]]:
    """Module -> the minijax modules its imports run: at the top of the file, and with
    `with_local` inside functions too."""
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, (found, _) in SCAN.items():
        for node, local in found:
            if local and not with_local:
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


def import_knot() -> list[str]:
    """The largest strongly connected component of the import graph, function-level imports
    counted: the modules none of which can be read (or loaded) without all the others."""
    return max(find_cycles(module_graph(with_local=True)), key=len, default=[])


def floor_of(module: str) -> int:
    best, floor = "", SURFACE
    for i, (_, names) in enumerate(FLOORS):
        for n in names:
            if (module == n or module.startswith(n + ".")) and len(n) > len(best):
                best, floor = n, i
    return floor


def _floor_name(module: str) -> str:
    return FLOORS[floor_of(module)][0] if floor_of(module) < SURFACE else "surface"


def upward_imports() -> list[tuple[str, str, int]]:
    """(importer, imported, line) for each import of a minijax module on a higher floor."""
    out = []
    for name, (found, _) in SCAN.items():
        for node, _local in found:
            for target in imported_modules(name, node):
                if target not in MODULES or target == "minijax" or name.startswith(target + "."):
                    continue
                if floor_of(target) > floor_of(name):
                    out.append((name, target, node.lineno))
    return out


def _upward_allowance(importer: str, target: str) -> tuple[str, str] | None:
    for key in UPWARD_ALLOWED:
        if importer == key[0] and (target == key[1] or target.startswith(key[1] + ".")):
            return key
    return None


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


def test_imports_go_down_the_floors():
    bad = [f"{MODULES[i].relative_to(ROOT)}:{n}: {i} ({_floor_name(i)}) imports {t} "
           f"({_floor_name(t)})" for i, t, n in upward_imports() if not _upward_allowance(i, t)]
    assert not bad, ("imports up a floor (tests/layering_test.py FLOORS; list one in "
                     "UPWARD_ALLOWED, with its reason, only if it cannot go):\n" + "\n".join(bad))


def test_upward_allowances_are_used_and_local():
    used = {_upward_allowance(i, t) for i, t, _ in upward_imports()}
    stale = sorted(set(UPWARD_ALLOWED) - used)
    assert not stale, f"UPWARD_ALLOWED entries no import needs any more: {stale}"
    local = {(name, node.lineno) for name, (found, _) in SCAN.items()
             for node, is_local in found if is_local}
    top = [f"{i}:{n} -> {t}" for i, t, n in upward_imports() if (i, n) not in local]
    assert not top, f"an allowed upward import at the top of a file (a module-level cycle): {top}"


def test_the_import_knot_is_small():
    knot = import_knot()
    assert len(knot) <= KNOT_MAX, (
        f"the import knot has {len(knot)} modules (at most {KNOT_MAX}): {', '.join(knot)}")


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


def test_floors_by_longest_name():
    assert floor_of("minijax.core") == 0
    assert floor_of("minijax.interpreters.ad") == 1
    assert floor_of("minijax.interpreters.pxla") == 2  # longer than minijax.interpreters
    assert floor_of("minijax.lax.control_flow.loops") == 3
    assert floor_of("minijax.experimental.pallas") == SURFACE
    assert floor_of("minijax.coreutils") == SURFACE  # a name, not a prefix of characters


def test_the_scanner_sees_local_imports_and_comments():
    visitor = _Imports()
    visitor.visit(ast.parse("import numpy\ndef f():\n    from minijax import core\n"))
    assert [(type(n).__name__, local) for n, local in visitor.found] == [
        ("Import", False), ("ImportFrom", True)]
