"""minijax.example_libraries (stax, optimizers) against jax.example_libraries: the same
network initialised from the same key, its outputs, and training steps of every optimizer."""

import jax
import numpy as np
import pytest
from jax.example_libraries import optimizers as j_opt, stax as j_stax

import minijax
from minijax.example_libraries import optimizers as m_opt, stax as m_stax

# Slow (CI runs it, `make test-fast` does not): optimizer training steps under both modules.
pytestmark = pytest.mark.slow

X = np.random.default_rng(0).standard_normal((4, 8, 8, 3)).astype(np.float32)


def _net(stax):
    block = stax.serial(stax.FanOut(2), stax.parallel(stax.Identity, stax.Conv(3, (3, 3),
                                                                              padding="SAME")),
                        stax.FanInSum)
    return stax.serial(stax.Conv(6, (3, 3), strides=(2, 2)), stax.Relu, stax.MaxPool((2, 2)),
                       stax.AvgPool((1, 1)), stax.Flatten, stax.Dense(10), stax.Tanh,
                       stax.FanOut(2), stax.parallel(stax.Dense(5), stax.Dense(3)),
                       stax.FanInConcat(), stax.LogSoftmax), block


def test_stax_network_as_jax():
    (j_init, j_apply), (jb_init, jb_apply) = _net(j_stax)
    (m_init, m_apply), (mb_init, mb_apply) = _net(m_stax)
    j_shape, j_params = j_init(jax.random.key(0), X.shape)
    m_shape, m_params = m_init(minijax.random.key(0), X.shape)
    assert tuple(m_shape) == tuple(j_shape) == (4, 8)
    for a, b in zip(minijax.tree_util.tree_leaves(m_params), jax.tree_util.tree_leaves(j_params)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(m_apply(m_params, X), j_apply(j_params, X), rtol=1e-5, atol=1e-5)
    _, jbp = jb_init(jax.random.key(1), X.shape)
    _, mbp = mb_init(minijax.random.key(1), X.shape)
    np.testing.assert_allclose(mb_apply(mbp, X), jb_apply(jbp, X), rtol=1e-5, atol=1e-5)
    for stax in (j_stax, m_stax):
        _, drop = stax.Dropout(0.5)
        with pytest.raises(ValueError, match="PRNG key"):
            drop((), X)
    kept = [np.asarray(s.Dropout(0.5)[1]((), X, rng=k)) for s, k in
            ((j_stax, jax.random.key(2)), (m_stax, minijax.random.key(2)))]
    np.testing.assert_allclose(kept[1], kept[0])


OPTIMIZERS = {  # each with a different schedule (every JAX run compiles: few cases)
    "momentum": lambda o: o.momentum(o.polynomial_decay(0.1, 3, 0.01), 0.9),
    "nesterov": lambda o: o.nesterov(0.1, 0.9), "adagrad": lambda o: o.adagrad(0.1),
    "rmsprop_momentum": lambda o: o.rmsprop_momentum(0.01),
    "adam": lambda o: o.adam(o.exponential_decay(0.1, 2, 0.5)),
    "adamax": lambda o: o.adamax(o.inverse_time_decay(0.1, 2, 0.5, staircase=True)),
    "sgd_piecewise": lambda o: o.sgd(o.piecewise_constant([1, 2], [0.1, 0.05, 0.01])),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_steps_as_jax(name):
    def run(J, opt):
        init, update, get_params = OPTIMIZERS[name](opt)
        params = {"w": np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3),
                  "b": (np.float32(0.5), np.ones(3, np.float32))}
        loss = lambda p: (J.numpy.sum(p["w"] ** 2) + p["b"][0] ** 2
                          + J.numpy.sum(J.numpy.sin(p["b"][1])))
        step = J.jit(lambda i, s: update(i, opt.clip_grads(J.grad(loss)(get_params(s)), 2.0),
                                         s))
        state = init(params)
        for i in range(4):
            state = step(i, state)
        return get_params(state), opt.l2_norm(get_params(state))
    got, want = run(minijax, m_opt), run(jax, j_opt)
    for a, b in zip(minijax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6)


def test_optimizer_errors_as_jax():
    for opt in (j_opt, m_opt):
        init, update, _ = opt.sgd(0.1)
        with pytest.raises(TypeError, match="did not match the parameter tree"):
            update(0, {"a": np.ones(2)}, init({"b": np.ones(2)}))
        with pytest.raises(ValueError, match="one shorter"):
            opt.piecewise_constant([1, 2], [0.1])


def test_unpack_and_pack_optimizer_state_as_jax():
    # the parameter tree with JoinPoint leaves holding each parameter's state, and back
    def run(J, opt):
        init, update, get_params = opt.adam(0.1)
        state = update(0, {"w": np.ones(2, np.float32), "b": (np.float32(2.0),)},
                       init({"w": np.zeros(2, np.float32), "b": (np.float32(1.0),)}))
        marked = opt.unpack_optimizer_state(state)
        leaves, tree = J.tree_util.tree_flatten(marked)
        inner = [J.tree_util.tree_flatten(s.subtree) for s in leaves]
        again = opt.pack_optimizer_state(marked)
        with pytest.raises(AssertionError):
            opt.pack_optimizer_state({"w": 1.0})
        values = [np.round(np.asarray(x), 5).tolist() for f, _ in inner for x in f]
        return (str(tree), [str(t) for _, t in inner], [type(s).__name__ for s in leaves],
                str(again.tree_def), values,
                [np.round(np.asarray(x), 5).tolist()
                 for x in J.tree_util.tree_leaves(get_params(again))])
    assert run(minijax, m_opt) == run(jax, j_opt)
