"""Process-wide options, read like JAX's: `minijax.config.update("jax_enable_x64", True)`.

Mirrors jax/_src/config.py (which has hundreds of flags, thread-local contexts and env variables).
"""

from __future__ import annotations

import contextlib
import functools
import os
import warnings
from typing import Any

# JAX's 0.10.2 options that minijax does not model: `update` keeps the value and warns once
_JAX_ONLY = frozenset("""
    check_vma jax2tf_associative_scan_reductions
    jax2tf_default_native_serialization jax_allow_f16_reductions
    jax_array_garbage_collection_guard jax_auto_pcast jax_backend_target
    jax_bcoo_cusparse_lowering jax_captured_constants_report_frames
    jax_captured_constants_warn_bytes jax_check_proxy_envs jax_check_static_indices
    jax_compilation_cache_check_contents
    jax_compilation_cache_expect_pgle jax_compilation_cache_include_metadata_in_key
    jax_compilation_cache_max_size jax_compiler_detailed_logging_min_ops
    jax_compiler_enable_remat_pass jax_cpu_collectives_implementation
    jax_cpu_enable_async_dispatch jax_cpu_get_global_topology_timeout_minutes
    jax_cpu_get_local_topology_timeout_minutes jax_cross_host_transfer_socket_address
    jax_cross_host_transfer_timeout_seconds jax_cross_host_transfer_transfer_size
    jax_cross_host_transport_addresses jax_cuda_visible_devices jax_custom_vjp3
    jax_debug_key_reuse jax_debug_leaked_clients_on_clear_backends jax_debug_log_modules
    jax_disable_bwd_checks
    jax_disable_most_optimizations jax_disable_vmap_shmap_error
    jax_disallow_mesh_context_manager jax_distributed_debug jax_dump_ir_modes jax_dump_ir_to
    jax_embedded_constants_max_bytes jax_enable_compilation_cache jax_enable_custom_prng
    jax_enable_pgle jax_enable_preemption_service jax_enable_recoverability
    jax_error_checking_behavior_divide jax_error_checking_behavior_nan
    jax_error_checking_behavior_oob jax_exec_time_optimization_effort
    jax_experimental_unsafe_xla_runtime_errors jax_explicit_x64_dtypes
    jax_export_ignore_forward_compatibility
    jax_force_dcn_cross_host_transfers jax_high_dynamic_range_gumbel
    jax_hlo_source_file_canonicalization_regex jax_include_debug_info_in_dumps
    jax_include_full_tracebacks_in_locations jax_legacy_prng_key jax_log_checkpoint_residuals
    jax_logging_level jax_memory_fitting_effort jax_memory_fitting_level jax_mock_gpu_topology
    jax_mosaic_allow_hlo jax_mutable_array_checks jax_no_execution jax_no_tracing
    jax_num_cpu_devices jax_oneapi_visible_devices jax_optimization_level
    jax_pallas_enable_debug_checks jax_pallas_poison_buffers jax_pallas_use_mosaic_gpu
    jax_pallas_verbose_errors jax_persistent_cache_enable_xla_caches
    jax_pgle_aggregation_percentile jax_pgle_profiling_runs jax_pjrt_client_create_options
    jax_platform_name jax_pprint_use_color jax_ragged_dot_use_gpu_pallas_triton_lowering
    jax_ragged_dot_use_ragged_dot_instruction jax_random_seed_offset jax_refs_to_pins jax_remat3
    jax_remove_custom_partitioning_ptr_from_cache_key jax_remove_size_one_mesh_axis_from_type
    jax_rocm_visible_devices jax_scan3 jax_send_traceback_to_runtime jax_serialization_version
    jax_share_binary_between_hosts jax_share_binary_between_hosts_timeout_ms
    jax_softmax_custom_jvp jax_sort_devices_by_process_index jax_source_url_schema
    jax_thread_guard jax_threefry_gpu_kernel_lowering jax_traceback_in_locations_limit
    jax_tracer_error_num_traceback_frames jax_use_emit_pipeline_primitive
    jax_use_magma jax_use_shardy_partitioner jax_use_simplified_jaxpr_constants jax_xla_backend
    jax_xla_profile_version mock_num_gpu_processes""".split())


