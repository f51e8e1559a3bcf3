"""Pictures: jaxprs as data-flow graphs, the chain of traces a `bind` would walk, a pytree
flattened, and the structure of Threefry-2x32.

Every function returns Graphviz DOT source (plain text, no dependency); `render` turns DOT into
an SVG or PNG file with the `dot` program. JAX has no drawing code of its own: it prints jaxprs
as text (jax/_src/core.py pp_jaxpr) and lists the active traces with
jax/_src/core.py unsafe_get_trace_stack. Taught in chapters/03-jaxprs.md (jaxpr pictures) and
chapters/02-tracing.md (the trace chain); chapters 04-06, 08 and 10 draw their transformed
jaxprs, pytrees and Threefry with it.
"""

from __future__ import annotations

import hashlib
import itertools
import shutil
import subprocess
from pathlib import Path
from typing import Any, Callable, Sequence

from minijax import core, prng, tree_util
from minijax.core import ClosedJaxpr, Jaxpr, JaxprEqn, Literal, Var

_INSTALL_HINT = ("install Graphviz, which provides it: `apt-get install graphviz` (Debian/"
                 "Ubuntu), `brew install graphviz` (macOS) or `conda install graphviz`")

# ---------------------------------------------------------------------------------------------
# Jaxprs as graphs
# ---------------------------------------------------------------------------------------------


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _sub_jaxprs(eqn: JaxprEqn) -> list[tuple[str, Jaxpr, list]]:
    """(label, jaxpr, consts) for every jaxpr in the equation's params, e.g. jit's `jaxpr` or
    cond's `branches[0]`, `branches[1]`."""
    out = []
    for key in sorted(eqn.params):
        p = eqn.params[key]
        items = p if isinstance(p, tuple) else (p,)
        for i, item in enumerate(items):
            if isinstance(item, (Jaxpr, ClosedJaxpr)):
                label = f"{key}[{i}]" if isinstance(p, tuple) else key
                jaxpr = item.jaxpr if isinstance(item, ClosedJaxpr) else item
                consts = item.consts if isinstance(item, ClosedJaxpr) else []
                out.append((label, jaxpr, consts))
    return out


def _eqn_label(eqn: JaxprEqn, names) -> str:
    """`name` plus one `key=value` line per param that the printer shows (jaxprs excepted)."""
    hidden = core.hidden_params(eqn)
    fmt = eqn.primitive.pp_param_formatters
    lines = [eqn.primitive.name]
    for k in sorted(eqn.params):
        v = eqn.params[k]
        if k in hidden or core.jaxprs_in_param(v):
            continue
        text = fmt[k](v) if k in fmt else core.pp_param(v, names, 0)
        lines.append(f"{k}={text if len(text) <= 40 else text[:37] + '...'}")
    return "\n".join(lines)


