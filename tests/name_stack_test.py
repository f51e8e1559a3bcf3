"""Name stacks: `named_scope`, `named_call` and jit's name, recorded on equations and lowered as
op locations, which XLA keeps as each HLO instruction's `op_name` metadata.

Each program runs under JAX and minijax; the equations' name stacks are compared with JAX's
`eqn.source_info.name_stack`, the lowered module's locations with
`jax.jit(f).lower(x).as_text(debug_info=True)`, and the compiled HLO's op names with JAX's.
Printed jaxprs do not show name stacks, in either module. Mirrors tests/name_stack_test.py in
JAX.
"""

import re

import jax
import numpy as np
import pytest

import minijax

X = np.linspace(-1.0, 1.0, 3, dtype=np.float32)


def program(J):
    jnp = J.numpy

    def g(x):
        with J.named_scope("inner"):
            return jnp.sin(x) * 2

    def f(x):
        with J.named_scope("outer"):
            y = g(jnp.cos(x))
            y = J.lax.cond(y.sum() > 0, jnp.sin, jnp.cos, y)
            y = J.lax.while_loop(lambda c: c.sum() < 10, lambda c: c * 3 + 1, y)
        z = J.jit(g)(y)
        return J.named_call(lambda t: jnp.exp(t + 1), name="head")(z)
    return f


def eqn_names(J, closed):
    """(primitive, name stack) of each equation, and of those of inner jit jaxprs."""
    out = []
    for e in closed.jaxpr.eqns:
        stack = e.source_info.name_stack if J is jax else e.name_stack
        out.append((str(e.primitive), str(stack)))
        if str(e.primitive) == "jit":
            out.append(eqn_names(J, e.params["jaxpr"]))
    return out


def op_names(hlo: str) -> set[str]:
    """The op_name metadata of the HLO instructions that compute (parameters aside: JAX names
    its arguments `x`, and a loop's parameters after the file locations minijax does not
    emit), with a jit(...) in front (XLA names a few ops it makes itself without one)."""
    return {n for line in hlo.splitlines() if " parameter(" not in line
            for n in re.findall(r'op_name="([^"]*)"', line) if n.startswith("jit(")}


def test_equations_record_the_scopes_they_were_traced_in_as_jax():
    got = eqn_names(minijax, minijax.make_jaxpr(program(minijax))(X))
    want = eqn_names(jax, jax.make_jaxpr(program(jax))(X))
    assert got == want
    assert ("sin", "outer/inner") in got and ("exp", "head") in got
    assert [("sin", "inner"), ("mul", "inner")] in got  # a jit's body: names of its own


def test_printed_jaxprs_do_not_show_name_stacks():
    def plain(J):
        return lambda x: J.named_call(J.numpy.sin, name="s")(x) * 2

    def scoped(J):
        def f(x):
            with J.named_scope("a"):
                return plain(J)(x)
        return f
    got = str(minijax.make_jaxpr(scoped(minijax))(X))
    assert got == str(minijax.make_jaxpr(plain(minijax))(X)) == str(jax.make_jaxpr(scoped(jax))(X))


def test_lowered_locations_are_jaxs_name_locations():
    got = minijax.jit(program(minijax)).lower(X).as_text(debug_info=True)
    want = jax.jit(program(jax)).lower(X).as_text(debug_info=True)
    names = set(re.findall(r'loc\("(jit\([^"]*/[^"]*)"', got))
    # JAX lowers jit(g) to a function of its own whose ops' names start after `jit(g)`;
    # minijax inlines it, naming them as XLA does once it inlines JAX's call
    inlined = {n for n in names if "/jit(g)/" in n}
    assert inlined == {"jit(f)/jit(g)/inner/sin", "jit(f)/jit(g)/inner/mul"}
    assert {n.split("/jit(g)/")[1] for n in inlined} <= set(re.findall(r'loc\("([^"]*)"', want))
    assert names - inlined <= set(re.findall(r'loc\("([^"]*)"', want))
    assert 'loc("jit(f)/outer/inner/sin")' in got
    assert "loc(" not in minijax.jit(program(minijax)).lower(X).as_text()  # debug_info=False


def test_compiled_hlo_op_names_are_jaxs():
    got = op_names(minijax.jit(program(minijax)).lower(X).compile().as_text())
    want = op_names(jax.jit(program(jax)).lower(X).compile().as_text())
    assert got == want
    assert {"jit(f)/outer/inner/sin", "jit(f)/outer/cond/branch_1_fun/sin",
            "jit(f)/outer/while/body/mul", "jit(f)/jit(g)/inner/sin", "jit(f)/head/exp"} <= got


def _without_transforms(name: str) -> str:
    # JAX wraps the scopes traced under a transformation in its name: `jvp(outer)`
    while True:
        new = re.sub(r"\b(?:jvp|transpose|vmap)\(([^()]*)\)", r"\1", name)
        if new == name:
            return re.sub(r"/+", "/", name).rstrip("/")
        name = new


@pytest.mark.parametrize("transform", ["grad", "vmap"])
def test_scopes_survive_grad_and_vmap_without_jaxs_transform_names(transform):
    def f(J):
        def loss(x):
            with J.named_scope("layer"):
                y = J.numpy.tanh(x)
            return (y * y).sum()
        return J.jit(J.grad(loss) if transform == "grad" else J.vmap(loss))

    x = X if transform == "grad" else X[None]
    got = op_names(f(minijax).lower(x).compile().as_text())
    want = op_names(f(jax).lower(x).compile().as_text())
    assert any("layer/tanh" in n for n in got)
    assert got == {_without_transforms(n) for n in want}


def test_named_scope_as_a_decorator_and_a_scope_left_by_an_error():
    def f(J):
        @J.named_scope("layer")
        def layer(x):
            return J.numpy.sin(x)
        return layer

    closed = minijax.make_jaxpr(f(minijax))(X)
    assert [e.name_stack for e in closed.jaxpr.eqns] == [
        str(e.source_info.name_stack) for e in jax.make_jaxpr(f(jax))(X).jaxpr.eqns] == ["layer"]

    def fails(x):
        with minijax.named_scope("broken"):
            raise ValueError("inside the scope")
    with pytest.raises(ValueError):
        minijax.make_jaxpr(fails)(X)
    (eqn,) = minijax.make_jaxpr(minijax.numpy.sin)(X).jaxpr.eqns
    assert eqn.name_stack == ""  # nothing of the failed trace's scope is left behind


def test_bad_names_raise_type_errors_as_in_jax():
    for J in (jax, minijax):
        with pytest.raises(TypeError, match="must be a string"):
            J.named_scope(3)
    with pytest.raises(TypeError, match="named_call: name must be a string"):
        minijax.named_call(np.sin, name=3)
