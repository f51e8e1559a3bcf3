"""`print_environment_info`: the versions and devices to quote in a bug report.
Mirrors jax/_src/environment_info.py.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import sys

import numpy as np

from minijax import xla_bridge
from minijax.api import devices
from minijax.version import __version__


# JAX: jax/_src/environment_info.py print_environment_info — differs: minijax's version
# first, then the jax/jaxlib it compiles with
def print_environment_info(return_string: bool = False) -> str | None:
    """Print (or, with `return_string`, return) minijax's, jax's, jaxlib's, NumPy's and
    Python's versions, the devices, the process count, the platform and the JAX_/XLA_
    environment variables, one per line in JAX's layout."""
    devs = devices()
    lines = [f"minijax: {__version__}",
             f"jax:    {importlib.metadata.version('jax')}",
             f"jaxlib: {importlib.metadata.version('jaxlib')}",
             f"numpy:  {np.__version__}",
             f"python: {sys.version.replace(chr(10), ' ')}",
             f"device info: {devs[0].device_kind}-{len(devs)}, "
             f"{xla_bridge.local_device_count()} local devices",
             f"process_count: {xla_bridge.process_count()}",
             f"platform: {platform.uname()}"]
    lines += [f"{k}={v}" for k, v in os.environ.items() if k.startswith(("JAX_", "XLA_"))]
    info = "\n".join(lines)
    if return_string:
        return info
    print(info)
    return None
