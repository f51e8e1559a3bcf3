"""minijax.viz: jaxprs and the trace chain as Graphviz DOT, and rendering with `dot`."""

import shutil

import numpy as np
import pytest

import minijax
import minijax.numpy as jnp
from minijax import core, lax, viz
from minijax.interpreters import ad, batching


def _nested_jaxpr():
    def f(x):
        y = minijax.jit(lambda z: jnp.sin(z) * 2.0)(x)
        return lax.cond(y.sum() > 0, lambda a: a + 1.0, lambda a: jnp.exp(a), y)
    return minijax.make_jaxpr(f)(np.ones(3, np.float32))


def test_dot_names_every_primitive_and_variable_as_printed():
    closed = _nested_jaxpr()
    dot = viz.jaxpr_to_dot(closed)
    assert dot.startswith('digraph "jaxpr" {') and dot.rstrip().endswith("}")
    eqns = []
    stack = [closed.jaxpr]
    while stack:
        j = stack.pop()
        for e in j.eqns:
            eqns.append(e)
            for p in e.params.values():
                stack.extend(core.jaxprs_in_param(p))
    names = {e.primitive.name for e in eqns}
    assert {"jit", "sin", "mul", "reduce_sum", "gt", "cond", "add", "exp"} <= names
    for name in names:
        assert f'label="{name}' in dot, name
    # one cluster per nested jaxpr: jit's jaxpr and cond's two branches
    assert dot.count("subgraph cluster_") == 3
    assert 'label="cond: branches[1]"' in dot
    # variables carry the printer's names and types
    text = str(closed)
    assert "a:f32[3]" in text and 'label="a:f32[3]"' in dot
    assert 'label="2.0:f32[]"' in dot  # a literal


def test_dot_of_closed_jaxpr_with_consts_and_dropvars():
    c = np.arange(3.0, dtype=np.float32)
    closed = minijax.make_jaxpr(lambda x: x * c)(np.ones(3, np.float32))
    assert len(closed.jaxpr.constvars) == 1
    dot = viz.jaxpr_to_dot(closed)
    assert 'fillcolor="#e8e8e8"' in dot  # the constvar node
    j = minijax.make_jaxpr(lambda x: lax.sort_key_val(x, x)[0])(np.ones(3, np.float32))
    assert 'label="_"' in viz.jaxpr_to_dot(j)


def test_trace_stack_follows_parent_traces():
    seen = []

    def f(x):
        seen.append(viz.trace_stack())
        seen.append(viz.trace_stack_to_dot())
        return jnp.sin(x)

    minijax.vmap(minijax.grad(f))(jnp.ones(3))
    stack, dot = seen
    assert [type(t) for t in stack[:2]] == [core.EvalTrace, batching.BatchTrace]
    # grad's trace on top: LinearizeTrace on the direct path, JVPTrace (over a JaxprTrace) on
    # the classic one
    direct = minijax.config.jax_use_direct_linearize
    assert type(stack[-1]) is (ad.LinearizeTrace if direct else ad.JVPTrace)
    assert "current: trace_ctx.trace" in dot and "parent_trace" in dot
    assert "EvalTrace" in dot and "BatchTrace" in dot
    assert viz.trace_stack() == [core.eval_trace]  # outside any transformation


def test_trace_stack_ends_at_a_jaxpr_trace():
    seen = []

    def f(x):
        seen.append(viz.trace_stack_to_dot())
        return x

    minijax.make_jaxpr(f)(1.0)
    assert "DynamicJaxprTrace" in seen[0] and "no parent_trace" in seen[0]


@pytest.mark.parametrize("fmt", ["svg", "png"])
def test_render(tmp_path, fmt):
    closed = _nested_jaxpr()
    if shutil.which("dot") is None:
        with pytest.raises(RuntimeError, match="`dot`.*apt-get install graphviz"):
            viz.render(closed, tmp_path / f"j.{fmt}", fmt)
        pytest.skip("the Graphviz `dot` program is not installed")
    out = viz.render(closed, tmp_path / "sub" / f"j.{fmt}", fmt)
    data = out.read_bytes()
    if fmt == "svg":
        assert b"<svg" in data and b"reduce_sum" in data
        stamp = viz.SOURCE_STAMP + viz.source_digest(viz.jaxpr_to_dot(closed))
        assert stamp.encode() in data  # what the chapter test compares to spot stale pictures
    else:
        assert data.startswith(b"\x89PNG")
    out = viz.render(viz.trace_stack_to_dot(), tmp_path / f"t.{fmt}", fmt)
    assert out.stat().st_size > 0


