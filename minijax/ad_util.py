"""Symbolic zeros and the primitive that adds tangents/cotangents.

`Zero(aval)` stands for an all-zeros tangent without materializing it, so jvp rules can skip
work for inputs that do not depend on the differentiated arguments. Mirrors jax/_src/ad_util.py.
"""

from __future__ import annotations

from minijax import core
from minijax.core import ShapedArray


# JAX: jax/_src/ad_util.py Zero
class Zero:
    """A symbolic zero tangent (or cotangent) of type `aval`."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray) -> None:
        self.aval = aval

    @staticmethod
    def from_primal_value(x) -> "Zero":
        return Zero(core.get_aval(x).to_tangent_aval())

    def __repr__(self) -> str:
        return f"Zero({self.aval.str_short()})"


# JAX: jax/_src/ad_util.py add_jaxvals_p — its rules are registered in minijax/lax/lax.py
add_jaxvals_p = core.Primitive("add_any")