class _DotWriter:
    def __init__(self, jaxpr: Jaxpr, prefix: str = "n", marked_inputs: Sequence[int] = (),
                 mark_color: str = "#ffd6d6", eqn_color: Callable | None = None) -> None:
        # Name variables exactly as the text printer does (run it once and keep its names),
        # so the picture and `print(jaxpr)` agree letter for letter.
        self.names = core.NameContext()
        core.pp_toplevel_jaxpr(jaxpr, self.names)
        self.prefix = prefix
        self.ids = itertools.count()
        self.var_node: dict[Var, str] = {}
        self.lines: list[str] = []
        # values that depend on the marked inputs (found by following the data), and their color
        self.marked: set[Var] = {jaxpr.invars[i] for i in marked_inputs}
        self.mark_color = mark_color
        self.eqn_color = eqn_color

    def node(self, label: str, indent: str, **attrs) -> str:
        nid = f"{self.prefix}{next(self.ids)}"
        extra = "".join(f" {k}={_quote(v)}" for k, v in attrs.items())
        self.lines.append(f"{indent}{nid} [label={_quote(label)}{extra}];")
        return nid

    def edge(self, src: str, dst: str, indent: str, **attrs) -> None:
        extra = "".join(f" {k}={_quote(v)}" for k, v in attrs.items())
        self.lines.append(f"{indent}{src} -> {dst}{' [' + extra.strip() + ']' if extra else ''};")

    def var(self, v: Var, indent: str, **attrs) -> str:
        nid = self.var_node.get(v)
        if nid is None:
            name = self.names(v)
            label = "_" if name == "_" else f"{name}:{v.aval.str_short()}"
            if v in self.marked:
                attrs.update(style="filled", fillcolor=self.mark_color)
            nid = self.var_node[v] = self.node(label, indent, shape="ellipse", **attrs)
        return nid

    def atom(self, a, indent: str) -> str:
        """The node an atom is read from; a literal gets a fresh small node at each use."""
        if isinstance(a, Literal):
            return self.node(core.pp_literal(a), indent, shape="plaintext", fontsize="10")
        return self.var(a, indent)

    def jaxpr(self, jaxpr: Jaxpr, indent: str) -> tuple[str, str | None]:
        """Emit the nodes and edges of one jaxpr; returns (its output node, its first node)."""
        first = None
        for v in jaxpr.constvars:
            nid = self.var(v, indent, style="filled", fillcolor="#e8e8e8")
            first = first or nid
        for v in jaxpr.invars:
            nid = self.var(v, indent, style="filled", fillcolor="#d8ecff")
            first = first or nid
        for eqn in jaxpr.eqns:
            color = self.eqn_color(eqn) if self.eqn_color else None
            if any(isinstance(a, Var) and a in self.marked for a in eqn.invars):
                self.marked.update(eqn.outvars)
                color = color or self.mark_color
            nid = self.node(_eqn_label(eqn, self.names), indent, shape="box",
                            style="rounded,filled", fillcolor=color or "#fff4d0")
            first = first or nid
            for i, a in enumerate(eqn.invars):
                attrs = {"label": str(i)} if len(eqn.invars) > 1 else {}
                self.edge(self.atom(a, indent), nid, indent, **attrs)
            for label, sub, _ in _sub_jaxprs(eqn):
                cluster = f"cluster_{next(self.ids)}"
                self.lines.append(f"{indent}subgraph {cluster} {{")
                inner = indent + "  "
                self.lines.append(f"{inner}label={_quote(f'{eqn.primitive.name}: {label}')};")
                self.lines.append(f'{inner}style="dashed"; color="#888888";')
                _, sub_first = self.jaxpr(sub, inner)
                self.lines.append(f"{indent}}}")
                self.edge(nid, sub_first, indent, lhead=cluster, style="dashed",
                          arrowhead="odot")
            for v in eqn.outvars:
                self.edge(nid, self.var(v, indent), indent)
        out = self.node("out", indent, shape="plaintext")
        for i, a in enumerate(jaxpr.outvars):
            attrs = {"label": str(i)} if len(jaxpr.outvars) > 1 else {}
            self.edge(self.atom(a, indent), out, indent, **attrs)
        return out, first or out


_HEAD = ["  compound=true;", "  rankdir=TB;", '  node [fontname="monospace" fontsize=11];',
         '  edge [fontname="monospace" fontsize=9];']


def jaxpr_to_dot(jaxpr: Jaxpr | ClosedJaxpr, name: str = "jaxpr", *,
                 marked_inputs: Sequence[int] = (), mark_color: str = "#ffd6d6",
                 eqn_color: Callable[[JaxprEqn], str | None] | None = None) -> str:
    """Graphviz DOT source drawing `jaxpr` as a data-flow graph.

    Variables are ellipses labelled as the printer names them (`a:f32[3]`; inputs blue,
    constvars grey), equations are boxes with the primitive's name and params, literals are
    plain text, and edges follow the data (numbered where an equation has several operands).
    Jaxprs nested in params (jit's `jaxpr`, cond's `branches`, scan's `jaxpr`) are drawn as
    dashed clusters, with a dashed edge from the equation that holds them.

    Args:
      jaxpr: a `Jaxpr` or `ClosedJaxpr` (e.g. what `minijax.make_jaxpr(f)(x)` returns).
      name: the graph's name.
      marked_inputs: positions of invars whose data flow is filled with `mark_color`: those
        inputs, and every equation and variable of the outer jaxpr that depends on them
        (e.g. the tangent inputs of a jvp).
      eqn_color: optional `eqn -> color or None`, a fill color per outer equation.
    Returns: the DOT text (a `str`); see `render` to draw it.
    """
    inner = jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr
    w = _DotWriter(inner, "n", marked_inputs, mark_color, eqn_color)
    w.jaxpr(inner, "  ")
    return "\n".join([f"digraph {_quote(name)} {{"] + _HEAD + w.lines + ["}"]) + "\n"


def jaxprs_to_dot(panels: Sequence[tuple], name: str = "jaxprs") -> str:
    """Several jaxprs side by side, each in a cluster with a title: DOT source.

    Args:
      panels: `(title, jaxpr)` or `(title, jaxpr, marked_inputs)` tuples, left to right;
        `marked_inputs` as in `jaxpr_to_dot` (e.g. the tangent input of a linear jaxpr and
        the cotangent input of its transpose).
      name: the graph's name.
    Returns: the DOT text.
    """
    lines = []
    for k, (title, jaxpr, *marked) in enumerate(panels):
        inner = jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr
        w = _DotWriter(inner, f"p{k}n", marked[0] if marked else ())
        w.jaxpr(inner, "    ")
        lines += [f"  subgraph cluster_panel{k} {{", f"    label={_quote(title)};",
                  '    labelloc="t"; fontname="sans-serif"; color="#bbbbbb";'] + w.lines + ["  }"]
    return "\n".join([f"digraph {_quote(name)} {{"] + _HEAD + lines + ["}"]) + "\n"


