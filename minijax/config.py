"""Process-wide options, read like JAX's: `minijax.config.update("jax_enable_x64", True)`.

Mirrors jax/_src/config.py (which has hundreds of flags, thread-local contexts and env variables).
"""

from __future__ import annotations

import contextlib
from typing import Any


# JAX: jax/_src/config.py Config — differs: a plain dict of values, no per-thread scopes
class Config:
    """Options: jax_enable_x64 (bool, default False): 64-bit dtypes are kept instead of
    being narrowed to 32 bits; jax_explain_cache_misses (bool): warn why `jit` retraced;
    jax_compilation_cache_dir (str or None): a directory where compiled executables are
    stored and looked up across processes (the persistent compilation cache);
    jax_numpy_dtype_promotion ('standard' or 'strict'): with 'strict', arrays of different
    strong dtypes do not promote implicitly (minijax.dtypes.TypePromotionError);
    jax_debug_nans / jax_debug_infs (bool): raise FloatingPointError naming the primitive
    that first produced a NaN / an infinity (a jitted function with one in its outputs is run
    again op by op to find it); jax_disable_jit (bool): `jit(f)` calls `f` itself
    (`minijax.disable_jit()`); jax_log_compiles (bool): log each trace and compilation of a
    jitted function, with its name, the types and why it was traced (chapters/15-debugging.md)."""

    _defaults = {"jax_enable_x64": False, "jax_explain_cache_misses": False,
                 "jax_compilation_cache_dir": None, "jax_numpy_dtype_promotion": "standard",
                 "jax_debug_nans": False, "jax_debug_infs": False, "jax_disable_jit": False,
                 "jax_log_compiles": False}
    _choices = {"jax_numpy_dtype_promotion": ("standard", "strict")}

    # the options that change what tracing produces, so `jit` keys its caches on them
    # JAX: jax/_src/config.py trace_context
    _trace_options = ("jax_enable_x64", "jax_numpy_dtype_promotion")
    # the options eager primitives depend on, so minijax/dispatch.py keys its callables on them
    _eager_options = ("jax_enable_x64", "jax_debug_nans", "jax_debug_infs")

    def __init__(self) -> None:
        # plain instance attributes: reading an option on the eager hot path is one lookup
        self.__dict__.update(self._defaults)
        self._set_trace_context()

    def _set_trace_context(self) -> None:
        # a new tuple object only when a value changed: `jit` and the eager path compare them
        # by identity
        for attr, names in (("trace_context", self._trace_options),
                            ("eager_context", self._eager_options)):
            ctx = tuple(self.__dict__[n] for n in names)
            if ctx != self.__dict__.get(attr):
                self.__dict__[attr] = ctx

    def update(self, name: str, value: Any) -> None:
        if name not in self._defaults:
            raise AttributeError(f"minijax.config: unknown option {name!r}; "
                                 f"known: {sorted(self._defaults)}")
        if name in self._choices and value not in self._choices[name]:
            raise ValueError(f"{value!r} is not a valid value for {name}; expected one of "
                             f"{self._choices[name]}")
        self.__dict__[name] = value
        self._set_trace_context()

    def __getattr__(self, name: str) -> Any:  # only called for names that are not options
        raise AttributeError(f"minijax.config has no option {name!r}")

    @contextlib.contextmanager
    def override(self, name: str, value: Any):
        """Temporarily set an option (tests use this for x64)."""
        old = getattr(self, name)
        self.update(name, value)
        try:
            yield
        finally:
            self.__dict__[name] = old
            self._set_trace_context()


config = Config()


# JAX: jax/_src/config.py numpy_dtype_promotion
def numpy_dtype_promotion(value: str):
    """A context manager setting `jax_numpy_dtype_promotion` ('standard' or 'strict') inside
    its block. Raises ValueError for another value."""
    return config.override("jax_numpy_dtype_promotion", value)
