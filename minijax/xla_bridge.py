"""Which backend, devices and processes minijax runs on, and the names jaxlib gives its runtime
pieces (the device type, the runtime error, the profiler, FFI and LAPACK targets).

This is a door to the backend on the ground floor: it imports jax and jaxlib (lazily: `import
minijax` loads no JAX) and no minijax module but `config`, so that the layers that only ask
"which backend?" (meshes, shardings, lowering) need nothing above them. One process, JAX's
default backend (or the first of `jax_platforms`). Mirrors jax/_src/xla_bridge.py (where JAX
also picks among plugins); compiling is `minijax/compiler.py`, running `interpreters/pxla.py`.
"""

from __future__ import annotations

import functools
import os
import warnings
from typing import Any

import numpy as np

from minijax.config import config


# JAX: jax/_src/xla_bridge.py get_backend — differs: no platform argument
def get_backend():
    """XLA's client: JAX's default one, or with `jax_platforms` set (before the first
    compile) the first it lists; every platform listed must start, or RuntimeError, as in
    JAX."""
    import jax.extend.backend as jeb
    if not config.jax_platforms:
        return jeb.get_backend()
    return [jeb.get_backend(p) for p in config.jax_platforms.split(",")][0]


@functools.cache
# JAX: jax/_src/lib xla_client.Device (`jax.Device`)
def device_class() -> type:
    """jaxlib's Device type: every device of `get_backend()` is one."""
    from jaxlib._jax import Device
    return Device


# JAX: jax/errors.py JaxRuntimeError
def runtime_error_type() -> type:
    """jaxlib's JaxRuntimeError, what XLA's failures raise (`minijax.errors.JaxRuntimeError`)."""
    from jaxlib._jax import JaxRuntimeError
    return JaxRuntimeError


# JAX: jax/_src/profiler.py (which reads jaxlib's _profiler the same way)
def profiler_runtime():
    """jaxlib's profiler bindings: ProfilerSession, ProfileOptions, TraceMe."""
    from jaxlib import _profiler
    return _profiler


# JAX: jax/_src/interpreters/pxla.py get_default_device
def default_device():
    """Where uncommitted arrays live and computations on them run: `jax_default_device` (a
    device, or a platform name for that backend's first device) or the backend's first."""
    device = config.jax_default_device
    if device is None:
        return _first_device()
    if isinstance(device, str):
        return _first_device(device)
    return device


@functools.cache
def _first_device(platform: str | None = None):
    if platform is None:
        return get_backend().local_devices()[0]
    import jax.extend.backend as jeb
    return jeb.get_backend(platform).local_devices()[0]


def plain_default(device) -> bool:
    """Whether an array on `device` can be a plain Array (no sharding: on the default device):
    only while the default device is the backend's first. Once `jax_default_device` names
    another, arrays placed on a device record it, so that they stay there when it changes."""
    return device == _first_device() and config.jax_default_device is None


# JAX: jax/_src/xla_bridge.py default_backend
def default_backend() -> str:
    """The platform name of the backend computations run on: 'cpu'."""
    return get_backend().platform


# JAX: jax/_src/xla_bridge.py local_device_count
def local_device_count(backend=None) -> int:
    """The number of devices of this process (all of them: minijax runs one process)."""
    return len(get_backend().local_devices())


# JAX: jax/_src/xla_bridge.py process_index
def process_index(backend=None) -> int:
    """This process's index among the processes of the computation: 0."""
    return get_backend().process_index()


# JAX: jax/_src/xla_bridge.py process_count
def process_count(backend=None) -> int:
    """The number of processes whose devices take part: 1 for minijax."""
    return len({d.process_index for d in get_backend().devices()})


# JAX: jax/_src/xla_bridge.py process_indices
def process_indices(backend=None) -> list[int]:
    """The indices of the processes: `[0]` for minijax."""
    return sorted({d.process_index for d in get_backend().devices()})


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


# ---------------------------------------------------------------------------------------------
# Targets of custom calls: FFI handlers and jaxlib's LAPACK kernels
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/ffi.py register_ffi_target
def register_custom_call_target(name: str, fn: Any, platform: str, api_version: int,
                                **kwargs: Any) -> None:
    """Hand the FFI handler `fn` (a PyCapsule) to XLA's `platform` backend as the
    custom-call target `name` (`minijax/ffi.py: register_ffi_target`)."""
    from jaxlib import xla_client
    xla_client.register_custom_call_target(name, fn, platform, api_version, **kwargs)


# JAX: jax/_src/ffi.py include_dir
def ffi_include_dir() -> str:
    """The `include/` folder of the installed jaxlib, which holds XLA's FFI headers."""
    import jaxlib
    return os.path.join(os.path.dirname(os.path.abspath(jaxlib.__file__)), "include")


# JAX: jax/_src/lax/linalg.py register_module_custom_calls
def lapack_target(fn_base: str, dtype) -> str:
    """The name of jaxlib's LAPACK kernel `fn_base` for `dtype` (`lapack_sgetrf_ffi`, ...),
    the target of a lowering's custom call. NotImplementedError if jaxlib has none."""
    # jaxlib's lapack module names the kernels and points them at scipy's LAPACK
    # (`prepare_lapack_call` initializes that); importing jax registered them with XLA
    from jaxlib import lapack
    name = lapack.prepare_lapack_call(fn_base, np.dtype(dtype))
    if name not in lapack._lapack.registrations():
        raise NotImplementedError(f"jaxlib does not provide the LAPACK kernel {name}")
    return name
