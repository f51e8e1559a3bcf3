"""`custom_vmap`: a function with its own batching rule, and `sequential_vmap`, whose rule is
a loop. The function is traced to a jaxpr and bound as one `custom_vmap_call` equation; its
batching rule calls the user's rule, its other rules use the jaxpr (chapters/08-vmap.md
teaches batching rules). Mirrors jax/_src/custom_batching.py.
"""

from __future__ import annotations

import functools
from typing import Callable

from minijax import core
from minijax.ad_util import Zero
from minijax.core import ClosedJaxpr
from minijax.interpreters import ad, batching, mlir, partial_eval as pe
from minijax.lax.control_flow.loops import map as lax_map
from minijax.tree_util import tree_flatten, tree_map, tree_structure, tree_unflatten


# JAX: jax/_src/custom_batching.py custom_vmap — differs: reverse mode works (JAX's fails to
# linearize it)
class custom_vmap:  # JAX's name
    """`f = custom_vmap(fun)`, then `@f.def_vmap def rule(axis_size, in_batched, *args)`:
    `f(*args)` is `fun(*args)`; under `vmap`, `rule` is called instead with the batched
    arguments (batch axis first), `in_batched` (one pytree of bools per argument: which
    leaves are batched) and must return `(out, out_batched)`, `out_batched` a pytree of bools
    like `out`. Raises AttributeError when called under vmap with no rule, and ValueError for
    an `out_batched` whose structure differs from `out`'s."""

    def __init__(self, fun: Callable) -> None:
        functools.update_wrapper(self, fun)
        self.fun, self.vmap_rule = fun, None

    def def_vmap(self, vmap_rule: Callable) -> Callable:
        self.vmap_rule = vmap_rule
        return vmap_rule

    def __call__(self, *args):
        flat, in_tree = tree_flatten(args)
        store: list = []

        def flat_fun(*leaves):
            outs, out_tree = tree_flatten(self.fun(*tree_unflatten(in_tree, leaves)))
            store.append(out_tree)
            return outs
        jaxpr, consts, _ = pe.trace_to_jaxpr_dynamic(
            flat_fun, [core.get_aval(x) for x in flat], fun_name=self.__name__,
            purpose="custom_vmap")
        call = ClosedJaxpr(pe.convert_constvars_jaxpr(jaxpr), [])
        outs = custom_vmap_call_p.bind(*consts, *flat, call_jaxpr=call, rule=self.vmap_rule,
                                       in_tree=in_tree, out_tree=store[0],
                                       num_consts=len(consts), name=self.__name__)
        return tree_unflatten(store[0], outs)


def _custom_vmap_call_impl(*args, call_jaxpr, **params):
    return core.eval_jaxpr(call_jaxpr.jaxpr, call_jaxpr.consts, *args)


def _custom_vmap_call_abstract_eval(*avals, call_jaxpr, **params):
    return call_jaxpr.out_avals


def _eval(call_jaxpr):
    return lambda *xs: core.eval_jaxpr(call_jaxpr.jaxpr, call_jaxpr.consts, *xs)


# JAX: jax/_src/custom_batching.py custom_vmap_jvp
def _custom_vmap_call_jvp(primals, tangents, *, call_jaxpr, rule, in_tree, out_tree,
                          num_consts, name):
    """The jvp is a custom_vmap again: of the function's jvp, batched by the jvp of `rule`
    (each argument batched in primal or tangent is batched in both, and so is every output)."""
    if rule is None or any(type(t) is not Zero for t in tangents[:num_consts]):
        return ad.jvp_flat(_eval(call_jaxpr), primals, tangents)  # no rule to differentiate
    n, n_out = len(primals), len(call_jaxpr.out_avals)

    def jvp_fun(*pt):
        outs_p, outs_t = ad.jvp_flat(_eval(call_jaxpr), pt[:n], pt[n:])
        return [*outs_p, *map(ad.instantiate_zeros, outs_t)]
    jvp_fun.__name__ = f"jvp({name})"
    f = custom_vmap(jvp_fun)

    @f.def_vmap
    def jvp_rule(axis_size, in_batched, *pt):
        flags = [p or t for p, t in zip(in_batched[num_consts:n], in_batched[n + num_consts:])]
        args = [[batching.bdim_at_front(x, None, axis_size) if b and not was else x
                 for x, b, was in zip(xs, flags, batched)]
                for xs, batched in ((pt[num_consts:n], in_batched[num_consts:n]),
                                    (pt[n + num_consts:], in_batched[n + num_consts:]))]

        def batched_rule(*xs):
            out, out_batched = rule(axis_size, list(tree_unflatten(in_tree, flags)),
                                    *tree_unflatten(in_tree, xs))
            return [x if b else batching.bdim_at_front(x, None, axis_size) for x, b in
                    zip(tree_flatten(out)[0], tree_flatten(out_batched)[0])]
        outs_p, outs_t = ad.jvp_flat(batched_rule, args[0], args[1])
        return [*outs_p, *map(ad.instantiate_zeros, outs_t)], [True] * (2 * n_out)

    outs = f(*primals, *map(ad.instantiate_zeros, tangents))
    return outs[:n_out], outs[n_out:]