# ---------------------------------------------------------------------------------------------
# The trace context as a graph
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/core.py unsafe_get_trace_stack — differs: stops at a trace with no parent_trace
def trace_stack(trace: core.Trace | None = None) -> list[core.Trace]:
    """The current trace (or `trace`) and the traces below it, bottom first.

    Each interpreter trace keeps the trace it was started under as `parent_trace`; following
    those links from `core.trace_ctx.trace` gives the chain a primitive may travel down. A
    `DynamicJaxprTrace` keeps no parent (values from outside become constants of its jaxpr),
    so the chain ends there; otherwise it ends at the `EvalTrace`.
    """
    trace = core.current_trace() if trace is None else trace
    chain = [trace]
    while getattr(chain[-1], "parent_trace", None) is not None:
        chain.append(chain[-1].parent_trace)
    return chain[::-1]


def trace_stack_to_dot(trace: core.Trace | None = None) -> str:
    """Graphviz DOT source for `trace_stack(trace)`: one box per trace, top of the chain first,
    each with an edge to its `parent_trace`. Call it inside a transformed function to see the
    traces active at that point."""
    chain = trace_stack(trace)[::-1]
    lines = ['digraph "traces" {', "  rankdir=TB;",
             '  node [shape=box style="rounded,filled" fontname="monospace" fontsize=11];',
             '  edge [fontname="monospace" fontsize=9];']
    current = core.current_trace()
    for i, t in enumerate(chain):
        label = type(t).__name__
        phrase = t.describe().strip()
        if phrase:
            label += "\n" + phrase
        if t is current:
            label += "\n(current: trace_ctx.trace)"
        if t is core.eval_trace:
            label += "\n(evaluates with numpy / XLA)"
        elif i == len(chain) - 1:
            label += "\n(no parent_trace: outer values become constants)"
        color = "#fff4d0" if t is current else "#e8e8e8"
        lines.append(f"  t{i} [label={_quote(label)} fillcolor={_quote(color)}];")
        if i:
            lines.append(f'  t{i - 1} -> t{i} [label="parent_trace"];')
    return "\n".join(lines + ["}"]) + "\n"


# ---------------------------------------------------------------------------------------------
# Pytrees and Threefry
# ---------------------------------------------------------------------------------------------

def _leaf_summary(x: Any) -> str:
    try:
        return core.get_aval(x).str_short()
    except TypeError:
        return type(x).__name__


def pytree_to_dot(tree: Any, name: str = "pytree") -> str:
    """DOT source for what `tree_flatten(tree)` sees and returns.

    On the left the tree: one box per container node (its type, and its aux data such as a
    dict's sorted keys), edges labelled with the key or position of each child, and one
    ellipse per leaf (`leaf i: f32[3]`). On the right the two results of `tree_flatten`: the
    list of leaves, in the order the walk meets them, and the treedef as it prints. The
    treedef keeps everything but the leaves; `tree_unflatten(treedef, leaves)` rebuilds the
    tree. Mirrors nothing in JAX (its treedefs live in C++: jaxlib's pytree.cc).
    """

    leaves, treedef = tree_util.tree_flatten(tree)
    lines = [f"digraph {_quote(name)} {{", "  rankdir=TB;",
             '  node [fontname="monospace" fontsize=11];',
             '  edge [fontname="monospace" fontsize=9];']
    ids = itertools.count()
    counter = itertools.count()

    def walk(td) -> str:
        nid = f"t{next(ids)}"
        if td.node_type is None:
            k = next(counter)
            label = f"leaf {k}: {_leaf_summary(leaves[k])}"
            lines.append(f'  {nid} [label={_quote(label)} shape="ellipse" style="filled" '
                         f'fillcolor="#d8ecff"];')
            lines.append(f"  {nid} -> leaves:l{k} [style=dashed color=\"#888888\"];")
            return nid
        _, data = td.node_data()
        data = tuple(data) if isinstance(data, list) else data  # a dict's keys
        children = td.children()
        label = td.node_type.__name__ + ("" if data is None else f"\n{data!r}")
        lines.append(f'  {nid} [label={_quote(label)} shape="box" style="rounded,filled" '
                     f'fillcolor="#fff4d0"];')
        keys = data if isinstance(data, tuple) and len(data) == len(children) else None
        for i, child in enumerate(children):
            edge = repr(keys[i]) if keys else str(i)
            lines.append(f"  {nid} -> {walk(child)} [label={_quote(edge)}];")
        return nid

    walk(treedef)
    cells = "|".join(f"<l{k}> {k}: {_leaf_summary(x)}" for k, x in enumerate(leaves))
    lines.append(f'  leaves [shape="record" label={_quote("leaves|" + cells)}];')
    lines.append(f'  treedef [shape="note" label={_quote("treedef: " + str(treedef))}];')
    lines.append("  { rank=sink; leaves; treedef; }")
    return "\n".join(lines + ["}"]) + "\n"


