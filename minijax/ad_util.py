"""Symbolic zeros and the primitive that adds tangents/cotangents.

`Zero(aval)` stands for an all-zeros tangent without materializing it, so jvp rules can skip
work for inputs that do not depend on the differentiated arguments. Mirrors jax/_src/ad_util.py.
"""

from __future__ import annotations

from typing import Any, Callable

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


# JAX: jax/_src/ad_util.py aval_zeros_likers — filled in by minijax/lax/lax.py
aval_zeros_likers: dict[type, Callable[[Any], Any]] = {}


# JAX: jax/_src/ad_util.py zeros_like_aval
def zeros_like_aval(aval: ShapedArray):
    """An array of zeros of type `aval`, bound under the current trace (numpy for float0)."""
    return aval_zeros_likers[type(aval)](aval)
