"""`jnp.einsum`: Einstein summation as a chain of `dot_general`s.

Mirrors jax/_src/numpy/einsum.py. Taught in chapters/01-numpy.md.
"""

from __future__ import annotations

import builtins
import functools
import string

import numpy as np

from minijax import core, dtypes, lax
from minijax.named_sharding import NamedSharding
from minijax.numpy import lax_numpy
from minijax.numpy.array_constructors import asarray
from minijax.numpy.util import check_arraylike, promote_dtypes
from minijax.partition_spec import P
from minijax.sharding_impls import canonicalize_out_sharding


def einsum(subscripts: str, *operands, out=None, optimize=None, precision=None,
           preferred_element_type=None, out_sharding=None):
    """Einstein summation, contracted left to right with `dot_general` (a documented simpler
    path than JAX's opt_einsum ordering; each pair's dimensions ordered as JAX orders them,
    so two-operand einsums are bit-identical to JAX's). Supports `...`, implicit output,
    the sublist form `einsum(x, [0, 1], y, [1, 2], [0, 2])`, sums over indices that appear
    once, an index repeated within one operand ("ii->i", "ii->", "iij->j") and size-1
    dimensions against larger ones. The result has `preferred_element_type` (default: the
    operands' promoted dtype, weak if all are). `out_sharding` (NamedSharding, or
    PartitionSpec under `set_mesh`): the result's sharding, given to the last contraction.
    Raises ValueError for mismatched subscripts or sizes, TypeError for a list operand,
    NotImplementedError for `out`. JAX: jax/_src/numpy/einsum.py einsum, _einsum."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.einsum is not supported.")
    if not isinstance(subscripts, str):
        subscripts, operands = _einsum_sublists(subscripts, *operands)
    subscripts = subscripts.replace(" ", "")
    if subscripts.count("->") > 1:
        raise ValueError(f"einsum: subscripts {subscripts!r} can only contain one '->'")
    lhs, out = subscripts.split("->") if "->" in subscripts else (subscripts, None)
    ins = lhs.split(",")
    if len(ins) != len(operands):
        raise ValueError(f"einsum: {len(ins)} operand subscripts for {len(operands)} operands")
    check_arraylike("einsum", *operands)
    operands = [asarray(o) for o in operands]
    if preferred_element_type is None:  # as JAX: weak when every operand is
        d, weak = dtypes.result_type_weak(*map(dtypes.dtype_and_weak, operands))
    else:
        d, weak = dtypes.canonicalize_dtype(preferred_element_type), False
    operands = promote_dtypes(*operands)
    new_ins, out = _einsum_indices(subscripts, ins, out, operands)
    _einsum_check_sizes(new_ins, operands)
    terms = list(zip(new_ins, operands))
    s0, acc = terms[0]
    if len(terms) == 1:  # indices not in the output are summed (repeated ones: their diagonal)
        acc, s0 = _einsum_sum_private(acc, s0, lambda c: c in out or s0.count(c) > 1, d)
        acc, s0 = _einsum_sum_repeats(acc, s0, lambda c: c in out, d)
    for i in range(1, len(terms)):
        acc, s0 = _einsum_contract(acc, s0, terms, i, out, d, precision, out_sharding)
    # remaining indices not in the output are summed; then order as the output
    extra = tuple(k for k, c in enumerate(s0) if c not in out)
    if extra:
        acc = _einsum_sum(acc, extra, d)
        s0 = "".join(c for c in s0 if c in out)
    acc = lax.transpose(acc, tuple(s0.index(c) for c in out))
    return lax.convert_element_type(acc, d, weak)


def _einsum_indices(subscripts: str, ins: list[str], out: str | None, operands
                    ) -> tuple[list[str], str]:
    """Each operand's indices with `...` expanded into fresh capital letters, and the output's
    (implicit: the indices that appear once, sorted). ValueError for a rank mismatch or an
    output index that repeats or is in no input."""
    free_letters = [c for c in string.ascii_uppercase if c not in subscripts]
    ell_rank = 0
    for s, o in zip(ins, operands):
        if "..." in s:
            ell_rank = builtins.max(ell_rank, lax_numpy.ndim(o) - (len(s) - 3))
    ell = "".join(free_letters[:ell_rank])
    new_ins = []
    for s, o in zip(ins, operands):
        if "..." in s:
            k = lax_numpy.ndim(o) - (len(s) - 3)
            s = s.replace("...", ell[ell_rank - k:])
        if len(s) != lax_numpy.ndim(o):
            raise ValueError(f"einsum: subscripts {s!r} do not match operand of rank "
                             f"{lax_numpy.ndim(o)}")
        new_ins.append(s)
    if out is None:
        counts = {c: "".join(new_ins).count(c) for c in "".join(new_ins)}
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    else:
        out = out.replace("...", ell)
    for c in out:
        if out.count(c) > 1 or not any(c in s for s in new_ins):
            where = "more than once in the output" if out.count(c) > 1 else "in no input"
            raise ValueError(f"einsum: output index {c!r} appears {where} ({subscripts!r})")
    return new_ins, out


def _einsum_check_sizes(new_ins: list[str], operands) -> None:
    """ValueError for an index with two sizes (neither 1) across or within operands."""
    sizes: dict[str, int] = {}
    for s, o in zip(new_ins, operands):  # an index repeated in one operand: one size there
        shape = core.get_aval(o).shape
        for c in set(s):
            if len({shape[k] for k, x in enumerate(s) if x == c}) > 1:
                raise ValueError(f"einsum: index {c!r} has sizes "
                                 f"{[shape[k] for k, x in enumerate(s) if x == c]} in one "
                                 f"operand ({s!r}, shape {shape})")
    for s, o in zip(new_ins, operands):
        for c, n in zip(s, core.get_aval(o).shape):
            if sizes.setdefault(c, n) != n and n != 1 and sizes[c] != 1:
                raise ValueError(f"einsum: index {c!r} has sizes {sizes[c]} and {n}")
            sizes[c] = builtins.max(sizes[c], n)


def _einsum_contract(acc, s0: str, terms: list, i: int, out: str, d, precision, out_sharding):
    """One step left to right: the result so far (`acc`, indices `s0`) with operand `i` of
    `terms`, as one dot_general; returns the new result and its indices."""
    s1, o1 = terms[i]
    last = i == len(terms) - 1
    rest = set(range(i + 1, len(terms)))
    later = lambda c, rest=rest: c in out or any(c in terms[j][0] for j in rest)
    # As JAX (filter_singleton_dims): a size-1 dimension whose index the other operand has
    # with another size is squeezed away (it broadcasts); then the indices that only one
    # of the pair has once and nothing later needs are summed (JAX: sum_uniques), then
    # those repeated in one operand (JAX: sum_repeats). Each step takes the later operand
    # first, as JAX's, whose contraction path pops the pair in reverse.
    o1, s1 = _einsum_squeeze_singletons(o1, s1, acc, s0)
    acc, s0 = _einsum_squeeze_singletons(acc, s0, o1, s1)
    o1, s1 = _einsum_sum_private(
        o1, s1, lambda c, s0=s0, s1=s1, later=later: c in s0 or later(c) or s1.count(c) > 1, d)
    acc, s0 = _einsum_sum_private(
        acc, s0, lambda c, s0=s0, s1=s1, later=later: c in s1 or later(c) or s0.count(c) > 1,
        d)
    o1, s1 = _einsum_sum_repeats(o1, s1, lambda c, s0=s0, later=later: c in s0 or later(c), d)
    acc, s0 = _einsum_sum_repeats(acc, s0, lambda c, s1=s1, later=later: c in s1 or later(c),
                                  d)
    common = [c for c in s0 if c in s1]
    # As JAX orders them (the order decides XLA's summation order, so the last bit):
    # contracted indices sorted by name, batch indices in the output's order, and the
    # operands swapped when their natural result order is not the output's.
    batch = [c for c in (out if last else s0) if c in common and later(c)]
    contract = sorted(c for c in common if not later(c))
    dims = ((tuple(s0.index(c) for c in contract), tuple(s1.index(c) for c in contract)),
            (tuple(s0.index(c) for c in batch), tuple(s1.index(c) for c in batch)))
    free0, free1 = ("".join(c for c in s if c not in common) for s in (s0, s1))
    s_next = "".join(batch) + free0 + free1
    lhs, rhs = acc, o1
    if last and s_next != out:  # as JAX: then the later operand goes first
        s_next, lhs, rhs = "".join(batch) + free1 + free0, o1, acc
        dims = ((dims[0][1], dims[0][0]), (dims[1][1], dims[1][0]))
    if core.get_aval(lhs).dtype != core.get_aval(rhs).dtype:  # one summed in `d` above:
        # JAX's dot_general takes mixed dtypes, and on CPU converts both to the result's
        lhs, rhs = lax.convert_element_type(lhs, d), lax.convert_element_type(rhs, d)
    sh = _last_out_sharding(out_sharding, out, s_next) if last else None
    acc = lax.dot_general(lhs, rhs, dims, precision=precision, preferred_element_type=d,
                          out_sharding=sh)
    return acc, s_next


def _last_out_sharding(out_sharding, out: str, s0: str):
    """out_sharding, given in the order of `out`, for a contraction whose result has the
    indices `s0` (summed-out indices left unsplit)."""
    s = canonicalize_out_sharding(out_sharding, "einsum")
    if s is None:
        return None
    spec = s.spec._normalized_spec_for_aval(len(out))
    return NamedSharding(s.mesh, P(*[spec[out.index(c)] if c in out else None
                                      for c in s0]))


def _einsum_sublists(*args):
    """The sublist form `einsum(x, [0, 1], y, [1, 2], [0, 2])` as (subscripts, operands):
    integers 0-51 name indices a-z, A-Z (as opt_einsum), `...` is an ellipsis."""
    def letters(sub):
        if any(i is not Ellipsis and not 0 <= i < 52 for i in sub):
            raise ValueError(f"einsum: sublist indices must be integers in [0, 52), got {sub}")
        return "".join("..." if i is Ellipsis else string.ascii_letters[i] for i in sub)
    spec = ",".join(letters(sub) for sub in args[1::2][:len(args) // 2])
    if len(args) % 2:
        spec += "->" + letters(args[-1])
    return spec, args[0:len(args) - len(args) % 2:2]


# JAX: jax/_src/numpy/einsum.py _einsum's sum
def _einsum_sum(o, axes, d):
    """`o` summed over `axes` in `d` where that is the wider dtype; bools with `or`."""
    if dtypes.result_type(o, d) != core.get_aval(o).dtype:
        o = lax.convert_element_type(o, d)
    return (lax.reduce_max if core.get_aval(o).dtype == np.bool_ else lax.reduce_sum)(o, axes)


# JAX: jax/_src/numpy/einsum.py sum_repeats, lax._delta
def _einsum_sum_repeats(o, s: str, keep, d):
    """Each index repeated in `s`: the entries off its diagonal masked to 0, then summed over
    all its axes ("ii->"), or all but the last where `keep` wants the index ("ii->i")."""
    for c in dict.fromkeys(s):
        axes = tuple(k for k, x in enumerate(s) if x == c)
        if len(axes) < 2:
            continue
        shape = core.get_aval(o).shape
        base = tuple(shape[k] for k in axes)
        iotas = [lax.broadcasted_iota(np.uint32, base, k) for k in range(len(base))]
        eye = functools.reduce(lax.bitwise_and, [lax.eq(a, b) for a, b in zip(iotas, iotas[1:])])
        if axes != tuple(range(len(shape))):  # (JAX forwards a broadcast to its own shape)
            eye = lax.broadcast_in_dim(eye, shape, axes)
        o = lax.select(eye, o, lax.full_like(o, 0))
        if keep(c):
            o, s = _einsum_sum(o, axes[:-1], d), s.replace(c, "", len(axes) - 1)
        else:
            o, s = _einsum_sum(o, axes, d), s.replace(c, "")
    return o, s


def _einsum_squeeze_singletons(o, s: str, other, s_other: str):
    """`o` without its size-1 dimensions whose index `other` has with another size."""
    shape, other_shape = core.get_aval(o).shape, core.get_aval(other).shape
    drop = tuple(k for k, c in enumerate(s)
                 if shape[k] == 1 and c in s_other and other_shape[s_other.index(c)] != 1)
    if not drop:
        return o, s
    return lax.squeeze(o, drop), "".join(c for k, c in enumerate(s) if k not in drop)


def _einsum_sum_private(o, s: str, keep, d):
    """`o` with the indices of `s` that `keep` rejects summed out."""
    axes = tuple(k for k, c in enumerate(s) if not keep(c))
    if not axes:
        return o, s
    return _einsum_sum(o, axes, d), "".join(c for c in s if keep(c))


def einsum_path(subscripts, *operands, optimize="auto"):
    """The contraction order `einsum` uses, in opt_einsum's format: `(path, description)`,
    where path lists the operand pairs contracted in turn (each result appended to the end).
    minijax always contracts left to right, so the path is `[(0, 1)] * (n - 1)` whatever
    `optimize` says; JAX returns opt_einsum's cost-optimised path, which can differ for three
    or more operands. Raises ValueError for subscripts that do not match the operands."""
    if not isinstance(subscripts, str):
        subscripts, operands = _einsum_sublists(subscripts, *operands)
    lhs = subscripts.replace(" ", "").split("->")[0]
    n = len(lhs.split(","))
    if n != len(operands):
        raise ValueError(f"einsum_path: {n} operand subscripts for {len(operands)} operands")
    path = [(0, 1)] * (n - 1) if n > 1 else [(0,)]
    shapes = ", ".join(str(core.get_aval(asarray(o)).shape) for o in operands)
    return path, (f"  Complete contraction:  {subscripts}\n  Operand shapes: {shapes}\n"
                  "  Order: left to right, one dot_general per pair (minijax's einsum)")
