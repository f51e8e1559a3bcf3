"""Small list helpers used by every interpreter.

Mirrors jax/_src/util.py (safe_map, safe_zip, unzip2, split_list, partition_list,
canonicalize_axis, and a bounded memo table in the role of its `cache`).
"""

from __future__ import annotations

import operator
from typing import Any, Callable, Iterable, Sequence, TypeVar

T = TypeVar("T")


# JAX: jax/_src/util.py safe_map — differs: returns a list, same as JAX's
def safe_map(f: Callable[..., T], *args: Iterable) -> list[T]:
    args = [list(a) for a in args]
    n = len(args[0])
    for a in args[1:]:
        if len(a) != n:
            raise ValueError(f"safe_map: length mismatch {[len(a) for a in args]}")
    return list(map(f, *args))


# JAX: jax/_src/util.py safe_zip
def safe_zip(*args: Iterable) -> list[tuple]:
    args = [list(a) for a in args]
    n = len(args[0])
    for a in args[1:]:
        if len(a) != n:
            raise ValueError(f"safe_zip: length mismatch {[len(a) for a in args]}")
    return list(zip(*args))


# JAX: jax/_src/util.py unzip2
def unzip2(pairs: Iterable[tuple[Any, Any]]) -> tuple[list, list]:
    xs, ys = [], []
    for x, y in pairs:
        xs.append(x)
        ys.append(y)
    return xs, ys


# JAX: jax/_src/util.py split_list
def split_list(xs: Sequence[T], ns: Sequence[int]) -> list[list[T]]:
    xs = list(xs)
    out = []
    for n in ns:
        out.append(xs[:n])
        xs = xs[n:]
    out.append(xs)
    return out


# JAX: jax/_src/util.py partition_list
def partition_list(bs: Sequence[bool], xs: Sequence[T]) -> tuple[list[T], list[T]]:
    falses, trues = [], []
    for b, x in safe_zip(bs, xs):
        (trues if b else falses).append(x)
    return falses, trues


# JAX: jax/_src/util.py merge_lists
def merge_lists(bs: Sequence[bool], falses: Sequence[T], trues: Sequence[T]) -> list[T]:
    fi, ti = iter(falses), iter(trues)
    out = [next(ti) if b else next(fi) for b in bs]
    assert next(fi, None) is None and next(ti, None) is None
    return out


# JAX: jax/_src/util.py canonicalize_axis
def canonicalize_axis(axis, num_dims: int) -> int:
    """`axis` (negative counts from the end) as an index in [0, num_dims). Raises ValueError
    if it is out of range, TypeError if it is not an integer."""
    axis = operator.index(axis)
    if not -num_dims <= axis < num_dims:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {num_dims}")
    return axis + num_dims if axis < 0 else axis


# JAX: jax/_src/util.py cache — differs: a plain dict the caller fills, emptied when full
# (JAX's is an LRU cache in C++ wrapping a function)
class BoundedCache(dict):
    """A memo table that cannot grow without end: `put(key, value)` first empties it once it
    holds `maxsize` entries (an eager loop over many shapes, say), then stores and returns
    `value`. Reading is a dict's own `get`, so a cache hit costs no more than a dict's."""

    __slots__ = ("maxsize",)

    def __init__(self, maxsize: int) -> None:
        super().__init__()
        self.maxsize = maxsize

    def put(self, key, value):
        if len(self) >= self.maxsize:
            self.clear()
        self[key] = value
        return value
