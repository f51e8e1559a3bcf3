"""minijax: JAX rebuilt from scratch, to read next to the real thing.

The public names mirror `jax`: `minijax.jit`, `minijax.grad`, `minijax.numpy`, ...
Start reading at minijax/core.py (chapters/02-tracing.md).
"""

import types as _types

from minijax import compiler, core, dispatch, xla_bridge  # noqa: F401  (first: dispatch installs the eager path in core)
from minijax import lax, nn, numpy, scipy, tree, tree_util  # noqa: F401
from minijax import debug, errors, extend, ffi, flatten_util, image, ops, random  # noqa: F401
from minijax import state  # noqa: F401  (refs: installs ref[...] indexing on tracers)
from minijax.tpu import linalg as _tpu_linalg  # noqa: F401  (svd's lowering without LAPACK)
from minijax.api import (  # noqa: F401
    block_until_ready, device_count, device_put, devices, eval_shape, grad, hessian, jacfwd,
    jacobian, jacrev, jit, jvp, linearize, local_devices, make_jaxpr, value_and_grad, vjp, vmap,
)
from minijax.api import disable_jit, effects_barrier  # noqa: F401
from minijax.api import (  # noqa: F401
    clear_caches, copy_to_host_async, device_get, fwd_and_bwd, linear_transpose, live_arrays,
    make_array_from_process_local_data, make_array_from_single_device_arrays, named_call,
    named_scope)
from minijax.environment_info import print_environment_info  # noqa: F401
from minijax.xla_bridge import (  # noqa: F401
    default_backend, host_count, host_id, host_ids, local_device_count, process_count,
    process_index, process_indices)
from minijax.callback import pure_callback  # noqa: F401
from minijax import effects, experimental  # noqa: F401
from minijax.array import Array, Shard  # noqa: F401
from minijax.config import (  # noqa: F401
    check_tracer_leaks, config, default_matmul_precision, numpy_dtype_promotion,
    transfer_guard, transfer_guard_host_to_device)
from minijax.config import (  # noqa: F401  (JAX's options as context managers)
    allow_f16_reductions, array_garbage_collection_guard, auto_pcast, checking_leaks,
    debug_infs, debug_key_reuse, debug_nans, default_device, default_prng_impl, enable_checks,
    enable_custom_prng, enable_x64, explain_cache_misses, jax2tf_associative_scan_reductions,
    legacy_prng_key, log_compiles, make_user_context, no_execution, no_tracing,
    numpy_rank_promotion, remove_size_one_mesh_axis_from_type, softmax_custom_jvp, thread_guard,
    threefry_partitionable, transfer_guard_device_to_device, transfer_guard_device_to_host)
from minijax.core import (  # noqa: F401
    ConcretizationTypeError, ShapeDtypeStruct, TracerArrayConversionError,
    TracerIntegerConversionError, UnexpectedTracerError,
)
from minijax.core import ensure_compile_time_eval, eval_jaxpr  # noqa: F401
from minijax.dtypes import float0  # noqa: F401
from minijax.core import get_aval as typeof  # noqa: F401  (JAX 0.10's name)
from minijax.custom_derivatives import (  # noqa: F401
    closure_convert, custom_gradient, custom_jvp, custom_vjp)
from minijax.ad_checkpoint import checkpoint, checkpoint_policies, remat  # noqa: F401
from minijax.lax.lax import stop_gradient  # noqa: F401
from minijax.tree_util import tree_flatten, tree_leaves, tree_map, tree_structure, tree_unflatten  # noqa: F401

from minijax import sharding  # noqa: F401
from minijax.api import make_array_from_callback  # noqa: F401
from minijax.sharding import NamedSharding, P, make_mesh, set_mesh  # noqa: F401
from minijax.shard_map import shard_map, smap  # noqa: F401
from minijax.pjit import reshard  # noqa: F401
from minijax.pmap import pmap  # noqa: F401
from minijax.state import ds  # noqa: F401
from minijax import custom_batching, dlpack, export, monitoring, profiler, ref  # noqa: F401
from minijax.ref import Ref, empty_ref, free_ref, freeze, new_ref  # noqa: F401

from minijax.version import __version__  # noqa: F401

memory = _types.SimpleNamespace(Space=dispatch.MemorySpace)  # as JAX's jax.memory


def __getattr__(name):  # a JAX public name minijax lacks: say so (docs/public_surface.md)
    if name == "Device":  # jaxlib's type, found lazily: `import minijax` loads no JAX
        return xla_bridge.device_class()
    from minijax._unimplemented import missing  # not at the top: only a missing name needs it
    raise missing(__name__, name)