def test_render_without_dot_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="Graphviz `dot` program.*brew install graphviz"):
        viz.render(_nested_jaxpr(), tmp_path / "j.svg")


def test_render_rejects_other_formats(tmp_path):
    with pytest.raises(ValueError, match="'svg' or 'png'"):
        viz.render(_nested_jaxpr(), tmp_path / "j.pdf", "pdf")


def _fill_of(dot: str, label: str) -> str | None:
    """The fillcolor of the (first) node whose label is exactly `label`."""
    for line in dot.splitlines():
        if f'[label="{label}"' in line:
            return line.split('fillcolor="', 1)[1].split('"', 1)[0] if "fillcolor" in line else None
    raise AssertionError(f"no node labelled {label!r}")


def test_marked_inputs_fill_what_depends_on_them():
    x = np.ones(3, np.float32)
    f = lambda x: jnp.sin(x) * x
    jaxpr = minijax.make_jaxpr(lambda x, t: minijax.jvp(f, (x,), (t,)))(x, x)
    dot = viz.jaxpr_to_dot(jaxpr, marked_inputs=[1], mark_color="#ff0000")
    assert _fill_of(dot, "sin") != "#ff0000" and _fill_of(dot, "cos") != "#ff0000"
    assert _fill_of(dot, "add_any") == "#ff0000"
    assert _fill_of(dot, "b:f32[3]") == "#ff0000" and _fill_of(dot, "a:f32[3]") != "#ff0000"
    # every equation that reads the tangent, directly or not, is filled: 4 of the 7
    eqn_fills = [line for line in dot.splitlines() if 'shape="box"' in line]
    assert sum('fillcolor="#ff0000"' in line for line in eqn_fills) == 4
    colored = viz.jaxpr_to_dot(jaxpr, eqn_color=lambda e: "#00ff00" if e.primitive.name == "cos"
                               else None)
    assert _fill_of(colored, "cos") == "#00ff00"


def test_jaxprs_side_by_side_have_distinct_nodes():
    x = np.ones(3, np.float32)
    a = minijax.make_jaxpr(jnp.sin)(x)
    b = minijax.make_jaxpr(minijax.grad(lambda v: jnp.sin(v).sum()))(x)
    dot = viz.jaxprs_to_dot([("sin", a), ("its gradient", b, [0])])
    assert dot.count("subgraph cluster_panel") == 2
    ids = [line.split()[0] for line in dot.splitlines() if "[label=" in line
           and "->" not in line]
    assert len(ids) == len(set(ids))


def test_pytree_picture_shows_jax_leaves_and_treedef():
    import jax

    tree = {"w": np.ones((2, 3), np.float32), "cfg": (1.0, None, [2, 3])}
    dot = viz.pytree_to_dot(tree)
    n = len(jax.tree_util.tree_leaves(tree))
    assert sum("leaf " in line and 'shape="ellipse"' in line for line in dot.splitlines()) == n
    _, treedef = minijax.tree_util.tree_flatten(tree)
    assert f"treedef: {treedef}".replace('"', '\\"') in dot
    assert "'cfg'" in dot and "f32[2,3]" in dot


def test_threefry_picture_uses_jax_rotations():
    import inspect

    from jax._src.random import threefry2x32

    source = inspect.getsource(threefry2x32)
    dot = viz.threefry_to_dot()
    for row in ("13, 15, 26, 6", "17, 29, 16, 24"):
        assert f"[{row}]" in source  # the rotation rows of JAX's own implementation
        assert f"rotl by {row}" in dot
    assert dot.count("block ") == 5 and "0x1bd11bda" in dot