_UNSET = object()
_GUARD_LEVELS = (None, "allow", "log", "disallow", "log_explicit", "disallow_explicit")


# JAX: jax/_src/config.py Config — differs: a plain dict of values, no per-thread scopes
class Config:
    """Options: jax_enable_x64 (bool, default False): 64-bit dtypes are kept instead of
    being narrowed to 32 bits; jax_explain_cache_misses (bool): warn why `jit` retraced;
    jax_compilation_cache_dir (str or None): a directory where compiled executables are
    stored and looked up across processes (the persistent compilation cache), for programs
    that took at least jax_persistent_cache_min_compile_time_secs (1.0) to compile and
    serialize to at least jax_persistent_cache_min_entry_size_bytes (0); a directory that
    cannot be written warns once, or raises with jax_raise_persistent_cache_errors;
    jax_numpy_dtype_promotion ('standard' or 'strict'): with 'strict', arrays of different
    strong dtypes do not promote implicitly (minijax.dtypes.TypePromotionError);
    jax_numpy_rank_promotion ('allow', 'warn' or 'raise'): what `jnp` does when it adds
    leading axes to broadcast operands of different ranks;
    jax_debug_nans / jax_debug_infs (bool): raise FloatingPointError naming the primitive
    that first produced a NaN / an infinity (a jitted function with one in its outputs is run
    again op by op to find it); jax_disable_jit (bool): `jit(f)` calls `f` itself
    (`minijax.disable_jit()`); jax_log_compiles (bool): log each trace and compilation of a
    jitted function, with its name, the types and why it was traced (chapters/15-debugging.md);
    jax_enable_checks (bool): type-check every jaxpr traced (`core.check_jaxpr`);
    jax_platforms (None or a comma-separated list): the backends to use, of which minijax
    has only 'cpu'; jax_default_prng_impl ('threefry2x32', 'rbg', 'unsafe_rbg': of keys
    made without `impl=` and raw keys), jax_threefry_partitionable (True, minijax's layout):
    other values raise NotImplementedError; jax_default_matmul_precision (None, a
    `lax.Precision` name or a dot-algorithm preset name): the precision of every
    `dot_general` given none (in its jaxpr and its lowering; presets raise when used);
    jax_traceback_filtering ('auto', the default, or 'off', 'tracebackhide', 'remove_frames',
    'quiet_remove_frames'; the environment variable JAX_TRACEBACK_FILTERING sets the default):
    how much of minijax's own frames an error raised through `jit`, `grad`, `vmap`... shows
    (minijax/traceback_util.py);
    jax_transfer_guard (and its _host_to_device part): "log" / "disallow" a host value's
    implicit copy to the device (a NumPy value or Python scalar passed to `jit`),
    "log_explicit" / "disallow_explicit" explicit ones (`device_put`) too; the device-to-host
    and device-to-device parts are accepted (on CPU, as in JAX, they guard nothing);
    jax_check_tracer_leaks (bool): a tracer of `jit`/`make_jaxpr`/`vmap` still alive when its
    trace ends raises Exception ("Leaked trace ...");
    jax_default_device (None, a device or a platform name): where uncommitted arrays are
    placed and computations on uncommitted operands run (None: the backend's first device);
    jax_use_direct_linearize (bool): reverse mode linearizes with `ad.LinearizeTrace`
    instead of jvp + partial evaluation (True, JAX's default; False picks the classic path,
    see chapters/06-reverse-mode.md); eager_constant_folding (bool): while tracing, a
    primitive whose operands are all concrete runs eagerly (`minijax.ensure_compile_time_eval`).

    Any other option of JAX 0.10.2 is accepted with one warning saying minijax does not model
    it (its value is kept); a name JAX does not know raises AttributeError as in JAX."""

    _defaults = {"jax_enable_x64": False, "jax_explain_cache_misses": False,
                 "jax_compilation_cache_dir": None, "jax_numpy_dtype_promotion": "standard",
                 "jax_debug_nans": False, "jax_debug_infs": False, "jax_disable_jit": False,
                 "jax_log_compiles": False, "jax_numpy_rank_promotion": "allow",
                 "jax_persistent_cache_min_compile_time_secs": 1.0,
                 "jax_persistent_cache_min_entry_size_bytes": 0,
                 "jax_raise_persistent_cache_errors": False, "jax_enable_checks": False,
                 "jax_platforms": None, "jax_default_prng_impl": "threefry2x32",
                 "jax_threefry_partitionable": True, "jax_default_matmul_precision": None,
                 "jax_traceback_filtering": os.environ.get("JAX_TRACEBACK_FILTERING", "auto"),
                 "jax_transfer_guard": None,
                 "jax_transfer_guard_host_to_device": None,
                 "jax_transfer_guard_device_to_host": None,
                 "jax_transfer_guard_device_to_device": None, "jax_check_tracer_leaks": False,
                 "jax_export_calling_convention_version": 10,
                 "jax_use_direct_linearize": True, "eager_constant_folding": False,
                 "jax_default_device": None}
    # JAX: jax/_src/config.py enum_state (the values JAX takes), and the one minijax
    # implements where it has only one
    _choices = {"jax_numpy_dtype_promotion": ("standard", "strict"),
                "jax_numpy_rank_promotion": ("allow", "warn", "raise"),
                "jax_traceback_filtering": ("off", "tracebackhide", "remove_frames",
                                            "quiet_remove_frames", "auto"),
                "jax_default_prng_impl": ("threefry2x32", "threefry4x32", "rbg", "unsafe_rbg",
                                          "philox2x32", "philox4x32"),
                "jax_default_matmul_precision": (
                    None, "default", "high", "highest", "bfloat16", "tensorfloat32", "float32",
                    "ANY_F8_ANY_F8_F32", "ANY_F8_ANY_F8_F32_FAST_ACCUM", "ANY_F8_ANY_F8_ANY",
                    "ANY_F8_ANY_F8_ANY_FAST_ACCUM", "F16_F16_F16", "F16_F16_F32",
                    "BF16_BF16_BF16", "BF16_BF16_F32", "BF16_BF16_F32_X3", "BF16_BF16_F32_X6",
                    "BF16_BF16_F32_X9", "TF32_TF32_F32", "TF32_TF32_F32_X3", "F32_F32_F32",
                    "F64_F64_F64"),
                **{f"jax_transfer_guard{d}": _GUARD_LEVELS for d in (
                    "", "_host_to_device", "_device_to_host", "_device_to_device")}}
    _implemented = {"jax_default_prng_impl": ("threefry2x32", "rbg", "unsafe_rbg"),
                    "jax_threefry_partitionable": (True,)}

    # the options that change what tracing produces, so `jit` keys its caches on them
    # JAX: jax/_src/config.py trace_context
    _trace_options = ("jax_enable_x64", "jax_numpy_dtype_promotion",
                      "jax_numpy_rank_promotion", "jax_default_matmul_precision",
                      "jax_use_direct_linearize", "jax_default_device",
                      "compute_on_context_manager")
    # the options eager primitives depend on, so minijax/dispatch.py keys its callables on them
    _eager_options = ("jax_enable_x64", "jax_debug_nans", "jax_debug_infs",
                      "jax_default_device")

    def __init__(self) -> None:
        # plain instance attributes: reading an option on the eager hot path is one lookup
        self.__dict__.update(self._defaults)
        self.__dict__["_warned"] = set()
        self.__dict__["_default_device_set"] = False
        # JAX: jax/_src/config.py compute_on_context_manager — a trace state, not an option
        # `update` accepts: `minijax.experimental.compute_on` sets it
        self.__dict__["compute_on_context_manager"] = None
        self._set_trace_context()

    @contextlib.contextmanager
    def trace_state(self, name: str, value: Any):
        """Set a trace state that is not an option (`compute_on_context_manager`) inside the
        block. `jit` keys its caches on it."""
        prev, self.__dict__[name] = self.__dict__[name], value
        self._set_trace_context()
        try:
            yield
        finally:
            self.__dict__[name] = prev
            self._set_trace_context()

    def _set_trace_context(self) -> None:
        # a new tuple object only when a value changed: `jit` and the eager path compare them
        # by identity
        for attr, names in (("trace_context", self._trace_options),
                            ("eager_context", self._eager_options)):
            ctx = tuple(self.__dict__[n] for n in names)
            if ctx != self.__dict__.get(attr):
                self.__dict__[attr] = ctx
        # whether a cached jit call may run its program itself (minijax/pjit.py JitWrapped)
        self.__dict__["_plain_dispatch"] = not (
            self.jax_debug_nans or self.jax_debug_infs or self._default_device_set)

    def update(self, name: str, value: Any) -> None:
        if name in _JAX_ONLY:
            if name not in self._warned:
                self._warned.add(name)
                warnings.warn(f"minijax does not model the JAX option {name}: its value is "
                              "kept, but changes nothing", stacklevel=2)
            self.__dict__[name] = value
            return
        if name not in self._defaults:  # JAX: jax/_src/config.py Config.update
            raise AttributeError(f"Unrecognized config option: {name}")
        choices = self._choices.get(name)
        if choices is not None and value not in choices:
            none = "None or " if None in choices else ""
            raise ValueError(f"new enum value must be {none}in "
                             f"{[c for c in choices if c is not None]}, got {value} of "
                             f"type {type(value)}.")
        if name == "jax_default_device":
            _check_default_device(value)
            self.__dict__["_default_device_set"] = True  # arrays may now be on other devices
        if name in self._implemented and value not in self._implemented[name]:
            raise NotImplementedError(f"minijax implements {name} in "
                                      f"{self._implemented[name]!r} only, not {value!r}")
        self.__dict__[name] = value
        self._set_trace_context()

    def __getattr__(self, name: str) -> Any:  # only called for names that are not options
        if name in _JAX_ONLY:
            raise AttributeError(f"minijax does not model the JAX option {name} (set it with "
                                 "config.update to keep a value)")
        raise AttributeError(f"'Config' object has no attribute {name!r}")

    @contextlib.contextmanager
    def override(self, name: str, value: Any):
        """Temporarily set an option (tests use this for x64)."""
        old = self.__dict__.get(name, _UNSET)  # an option not modelled may have no value yet
        self.update(name, value)
        try:
            yield
        finally:
            if old is _UNSET:
                del self.__dict__[name]
            else:
                self.__dict__[name] = old
            self._set_trace_context()


