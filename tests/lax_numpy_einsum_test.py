"""jnp.einsum (minijax/numpy/einsum.py) against jax.numpy.einsum, including an index repeated
within one operand (a trace or a diagonal), under jit, vmap and grad.

One program, two modules: each case is `program(J)` run with `J=jax` and `J=minijax`; values,
shapes, dtypes and weak types must agree (tests/lax_numpy_test_util.py `check`).
"""

import jax
import numpy as np
import pytest

import minijax
from lax_numpy_test_util import A, A3, V, assert_same, check, check_raises, jnp

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


def test_errors():
    check_raises(lambda J: J.numpy.einsum("ii->i", A))         # a repeated index, sizes 3 and 4
    check_raises(lambda J: J.numpy.einsum("ij,jk->ik", A, A))  # contracted sizes 4 and 3
