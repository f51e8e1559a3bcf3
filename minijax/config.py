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
    stored and looked up across processes (the persistent compilation cache)."""

    _defaults = {"jax_enable_x64": False, "jax_explain_cache_misses": False,
                 "jax_compilation_cache_dir": None}

    def __init__(self) -> None:
        # plain instance attributes: reading an option on the eager hot path is one lookup
        self.__dict__.update(self._defaults)

    def update(self, name: str, value: Any) -> None:
        if name not in self._defaults:
            raise AttributeError(f"minijax.config: unknown option {name!r}; "
                                 f"known: {sorted(self._defaults)}")
        self.__dict__[name] = value

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


config = Config()