config = Config()


# JAX: jax/_src/config.py _validate_default_device
def _check_default_device(value: Any) -> None:
    if value is None or value in ("cpu", "gpu", "tpu") or "Device" in str(type(value)):
        return
    raise ValueError("jax.default_device must be passed either a Device object (e.g. "
                     "`jax.devices('cpu')[0]`) or a platform name string like 'cpu' or 'gpu'"
                     f", got: {value!r}")


# JAX: jax/_src/config.py numpy_dtype_promotion
def numpy_dtype_promotion(value: str):
    """A context manager setting `jax_numpy_dtype_promotion` ('standard' or 'strict') inside
    its block. Raises ValueError for another value."""
    return config.override("jax_numpy_dtype_promotion", value)


# JAX: jax/_src/config.py default_matmul_precision
def default_matmul_precision(value):
    """A context manager setting `jax_default_matmul_precision` inside its block."""
    return config.override("jax_default_matmul_precision", value)


# JAX: jax/_src/config.py transfer_guard
@contextlib.contextmanager
def transfer_guard(level: str):
    """A context manager setting `jax_transfer_guard` (every direction) inside its block."""
    with contextlib.ExitStack() as stack:
        for d in ("", "_host_to_device", "_device_to_host", "_device_to_device"):
            stack.enter_context(config.override(f"jax_transfer_guard{d}", level))
        yield


