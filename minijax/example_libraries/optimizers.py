"""`optimizers`: first-order optimizers as `(init_fun, update_fun, get_params)` triples.

Each optimizer is written for one array (`init(x0) -> state`, `update(i, g, state) ->
state`, `get_params(state) -> x`); the `optimizer` decorator lifts it to pytrees of
parameters: the state of the whole tree is an `OptimizerState` (each leaf's state
flattened, the parameter tree and each leaf's state tree), itself a pytree, so it passes
through `jit`. Step sizes are numbers or schedules (functions of the step number i).
Mirrors jax/example_libraries/optimizers.py.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

from minijax import numpy as jnp, tree_util


# JAX: jax/example_libraries/optimizers.py OptimizerState
class OptimizerState(NamedTuple):
    packed_state: list
    tree_def: Any
    subtree_defs: tuple


tree_util.register_pytree_node(
    OptimizerState, lambda s: ((s.packed_state,), (s.tree_def, s.subtree_defs)),
    lambda aux, children: OptimizerState(children[0], *aux))


class Optimizer(NamedTuple):
    init_fn: Callable
    update_fn: Callable
    params_fn: Callable


# JAX: jax/example_libraries/optimizers.py optimizer
def optimizer(opt_maker: Callable) -> Callable[..., Optimizer]:
    """`opt_maker(*args)` returns a triple working on one array; the decorated function
    returns the triple working on pytrees. `update_fun` raises TypeError for a gradient
    tree whose structure is not the parameters'."""
    @functools.wraps(opt_maker)
    def tree_opt_maker(*args, **kwargs):
        init, update, get_params = opt_maker(*args, **kwargs)

        def tree_init(x0_tree):
            leaves, tree = tree_util.tree_flatten(x0_tree)
            flat = [tree_util.tree_flatten(init(x0)) for x0 in leaves]
            return OptimizerState([f for f, _ in flat], tree, tuple(t for _, t in flat))

        def tree_update(i, grad_tree, opt_state):
            states_flat, tree, subtrees = opt_state
            grads, tree2 = tree_util.tree_flatten(grad_tree)
            if tree2 != tree:
                raise TypeError(f"optimizer update function was passed a gradient tree that "
                                f"did not match the parameter tree structure with which it "
                                f"was initialized: parameter tree {tree} and grad tree "
                                f"{tree2}.")
            new = [tree_util.tree_flatten(update(i, g, tree_util.tree_unflatten(t, s)))
                   for g, t, s in zip(grads, subtrees, states_flat)]
            return OptimizerState([f for f, _ in new], tree, subtrees)

        def tree_get_params(opt_state):
            states_flat, tree, subtrees = opt_state
            return tree_util.tree_unflatten(tree, [
                get_params(tree_util.tree_unflatten(t, s)) for t, s in zip(subtrees, states_flat)])
        return Optimizer(tree_init, tree_update, tree_get_params)
    return tree_opt_maker


def _first(state):
    return state[0]


@optimizer
def sgd(step_size):
    """x <- x - step_size(i) g."""
    step_size = make_schedule(step_size)
    return (lambda x0: x0), (lambda i, g, x: x - step_size(i) * g), (lambda x: x)


@optimizer
def momentum(step_size, mass: float):
    """v <- mass v + g; x <- x - step_size(i) v."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, v = state
        v = mass * v + g
        return x - step_size(i) * v, v
    return (lambda x0: (x0, jnp.zeros_like(x0))), update, _first


@optimizer
def nesterov(step_size, mass: float):
    """Momentum with the step taken from the look-ahead: x <- x - step_size(i) (mass v + g)."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, v = state
        v = mass * v + g
        return x - step_size(i) * (mass * v + g), v
    return (lambda x0: (x0, jnp.zeros_like(x0))), update, _first


@optimizer
def adagrad(step_size, momentum=0.9):
    """Steps scaled by 1 / sqrt(the sum of squared gradients so far), with momentum."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, g_sq, m = state
        g_sq = g_sq + jnp.square(g)
        inv = jnp.where(g_sq > 0, 1.0 / jnp.sqrt(g_sq), 0.0)
        m = (1.0 - momentum) * (g * inv) + momentum * m
        return x - step_size(i) * m, g_sq, m
    return (lambda x0: (x0, jnp.zeros_like(x0), jnp.zeros_like(x0))), update, _first


@optimizer
def rmsprop(step_size, gamma=0.9, eps=1e-8):
    """Steps scaled by 1 / sqrt(a running average of squared gradients + eps)."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, avg = state
        avg = avg * gamma + jnp.square(g) * (1.0 - gamma)
        return x - step_size(i) * g / jnp.sqrt(avg + eps), avg
    return (lambda x0: (x0, jnp.zeros_like(x0))), update, _first