def _custom_vmap_call_partial_eval(trace, *tracers, call_jaxpr, **params):
    # unknown (tangent) inputs: a linear function is being built, which needs no batching
    # rule, so the function is inlined (as custom_jvp's rule does)
    with core.set_current_trace(trace):
        return _eval(call_jaxpr)(*tracers)


def _custom_vmap_call_batch_rule(vals, dims, *, axis_size, call_jaxpr, rule, in_tree,
                                 out_tree, num_consts, name):
    if rule is None:  # JAX's message
        raise AttributeError(f"No batching rule defined for custom_vmap function {name} "
                             "using def_vmap.")
    if any(d is not batching.not_mapped for d in dims[:num_consts]):
        raise ValueError("custom_vmap: the function closes over a value batched by an "
                         "enclosing vmap; pass it as an argument instead")
    args = [batching.moveaxis(x, d, 0) if d is not batching.not_mapped else x
            for x, d in zip(vals[num_consts:], dims[num_consts:])]
    in_batched = tree_unflatten(in_tree, [d is not batching.not_mapped
                                          for d in dims[num_consts:]])
    out, out_batched = rule(axis_size, list(in_batched), *tree_unflatten(in_tree, args))
    outs, tree = tree_flatten(out)
    flags, flags_tree = tree_flatten(out_batched)
    if tree != out_tree or flags_tree != tree_structure(out):  # JAX's message
        raise ValueError(
            "structure of output value and output batching specification returned by custom "
            f"vmap rule ({rule.__name__}) do not match: {tree} vs {flags_tree}")
    return outs, [0 if b else batching.not_mapped for b in flags]


def _custom_vmap_call_lowering(ctx, *args, call_jaxpr, **params):
    return mlir.lower_jaxpr(call_jaxpr.jaxpr, call_jaxpr.consts, args)


custom_vmap_call_p = core.Primitive("custom_vmap_call")
custom_vmap_call_p.multiple_results = True
custom_vmap_call_p.def_impl(_custom_vmap_call_impl)
custom_vmap_call_p.def_abstract_eval(_custom_vmap_call_abstract_eval)
ad.primitive_jvps[custom_vmap_call_p] = _custom_vmap_call_jvp
pe.custom_partial_eval_rules[custom_vmap_call_p] = _custom_vmap_call_partial_eval
batching.primitive_batchers[custom_vmap_call_p] = _custom_vmap_call_batch_rule
mlir.register_lowering(custom_vmap_call_p, _custom_vmap_call_lowering)


# JAX: jax/_src/custom_batching.py sequential_vmap
def sequential_vmap(f: Callable) -> custom_vmap:
    """`f`, batched by `vmap` as a loop (`lax.map`) over the batched arguments, one call of
    `f` per example, instead of by batching its operations. Every output is batched."""
    f = custom_vmap(f)

    @f.def_vmap
    def rule(axis_size, in_batched, *args):
        flat, tree = tree_flatten(args)
        batched, _ = tree_flatten(in_batched)

        def one(mapped):
            it = iter(mapped)
            return f(*tree_unflatten(tree, [next(it) if b else x
                                            for x, b in zip(flat, batched)]))
        out = lax_map(one, [x for x, b in zip(flat, batched) if b])
        return out, tree_map(lambda _: True, out)
    return f
