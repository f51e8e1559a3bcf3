"""Tracing a program with XLA's profiler: `trace(log_dir)` (or `start_trace`/`stop_trace`)
records what runs, host and device, into `log_dir/plugins/profile/<run>/*.xplane.pb` for
TensorBoard or Perfetto; `TraceAnnotation` and `annotate_function` name spans of Python code
in it. The profiler is the backend's own (jaxlib's), reached through minijax/compiler.py.
Mirrors jax/_src/profiler.py (re-exported as jax/profiler.py); the profiler server, device
memory profiles and Perfetto links are not modelled.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from typing import Any, Callable

from minijax import compiler

_lock = threading.Lock()
_session: dict[str, Any] = {}  # "session", "log_dir" while a trace runs


# JAX: jax/_src/profiler.py start_trace — differs: no Perfetto trace or link
def start_trace(log_dir, create_perfetto_link: bool = False,
                create_perfetto_trace: bool = False, profiler_options=None) -> None:
    """Start recording a trace into `log_dir` (written by `stop_trace`). Raises RuntimeError
    if a trace is already running (JAX's message), NotImplementedError for Perfetto."""
    if create_perfetto_link or create_perfetto_trace:
        raise NotImplementedError("start_trace: minijax writes the xplane trace only, no "
                                  "Perfetto trace or link")
    runtime = compiler.profiler_runtime()
    with _lock:
        if _session:
            raise RuntimeError("Profile has already been started. Only one profile may be "
                               "run at a time.")
        options = profiler_options if profiler_options is not None else runtime.ProfileOptions()
        _session.update(session=runtime.ProfilerSession(options), log_dir=str(log_dir))


# JAX: jax/_src/profiler.py stop_trace
def stop_trace() -> None:
    """Stop the running trace and write it into its `log_dir`. Raises RuntimeError if no
    trace runs (JAX's message)."""
    with _lock:
        if not _session:
            raise RuntimeError("No profile started")
        _session["session"].stop_and_export(_session["log_dir"])
        _session.clear()


# JAX: jax/_src/profiler.py trace
@contextlib.contextmanager
def trace(log_dir, create_perfetto_link: bool = False, create_perfetto_trace: bool = False,
          profiler_options=None):
    """A context manager tracing its block into `log_dir` (`start_trace` ... `stop_trace`)."""
    start_trace(log_dir, create_perfetto_link, create_perfetto_trace, profiler_options)
    try:
        yield
    finally:
        stop_trace()


# JAX: jax/_src/profiler.py TraceAnnotation — differs: holds jaxlib's TraceMe (JAX subclasses
# it), so that importing minijax loads no jaxlib
class TraceAnnotation:
    """A context manager: its block shows as a span named `name` in a running trace
    (keyword arguments become the span's metadata)."""

    def __init__(self, name: str, **kwargs) -> None:
        self._me = compiler.profiler_runtime().TraceMe(name, **kwargs)

    def __enter__(self):
        self._me.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._me.__exit__(*exc)


# JAX: jax/_src/profiler.py StepTraceAnnotation
class StepTraceAnnotation(TraceAnnotation):
    """A TraceAnnotation marking one training step (`step_num=` as a keyword)."""

    def __init__(self, name: str, **kwargs) -> None:
        super().__init__(name, _r=1, **kwargs)


# JAX: jax/_src/profiler.py annotate_function
def annotate_function(func: Callable, name: str | None = None, **decorator_kwargs) -> Callable:
    """`func`, each call of it a span named `name` (default its qualified name)."""
    name = name or getattr(func, "__qualname__", None) or func.__name__

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with TraceAnnotation(name, **decorator_kwargs):
            return func(*args, **kwargs)
    return wrapper
