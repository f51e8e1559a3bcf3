"""Which backend, devices and processes minijax runs on: one process, the CPU backend of
`minijax/compiler.py`. Mirrors jax/_src/xla_bridge.py (where JAX also picks among plugins).
"""

from __future__ import annotations

import warnings

from minijax import compiler


# JAX: jax/_src/xla_bridge.py default_backend
def default_backend() -> str:
    """The platform name of the backend computations run on: 'cpu'."""
    return compiler.backend().platform


# JAX: jax/_src/xla_bridge.py local_device_count
def local_device_count(backend=None) -> int:
    """The number of devices of this process (all of them: minijax runs one process)."""
    return len(compiler.backend().local_devices())


# JAX: jax/_src/xla_bridge.py process_index
def process_index(backend=None) -> int:
    """This process's index among the processes of the computation: 0."""
    return compiler.backend().process_index()


# JAX: jax/_src/xla_bridge.py process_count
def process_count(backend=None) -> int:
    """The number of processes whose devices take part: 1 for minijax."""
    return len({d.process_index for d in compiler.backend().devices()})


# JAX: jax/_src/xla_bridge.py process_indices
def process_indices(backend=None) -> list[int]:
    """The indices of the processes: `[0]` for minijax."""
    return sorted({d.process_index for d in compiler.backend().devices()})


def _renamed(old: str, new):  # JAX: jax/_src/xla_bridge.py host_id, host_count, host_ids
    def alias(backend=None):
        warnings.warn(f"jax.{old} has been renamed to jax.{new.__name__}. This alias will "
                      "eventually be removed; please update your code.", stacklevel=2)
        return new(backend)
    alias.__name__, alias.__doc__ = old, f"JAX's older name of `{new.__name__}` (warns)."
    return alias


host_id = _renamed("host_id", process_index)
host_count = _renamed("host_count", process_count)
host_ids = _renamed("host_ids", process_indices)
