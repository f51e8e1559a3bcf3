"""jnp.einsum (minijax/numpy/einsum.py) against jax.numpy.einsum, including an index repeated
within one operand (a trace or a diagonal), under jit, vmap and grad.

One program, two modules: each case is `program(J)` run with `J=jax` and `J=minijax`; values,
shapes, dtypes and weak types must agree (tests/lax_numpy_test_util.py `check`).
"""

import jax
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from lax_numpy_test_util import A3, A, V, assert_same, check, check_raises, jnp

import minijax

SQ = A[:, :3]
CUBE = np.arange(27, dtype=np.float32).reshape(3, 3, 3) / 10
IIJ = np.arange(18, dtype=np.float32).reshape(3, 3, 2)

CASES = {
    "matmul": lambda J: jnp(J).einsum("ij,jk->ik", A, A.T),
    "batch": lambda J: jnp(J).einsum("bij,bkj->bik", A3, A3),
    "ellipsis": lambda J: jnp(J).einsum("...j,j->...", A3, A[0]),
    "implicit": lambda J: jnp(J).einsum("ij,jk", A, A.T),
    "outer": lambda J: jnp(J).einsum("i,j->ij", V, A[0]),
    "trace": lambda J: jnp(J).einsum("ii->", SQ),
    "trace_implicit": lambda J: jnp(J).einsum("ii", SQ),
    "diagonal": lambda J: jnp(J).einsum("ii->i", SQ),
    "iij": lambda J: jnp(J).einsum("iij->j", IIJ),
    "iji": lambda J: jnp(J).einsum("iji->ij", np.transpose(IIJ, (0, 2, 1))),
    "iii": lambda J: jnp(J).einsum("iii->i", CUBE),
    "diag_times_vector": lambda J: jnp(J).einsum("ii,i->i", SQ, V[:3]),
    "diag_contract": lambda J: jnp(J).einsum("ij,jj->i", A[:, :3], SQ),
    "int": lambda J: jnp(J).einsum("ii->i", np.arange(9, dtype=np.int32).reshape(3, 3)),
    # as JAX's _einsum: bools sum with `or`, operands summed in preferred_element_type, the
    # result weak when every operand is, `precision`, `out=None` and the sublist form accepted
    "bool_sum": lambda J: jnp(J).einsum("ij->j", A > 0),
    "bool_trace": lambda J: jnp(J).einsum("ii->", SQ > 0),
    "bool_matmul": lambda J: jnp(J).einsum("ij,jk", A > 0, A.T > 0),
    "int8_sum_preferred": lambda J: jnp(J).einsum("ij->j", np.full((3, 4), 100, np.int8),
                                                  preferred_element_type=np.int32),
    "bf16_private_preferred": lambda J: jnp(J).einsum(
        "ij,k->ik", A.astype(jax.numpy.bfloat16), V.astype(jax.numpy.bfloat16),
        preferred_element_type=np.float32),
    "weak_scalars": lambda J: jnp(J).einsum(",->", 2.0, 3.0),
    "weak_int_scalar": lambda J: jnp(J).einsum("i,->i", V, 2),
    "precision": lambda J: jnp(J).einsum("ij,jk", A, A.T, precision="highest"),
    "out_none": lambda J: jnp(J).einsum("ij,jk", A, A.T, out=None),
    "sublists": lambda J: jnp(J).einsum(A, [0, 1], A.T, [1, 2], [0, 2]),
    "sublists_ellipsis": lambda J: jnp(J).einsum(A3, [Ellipsis, 1], A[0], [1]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_against_jax(name):
    check(CASES[name], rtol=1e-5, atol=1e-5)


def test_repeated_index_jit_vmap_grad():
    def program(J):
        e = J.numpy.einsum
        return (J.jit(lambda x: e("ii->i", x))(SQ),
                J.vmap(lambda x: e("ii->", x))(CUBE),
                J.grad(lambda x: e("ii->", x * x))(SQ),
                J.grad(lambda x: e("iij->j", x).sum())(IIJ))
    assert_same(program(minijax), program(jax), rtol=1e-5, atol=1e-5)


ERRORS = {
    "repeated_sizes": lambda J: J.numpy.einsum("ii->i", A),       # sizes 3 and 4 in one operand
    "contracted_sizes": lambda J: J.numpy.einsum("ij,jk->ik", A, A),    # 4 against 3
    "output_repeated": lambda J: J.numpy.einsum("ij->ii", A),
    "output_unknown": lambda J: J.numpy.einsum("ij->iz", A),
    "two_arrows": lambda J: J.numpy.einsum("ij->j->i", A),
    "no_operands": lambda J: J.numpy.einsum("ij"),
    "list_operand": lambda J: J.numpy.einsum("i,i->", [1.0, 2.0], V[:2]),
    "out_given": lambda J: J.numpy.einsum("ij->i", A, out=np.zeros(3, np.float32)),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors(name):
    check_raises(ERRORS[name])


@pytest.mark.parametrize("spec,shapes", [("ii->", [(3, 3)]), ("ii->i", [(3, 3)]),
                                         ("ij,kl->ik", [(3, 4), (4, 2)]),
                                         ("ij,jk->", [(3, 4), (4, 2)])])
def test_jaxpr_as_jax(spec, shapes):
    """Repeated indices (an identity mask as JAX's lax._delta) and indices private to one
    operand (summed later operand first, as JAX's path pops them) print as JAX's jaxprs."""
    ops = [np.ones(s, np.float32) for s in shapes]
    got = minijax.make_jaxpr(lambda *o: minijax.numpy.einsum(spec, *o))(*ops)
    want = jax.make_jaxpr(lambda *o: jax.numpy.einsum(spec, *o))(*ops)
    assert str(got) == str(want)


def _dot_generals(jaxpr):
    """(lhs shape, rhs shape, dimension_numbers) of every dot_general, nested jaxprs too."""
    out = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            dims = tuple(tuple(tuple(int(i) for i in d) for d in pair)
                         for pair in eqn.params["dimension_numbers"])
            out.append((eqn.invars[0].aval.shape, eqn.invars[1].aval.shape, dims))
        for p in eqn.params.values():
            inner = getattr(p, "jaxpr", p)
            if hasattr(inner, "eqns"):
                out += _dot_generals(inner)
    return out


def test_dot_general_dimensions_as_jax_orders_them():
    """The order of contracted and batch dimensions, and which operand goes first, decide
    XLA's summation order: minijax picks them as JAX does (contracted indices by name, batch
    indices in the output's order, the operands swapped when that spares a transpose), so a
    jitted einsum and its gradient are bit-identical to JAX's (a mixture-of-experts' combine
    einsum and an attention's two; compare/moe.py trains step for step on this)."""
    rng = np.random.RandomState(0)
    comb, x = rng.standard_normal((2, 5, 3, 4)), rng.standard_normal((3, 2, 4, 6))
    q, k = rng.standard_normal((2, 5, 3, 4)), rng.standard_normal((2, 5, 3, 4))
    args = [a.astype(np.float32) for a in (comb, x, q, k)]

    def program(J):
        e = J.numpy.einsum

        def f(comb, x, q, k):
            y = e("gsec,egcd->gsd", comb, x)                   # contracted: c, e (sorted)
            p = J.nn.softmax(e("bqhd,bkhd->bhqk", q, k), axis=-1)
            o = e("bhqk,bkhd->bqhd", p, k)                     # later operand first
            return J.numpy.sum(J.numpy.tanh(y)) + J.numpy.sum(J.numpy.tanh(o))
        return J.jit(J.value_and_grad(f, (0, 1, 2, 3)))(*args), J.make_jaxpr(
            J.grad(f, (0, 1, 2, 3)))(*args)
    (got, got_jaxpr), (want, want_jaxpr) = program(minijax), program(jax)
    assert _dot_generals(got_jaxpr.jaxpr) == _dot_generals(want_jaxpr.jaxpr)
    for g, w in zip(minijax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


@st.composite
def _einsum_specs(draw, max_operands=3):
    """A valid einsum: 1-3 operands over indices a-d (repeated within an operand, size 1
    against another size, a shared `...`), an implicit or explicit output."""
    sizes = {c: draw(st.integers(1, 3)) for c in "abcd"}
    ell = draw(st.lists(st.integers(1, 3), max_size=2)) if draw(st.booleans()) else None
    rng = np.random.RandomState(draw(st.integers(0, 2**16)))
    ins, ops = [], []
    for _ in range(draw(st.integers(1, max_operands))):
        s = "".join(draw(st.lists(st.sampled_from("abcd"), max_size=3)))
        ones = draw(st.lists(st.booleans(), min_size=4, max_size=4))
        shape = [1 if ones["abcd".index(c)] else sizes[c] for c in s]
        if ell is not None and draw(st.booleans()):
            k = draw(st.integers(0, len(ell)))
            shape = [n if draw(st.booleans()) else 1 for n in ell[len(ell) - k:]] + shape
            s = "..." + s
        ins.append(s)
        ops.append(rng.standard_normal(shape).astype(np.float32))
    if draw(st.booleans()):
        return ",".join(ins), ops
    names = sorted(set("".join(ins).replace(".", "")))
    out = "".join(draw(st.permutations([c for c in names if draw(st.booleans())])))
    if any("..." in s for s in ins):
        k = draw(st.integers(0, len(out)))
        out = out[:k] + "..." + out[k:]
    return ",".join(ins) + "->" + out, ops


@settings(max_examples=25, deadline=None)
@given(_einsum_specs())
def test_random_einsums_against_jax(spec_ops):
    """Random specs: values, shapes and dtypes as JAX's (a size-1 dimension against another
    size broadcasts, as JAX squeezes it: jax/_src/numpy/einsum.py filter_singleton_dims)."""
    spec, ops = spec_ops
    assert_same(minijax.numpy.einsum(spec, *ops), jax.numpy.einsum(spec, *ops),
                rtol=1e-5, atol=1e-5)


@settings(max_examples=8, deadline=None)
@given(_einsum_specs(max_operands=2).filter(lambda so: len(so[1]) == 2))
def test_random_two_operand_einsums_bit_identical_under_jit(spec_ops):
    spec, ops = spec_ops
    got = minijax.jit(lambda *o: minijax.numpy.einsum(spec, *o))(*ops)
    want = jax.jit(lambda *o: jax.numpy.einsum(spec, *o))(*ops)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("spec,shapes", [("ac,acc->a", [(4, 3), (4, 3, 3)]),
                                         ("aad,cdd->d", [(4, 4, 3), (3, 3, 3)]),
                                         ("ii->", [(7, 7)]), ("iij->ji", [(5, 5, 3)])])
def test_repeated_indices_bit_identical_under_jit(spec, shapes):
    """A repeated index is a masked sum as in JAX (jax/_src/numpy/einsum.py sum_repeats:
    select with an identity mask, then reduce), so jitted results agree to the last bit."""
    rng = np.random.RandomState(0)
    ops = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    got = minijax.jit(lambda *o: minijax.numpy.einsum(spec, *o))(*ops)
    want = jax.jit(lambda *o: jax.numpy.einsum(spec, *o))(*ops)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
