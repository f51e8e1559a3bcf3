"""Pictures: a jaxpr as a data-flow graph, and the chain of traces a `bind` would walk.

Both functions return Graphviz DOT source (plain text, no dependency); `render` turns DOT into
an SVG or PNG file with the `dot` program. JAX has no drawing code of its own: it prints jaxprs
as text (jax/_src/core.py pp_jaxpr) and lists the active traces with
jax/_src/core.py unsafe_get_trace_stack. Taught in chapters/03-jaxprs.md (jaxpr pictures) and
chapters/02-tracing.md (the trace chain).
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
from pathlib import Path

from minijax import core
from minijax.core import ClosedJaxpr, DropVar, Jaxpr, JaxprEqn, Literal, Var

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
    def __init__(self, jaxpr: Jaxpr) -> None:
        # Name variables exactly as the text printer does (run it once and keep its names),
        # so the picture and `print(jaxpr)` agree letter for letter.
        self.names = core.NameContext()
        core.pp_jaxpr(jaxpr, self.names)
        self.ids = itertools.count()
        self.var_node: dict[Var, str] = {}
        self.lines: list[str] = []

    def node(self, label: str, indent: str, **attrs) -> str:
        nid = f"n{next(self.ids)}"
        extra = "".join(f" {k}={_quote(v)}" for k, v in attrs.items())
        self.lines.append(f"{indent}{nid} [label={_quote(label)}{extra}];")
        return nid

    def edge(self, src: str, dst: str, indent: str, **attrs) -> None:
        extra = "".join(f" {k}={_quote(v)}" for k, v in attrs.items())
        self.lines.append(f"{indent}{src} -> {dst}{' [' + extra.strip() + ']' if extra else ''};")

    def var(self, v: Var, indent: str, **attrs) -> str:
        nid = self.var_node.get(v)
        if nid is None:
            label = "_" if isinstance(v, DropVar) else f"{self.names(v)}:{v.aval.str_short()}"
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
            nid = self.node(_eqn_label(eqn, self.names), indent, shape="box",
                            style="rounded,filled", fillcolor="#fff4d0")
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


def jaxpr_to_dot(jaxpr: Jaxpr | ClosedJaxpr, name: str = "jaxpr") -> str:
    """Graphviz DOT source drawing `jaxpr` as a data-flow graph.

    Variables are ellipses labelled as the printer names them (`a:f32[3]`; inputs blue,
    constvars grey), equations are boxes with the primitive's name and params, literals are
    plain text, and edges follow the data (numbered where an equation has several operands).
    Jaxprs nested in params (jit's `jaxpr`, cond's `branches`, scan's `jaxpr`) are drawn as
    dashed clusters, with a dashed edge from the equation that holds them.

    Args:
      jaxpr: a `Jaxpr` or `ClosedJaxpr` (e.g. what `minijax.make_jaxpr(f)(x)` returns).
      name: the graph's name.
    Returns: the DOT text (a `str`); see `render` to draw it.
    """
    inner = jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr
    w = _DotWriter(inner)
    w.jaxpr(inner, "  ")
    head = [f"digraph {_quote(name)} {{", "  compound=true;", "  rankdir=TB;",
            '  node [fontname="monospace" fontsize=11];',
            '  edge [fontname="monospace" fontsize=9];']
    return "\n".join(head + w.lines + ["}"]) + "\n"


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
# Rendering
# ---------------------------------------------------------------------------------------------

def render(graph: Jaxpr | ClosedJaxpr | str, path: str | Path, format: str = "svg") -> Path:
    """Draw a jaxpr (or DOT source, e.g. from `trace_stack_to_dot`) into `path` with `dot`.

    Args:
      graph: a `Jaxpr`, a `ClosedJaxpr`, or DOT text.
      path: the file to write; its parent directories are created.
      format: 'svg' or 'png'.
    Returns: `path` as a `Path`.
    Raises: ValueError for another format; RuntimeError if the Graphviz `dot` program is not
      installed (the message says how to install it).
    """
    if format not in ("svg", "png"):
        raise ValueError(f"render: format must be 'svg' or 'png', got {format!r}")
    source = graph if isinstance(graph, str) else jaxpr_to_dot(graph)
    if shutil.which("dot") is None:
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
    path.write_bytes(data)
    return path