def transfer_guard_host_to_device(level: str):
    """A context manager setting `jax_transfer_guard_host_to_device` inside its block."""
    return config.override("jax_transfer_guard_host_to_device", level)


# JAX: jax/_src/config.py check_tracer_leaks
def check_tracer_leaks(value: bool = True):
    """A context manager setting `jax_check_tracer_leaks` inside its block."""
    return config.override("jax_check_tracer_leaks", bool(value))


# JAX: jax/_src/config.py State — differs: a context manager over `config.override`; no
# per-thread value
class State:
    """`jax.NAME(value)`: a context manager (or decorator) setting the option `jax_NAME` inside
    its block; options with a usual value (True for most booleans) may leave `value` out.
    An option minijax does not model warns once and changes nothing (`Config.update`)."""

    def __init__(self, name: str, default_value: Any = _UNSET) -> None:
        self.name, self._default = name, default_value
        self.__name__ = name[len("jax_"):] if name.startswith("jax_") else name

    def __call__(self, new_val: Any = _UNSET):
        if new_val is _UNSET:
            if self._default is _UNSET:  # JAX's message
                raise TypeError(f"Context manager for {self.__name__} config option requires "
                                "an argument representing the new value for the config "
                                "option.")
            new_val = self._default
        return config.override(self.name, new_val)

    @property
    def value(self) -> Any:
        return getattr(config, self.name)

    def __repr__(self) -> str:
        return f"State({self.name!r})"