@optimizer
def rmsprop_momentum(step_size, gamma=0.9, eps=1e-8, momentum=0.9):
    """rmsprop's scaled step accumulated with momentum."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, avg, mom = state
        avg = avg * gamma + jnp.square(g) * (1.0 - gamma)
        mom = momentum * mom + step_size(i) * g / jnp.sqrt(avg + eps)
        return x - mom, avg, mom
    return (lambda x0: (x0, jnp.zeros_like(x0), jnp.zeros_like(x0))), update, _first


@optimizer
def adam(step_size, b1=0.9, b2=0.999, eps=1e-8):
    """Running averages m of g and v of g^2, bias-corrected by 1 - b^(i+1);
    x <- x - step_size(i) m_hat / (sqrt(v_hat) + eps)."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, m, v = state
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * jnp.square(g) + b2 * v
        m_hat = m / (1 - jnp.asarray(b1, m.dtype) ** (i + 1))
        v_hat = v / (1 - jnp.asarray(b2, m.dtype) ** (i + 1))
        return x - step_size(i) * m_hat / (jnp.sqrt(v_hat) + eps), m, v
    return (lambda x0: (x0, jnp.zeros_like(x0), jnp.zeros_like(x0))), update, _first


@optimizer
def adamax(step_size, b1=0.9, b2=0.999, eps=1e-8):
    """adam with the infinity norm: u <- max(b2 u, |g|); x <- x - step_size(i) m_hat / u."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, m, u = state
        m = (1 - b1) * g + b1 * m
        u = jnp.maximum(b2 * u, jnp.abs(g))
        return x - (step_size(i) / (1 - jnp.asarray(b1, m.dtype) ** (i + 1))) * m / (
            u + eps), m, u
    return (lambda x0: (x0, jnp.zeros_like(x0), jnp.zeros_like(x0))), update, _first


# ---------------------------------------------------------------------------------------------
# Schedules and utilities
# ---------------------------------------------------------------------------------------------

def constant(step_size):
    return lambda i: step_size


def exponential_decay(step_size, decay_steps, decay_rate):
    return lambda i: step_size * decay_rate ** (i / decay_steps)


def inverse_time_decay(step_size, decay_steps, decay_rate, staircase=False):
    if staircase:
        return lambda i: step_size / (1 + decay_rate * jnp.floor(i / decay_steps))
    return lambda i: step_size / (1 + decay_rate * i / decay_steps)


def polynomial_decay(step_size, decay_steps, final_step_size, power=1.0):
    def schedule(i):
        frac = 1 - jnp.minimum(i, decay_steps) / decay_steps
        return frac ** power * (step_size - final_step_size) + final_step_size
    return schedule


def piecewise_constant(boundaries, values):
    """values[k] for steps past k of `boundaries` (ValueError unless one fewer boundary)."""
    boundaries, values = jnp.array(boundaries), jnp.array(values)
    if not boundaries.ndim == values.ndim == 1:
        raise ValueError("boundaries and values must be sequences")
    if boundaries.shape[0] != values.shape[0] - 1:
        raise ValueError("boundaries length must be one shorter than values length")
    return lambda i: values[jnp.sum(i > boundaries)]


def make_schedule(scalar_or_schedule):
    """A schedule as it is, a number as a constant schedule; TypeError otherwise."""
    if callable(scalar_or_schedule):
        return scalar_or_schedule
    if jnp.ndim(scalar_or_schedule) == 0:
        return constant(scalar_or_schedule)
    raise TypeError(type(scalar_or_schedule))


def l2_norm(tree):
    """sqrt of the sum of squares of every leaf of `tree`."""
    return jnp.sqrt(sum(jnp.vdot(x, x) for x in tree_util.tree_leaves(tree)))


def clip_grads(grad_tree, max_norm):
    """`grad_tree` scaled down to l2 norm `max_norm` if it is longer."""
    norm = l2_norm(grad_tree)
    return tree_util.tree_map(lambda g: jnp.where(norm < max_norm, g, g * (max_norm / norm)),
                              grad_tree)


# ---------------------------------------------------------------------------------------------
# Serialization: an OptimizerState as one nested pytree and back
# ---------------------------------------------------------------------------------------------

# JAX: jax/example_libraries/optimizers.py JoinPoint
class JoinPoint:
    """A leaf of the parameter tree holding that parameter's state tree (the boundary
    between the two nested pytrees)."""

    def __init__(self, subtree):
        self.subtree = subtree

    def __iter__(self):  # look iterable, as containers of arrays do (JAX's)
        yield self.subtree


# JAX: jax/example_libraries/optimizers.py unpack_optimizer_state
def unpack_optimizer_state(opt_state: OptimizerState):
    """The parameter tree with a `JoinPoint` holding each parameter's state tree at its
    leaves (for serializing an optimizer state)."""
    states_flat, tree_def, subtree_defs = opt_state
    return tree_util.tree_unflatten(tree_def, [
        JoinPoint(tree_util.tree_unflatten(t, s)) for t, s in zip(subtree_defs, states_flat)])


# JAX: jax/example_libraries/optimizers.py pack_optimizer_state
def pack_optimizer_state(marked_pytree) -> OptimizerState:
    """The inverse of `unpack_optimizer_state`. AssertionError (as JAX's) for a leaf that
    is not a `JoinPoint`."""
    sentinels, tree_def = tree_util.tree_flatten(marked_pytree)
    assert all(isinstance(s, JoinPoint) for s in sentinels)
    flat = [tree_util.tree_flatten(s.subtree) for s in sentinels]
    return OptimizerState([f for f, _ in flat], tree_def, tuple(t for _, t in flat))
