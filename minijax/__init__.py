"""minijax: JAX rebuilt from scratch, to read next to the real thing.

The public names mirror `jax`: `minijax.jit`, `minijax.grad`, `minijax.numpy`, ...
Start reading at minijax/core.py (chapters/02-tracing.md).
"""

from minijax import core, dispatch  # noqa: F401  (first: dispatch installs the eager path in core)
from minijax import lax, nn, numpy, scipy, tree, tree_util  # noqa: F401
from minijax import debug, errors, extend, ffi, flatten_util, image, ops, random  # noqa: F401
from minijax import state  # noqa: F401  (refs: installs ref[...] indexing on tracers)
from minijax.api import (  # noqa: F401
    block_until_ready, device_count, device_put, devices, eval_shape, grad, hessian, jacfwd,
    jacobian, jacrev, jit, jvp, linearize, local_devices, make_jaxpr, value_and_grad, vjp, vmap,
)
from minijax.api import disable_jit, effects_barrier  # noqa: F401
from minijax.callback import pure_callback  # noqa: F401
from minijax import effects, experimental  # noqa: F401
from minijax.array import Array  # noqa: F401
from minijax.config import (  # noqa: F401
    check_tracer_leaks, config, default_device, default_matmul_precision, numpy_dtype_promotion,
    transfer_guard, transfer_guard_host_to_device)
from minijax.core import (  # noqa: F401
    ConcretizationTypeError, ShapeDtypeStruct, TracerArrayConversionError,
    TracerIntegerConversionError, UnexpectedTracerError,
)
from minijax.core import eval_jaxpr  # noqa: F401
from minijax.core import get_aval as typeof  # noqa: F401  (JAX 0.10's name)
from minijax.custom_derivatives import custom_jvp, custom_vjp  # noqa: F401
from minijax.ad_checkpoint import checkpoint, checkpoint_policies, remat  # noqa: F401
from minijax.lax.lax import stop_gradient  # noqa: F401
from minijax.tree_util import tree_flatten, tree_leaves, tree_map, tree_structure, tree_unflatten  # noqa: F401,E501

from minijax import sharding  # noqa: F401
from minijax.api import make_array_from_callback  # noqa: F401
from minijax.sharding import P, make_mesh, set_mesh  # noqa: F401
from minijax.shard_map import shard_map  # noqa: F401,E402

__version__ = "0.1.0"


def __getattr__(name):  # a JAX public name minijax lacks: say so (docs/public_surface.md)
    from minijax._unimplemented import missing  # not at the top: only a missing name needs it
    raise missing(__name__, name)