def threefry_to_dot(name: str = "threefry2x32") -> str:
    """DOT source for the structure of minijax's Threefry-2x32 (minijax/prng.py
    threefry2x32): the key schedule, then five blocks of four rounds, each block followed by
    a key injection; the rotation distances are read from `prng._ROTATIONS`, so the picture
    shows what the code does. One round: `x1 += x2; x2 = rotl(x2, r) ^ x1`."""

    first = "x1 += ks[0]\nx2 += ks[1]"
    schedule = f"key (k0, k1)\nks = (k0, k1, k0 ^ k1 ^ {int(prng._KS_PARITY):#x})"
    lines = [f"digraph {_quote(name)} {{", "  rankdir=TB;",
             '  node [fontname="monospace" fontsize=11 shape="box" style="rounded,filled"];',
             '  edge [fontname="monospace" fontsize=9];',
             f'  key [label={_quote(schedule)} fillcolor="#e8e8e8"];',
             '  x [label="counter (x1, x2)" fillcolor="#d8ecff"];',
             f'  inject0 [label={_quote(first)} fillcolor="#ffd6d6"];',
             "  key -> inject0; x -> inject0;"]
    prev = "inject0"
    for block in range(5):
        rot = prng._ROTATIONS[block % 2]
        label = (f"block {block + 1}: 4 rounds\nrotl by {', '.join(map(str, rot))}\n"
                 "(x1 += x2; x2 = rotl(x2, r) ^ x1)")
        lines.append(f'  b{block} [label={_quote(label)} fillcolor="#fff4d0"];')
        i, j = (block + 1) % 3, (block + 2) % 3
        inj = f"x1 += ks[{i}]\nx2 += ks[{j}] + {block + 1}"
        lines.append(f'  i{block} [label={_quote(inj)} fillcolor="#ffd6d6"];')
        lines.append(f"  {prev} -> b{block}; b{block} -> i{block};")
        lines.append(f'  key -> i{block} [style=dashed color="#888888"];')
        prev = f"i{block}"
    lines.append('  out [label="output (x1, x2): 64 random bits" fillcolor="#d8ecff"];')
    lines.append(f"  {prev} -> out;")
    return "\n".join(lines + ["}"]) + "\n"


# ---------------------------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------------------------

def dot_available() -> bool:
    """Whether Graphviz's `dot` program is on the PATH, so that `render` can draw.

    The DOT source functions above need no program; only `render` does. A chapter draws its
    pictures when this is true and otherwise keeps the committed ones, printing the same either
    way. JAX has no counterpart (it draws nothing).
    """
    return shutil.which("dot") is not None


def render(graph: Jaxpr | ClosedJaxpr | str, path: str | Path, format: str = "svg") -> Path:
    """Draw a jaxpr (or DOT source, e.g. from `trace_stack_to_dot`) into `path` with `dot`.

    Args:
      graph: a `Jaxpr`, a `ClosedJaxpr`, or DOT text.
      path: the file to write; its parent directories are created.
      format: 'svg' or 'png'.
    Returns: `path` as a `Path`. An SVG carries a comment with the hash of its DOT source.
    Raises: ValueError for another format; RuntimeError if the Graphviz `dot` program is not
      installed (the message says how to install it).
    """
    if format not in ("svg", "png"):
        raise ValueError(f"render: format must be 'svg' or 'png', got {format!r}")
    source = graph if isinstance(graph, str) else jaxpr_to_dot(graph)
    if not dot_available():
        raise RuntimeError("render needs the Graphviz `dot` program, which is not on the PATH; "
                           + _INSTALL_HINT + ". `jaxpr_to_dot` works without it.")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        import graphviz
    except ImportError:
        data = subprocess.run(["dot", f"-T{format}"], input=source.encode(), check=True,
                              capture_output=True).stdout
    else:
        data = graphviz.Source(source).pipe(format=format)
    if format == "svg":  # a stamp of the DOT source, so a stale picture can be detected
        data = data.replace(b"<svg ", f"<!-- {SOURCE_STAMP}{source_digest(source)} -->\n<svg "
                            .encode(), 1)
    path.write_bytes(data)
    return path


SOURCE_STAMP = "minijax.viz DOT source sha256: "


def source_digest(source: str) -> str:
    """The hash `render` writes into an SVG: the same DOT text gives the same picture, whatever
    Graphviz version drew it (tests/chapters/chapters_test.py compares these)."""
    return hashlib.sha256(source.encode()).hexdigest()
