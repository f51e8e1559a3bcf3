"""PartitionSpec: per array dimension, the mesh axes that dimension is split over.

`P("x", None)` splits dimension 0 over mesh axis "x" and keeps dimension 1 whole; a
`NamedSharding` (minijax/named_sharding.py) pairs a spec with a mesh. Mirrors
jax/_src/partition_spec.py. Taught in chapters/12-sharding.md.
"""

from __future__ import annotations


class _Unconstrained:
    def __repr__(self) -> str:
        return "UNCONSTRAINED"


def _canonicalize_partition(p):
    """One entry of a spec: None, an axis name, or a tuple of names (a 1-tuple is the name)."""
    if p is None or isinstance(p, _Unconstrained):
        return p
    if isinstance(p, (tuple, list)):
        p = tuple(p)
        for a in p:
            if not isinstance(a, str):
                raise TypeError(f"PartitionSpec entries must be None, axis names or tuples "
                                f"of axis names, got {p!r}")
        return p[0] if len(p) == 1 else p
    if isinstance(p, str):
        return p
    raise TypeError(f"PartitionSpec entries must be None, axis names or tuples of axis names, "
                    f"got {p!r}")


# JAX: jax/_src/partition_spec.py P — differs: compared by value (JAX interns instances and
# compares by identity, which gives the same answers); no unreduced/reduced axes yet
class PartitionSpec:
    """Per array dimension: None (not split), a mesh axis name, or a tuple of names (split
    over their product, major to minor). Trailing dimensions left out are not split.
    `P("x")` and `P("x", None)` describe the same layout but are different specs (as in JAX).
    """

    __slots__ = ("_partitions",)
    UNCONSTRAINED = _Unconstrained()

    def __init__(self, *partitions) -> None:
        object.__setattr__(self, "_partitions",
                           tuple(_canonicalize_partition(p) for p in partitions))

    def __setattr__(self, name, value):
        raise AttributeError("PartitionSpec is immutable")

    @property
    def partitions(self) -> tuple:
        return self._partitions

    def __eq__(self, other) -> bool:
        return isinstance(other, PartitionSpec) and self._partitions == other._partitions

    def __hash__(self) -> int:
        return hash(("P", self._partitions))

    def __repr__(self) -> str:
        return f"P({repr(self._partitions)[1:-1]})"

    def __getitem__(self, i):
        return self._partitions[i]

    def __iter__(self):
        return iter(self._partitions)

    def __len__(self) -> int:
        return len(self._partitions)

    def __add__(self, other):
        if isinstance(other, (PartitionSpec, tuple)):
            return PartitionSpec(*self, *other)
        return NotImplemented

    def __radd__(self, other):
        if isinstance(other, tuple):
            return PartitionSpec(*other, *self)
        return NotImplemented

    def index(self, value) -> int:
        return self._partitions.index(_canonicalize_partition(value))

    def count(self, value) -> int:
        return self._partitions.count(_canonicalize_partition(value))

    def _normalized_spec_for_aval(self, ndim: int) -> "PartitionSpec":
        out = [None if isinstance(p, _Unconstrained) else p for p in self._partitions]
        return PartitionSpec(*out, *[None] * (ndim - len(out)))

    def _check_compatible_wrt_shape(self, shape) -> None:
        if len(shape) < len(self._partitions):
            extra = " For scalars the PartitionSpec should be P()" if not shape else ""
            raise ValueError(f"PartitionSpec {self} is only valid for values of rank at least "
                             f"{len(self._partitions)}, but was applied to a value of rank "
                             f"{len(shape)}.{extra}")


P = PartitionSpec


def _axes_of(p) -> tuple:
    if p is None or isinstance(p, _Unconstrained):
        return ()
    return p if isinstance(p, tuple) else (p,)