# the options minijax models (see Config); `True` is what a bare `jax.NAME()` sets
enable_x64 = State("jax_enable_x64", True)
debug_nans = State("jax_debug_nans", True)
debug_infs = State("jax_debug_infs", True)
log_compiles = State("jax_log_compiles", True)
enable_checks = State("jax_enable_checks", True)
explain_cache_misses = State("jax_explain_cache_misses", True)
numpy_rank_promotion = State("jax_numpy_rank_promotion")
default_prng_impl = State("jax_default_prng_impl")
threefry_partitionable = State("jax_threefry_partitionable", True)
transfer_guard_device_to_host = State("jax_transfer_guard_device_to_host")
transfer_guard_device_to_device = State("jax_transfer_guard_device_to_device")
checking_leaks = functools.partial(check_tracer_leaks, True)  # JAX: jax/_src/config.py
default_device = State("jax_default_device")
# JAX's options minijax does not model: setting one warns once
allow_f16_reductions = State("jax_allow_f16_reductions", True)
array_garbage_collection_guard = State("jax_array_garbage_collection_guard")
auto_pcast = State("jax_auto_pcast", True)
debug_key_reuse = State("jax_debug_key_reuse", True)
enable_custom_prng = State("jax_enable_custom_prng", True)
jax2tf_associative_scan_reductions = State("jax2tf_associative_scan_reductions", True)
legacy_prng_key = State("jax_legacy_prng_key")
no_execution = State("jax_no_execution", True)
no_tracing = State("jax_no_tracing", True)
softmax_custom_jvp = State("jax_softmax_custom_jvp", True)
remove_size_one_mesh_axis_from_type = State("jax_remove_size_one_mesh_axis_from_type", True)
thread_guard = State("jax_thread_guard", True)


# JAX: jax/_src/config.py make_user_context (UserConfig) — differs: not per thread
def make_user_context(default_value: Any = None) -> State:
    """A new option of the program's own, `ctx = make_user_context(default)`: `with ctx(v):`
    sets it, `ctx.value` reads it, and `jit` keys its caches on it, so a jitted function
    called under another value traces and compiles again."""
    name = f"user_context_{len(Config._trace_options)}"
    Config._defaults = {**Config._defaults, name: default_value}
    Config._trace_options = Config._trace_options + (name,)
    config.__dict__[name] = default_value
    config._set_trace_context()
    return State(name, _UNSET)
