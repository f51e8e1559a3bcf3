"""Rung 7: pytrees, so that parameters can be nested dicts and lists
(minijax/tree_util.py; jax/_src/tree_util.py)."""

from __future__ import annotations

import numpy as np

from .core import set_current_trace, shape_dtype
from .grad import backward_pass
from .jaxpr import Jaxpr, JaxprTrace
from .jvp import jvp


def tree_flatten(tree):
    """(leaves, treedef) for tuples, lists, dicts (sorted keys) and None; anything else is a
    leaf. A treedef is a nested tuple: ('leaf',) or (type, keys, child treedefs)."""
    # BUILD rung 7: flatten tuples, lists, dicts (sorted keys) and None; anything else is a leaf
    if isinstance(tree, (tuple, list)):
        keys, children = None, list(tree)
    elif isinstance(tree, dict):
        keys = tuple(sorted(tree))
        children = [tree[k] for k in keys]
    elif tree is None:
        return [], (type(None), None, ())
    else:
        return [tree], ("leaf",)
    leaves, defs = [], []
    for child in children:
        sub, d = tree_flatten(child)
        leaves += sub
        defs.append(d)
    return leaves, (type(tree), keys, tuple(defs))
    # END BUILD


def tree_unflatten(treedef, leaves):
    it = iter(leaves)

    def build(d):
        # BUILD rung 7: rebuild each node from its type, keys and children
        if d == ("leaf",):
            return next(it)
        kind, keys, defs = d
        if kind is type(None):
            return None
        children = [build(c) for c in defs]
        return dict(zip(keys, children)) if kind is dict else kind(children)
        # END BUILD
    return build(treedef)


def tree_map(f, tree, *rest):
    leaves, treedef = tree_flatten(tree)
    others = [tree_flatten(r)[0] for r in rest]
    return tree_unflatten(treedef, [f(*xs) for xs in zip(leaves, *others)])


def value_and_grad(f):
    """`value_and_grad(f)(params, *args)`: f's scalar value and its gradient with respect to
    `params`, a pytree of arrays (the gradient has the same structure)."""
    def vg(params, *args):
        leaves, treedef = tree_flatten(params)

        def flat_f(*xs):
            return f(tree_unflatten(treedef, xs), *args)
        # linearize with several inputs, then one backward pass
        trace = JaxprTrace(fold_known=True)
        tangents = [trace.new_arg(*shape_dtype(x)) for x in leaves]
        with set_current_trace(trace):
            out, t_out = jvp(flat_f, leaves, tangents)
        jaxpr = Jaxpr([v for _, v in trace.consts.values()], [t.var for t in tangents],
                      trace.eqns, [trace.to_var(t_out)])
        consts = [c for c, _ in trace.consts.values()]
        cts = backward_pass(jaxpr, consts, np.ones(*shape_dtype(out)))
        return out, tree_unflatten(treedef, cts)
    return vg
