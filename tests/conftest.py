"""Test-session set-up: eight CPU devices for the sharding tests, requested before JAX loads,
and the reverse-mode path chosen by MINIJAX_DIRECT_LINEARIZE."""

import os

_flags = os.environ.get("XLA_FLAGS", "")
if "xla_force_host_platform_device_count" not in _flags:
    os.environ["XLA_FLAGS"] = (_flags + " --xla_force_host_platform_device_count=8").strip()

# MINIJAX_DIRECT_LINEARIZE=1 (or 0) runs the suite with reverse mode on the direct path
# (`ad.LinearizeTrace`) or the classic one (jvp + partial evaluation), whatever the default is.
_direct = os.environ.get("MINIJAX_DIRECT_LINEARIZE")
if _direct is not None:
    if _direct not in ("0", "1"):
        raise ValueError(f"MINIJAX_DIRECT_LINEARIZE must be 0 or 1, got {_direct!r}")
    import minijax  # after XLA_FLAGS, which must be set before JAX loads

    minijax.config.update("jax_use_direct_linearize", _direct == "1")
