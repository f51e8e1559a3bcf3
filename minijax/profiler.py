"""Profiling: the backend's profiler around minijax programs, annotations, memory profiles.

`trace(log_dir)` (or `start_trace`/`stop_trace`) records what the process does meanwhile
through XLA's profiler session: the compiled programs minijax runs, the host threads, and the
spans named by `TraceAnnotation`/`StepTraceAnnotation`/`annotate_function`. The trace is the
profiler's `.xplane.pb` (TensorBoard, XProf) and, with `create_perfetto_trace=True`, a
`perfetto_trace.json.gz` that ui.perfetto.dev opens. `save_device_memory_profile` writes the
live buffers as a pprof profile. Mirrors jax/_src/profiler.py; chapters/17-profiling-
benchmarking.md.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import json
import os
import threading
from pathlib import Path
from typing import Callable

from minijax import xla_bridge

_lock = threading.Lock()
_state: dict = {}  # the running session: "session", "log_dir", "perfetto"


# JAX: jax/_src/profiler.py start_trace
def start_trace(log_dir: os.PathLike | str, create_perfetto_link: bool = False,
                create_perfetto_trace: bool = False, profiler_options=None) -> None:
    """Start recording a trace, to be written under `log_dir` by `stop_trace`.
    `create_perfetto_trace` (or `create_perfetto_link`, which here only writes the file) also
    writes `perfetto_trace.json.gz`. RuntimeError if a trace is already being recorded."""
    with _lock:
        if _state:
            raise RuntimeError("Profile has already been started. Only one profile may be run "
                               "at a time.")
        xla_bridge.get_backend()  # the backend first: its tracer joins the session
        lib = xla_bridge.profiler_runtime()
        session = lib.ProfilerSession(profiler_options or lib.ProfileOptions())
        _state.update(session=session, log_dir=str(log_dir),
                      perfetto=create_perfetto_trace or create_perfetto_link)


# JAX: jax/_src/profiler.py stop_trace
def stop_trace() -> None:
    """Stop the trace `start_trace` began and write it. RuntimeError if none is running."""
    with _lock:
        if not _state:
            raise RuntimeError("No profile started")
        try:
            _state["session"].stop_and_export(_state["log_dir"])
            if _state["perfetto"]:
                _write_perfetto_trace(Path(_state["log_dir"]))
        finally:
            _state.clear()


def _write_perfetto_trace(log_dir: Path) -> Path:
    """The newest run's `<host>.trace.json.gz` rewritten without its `metadata` entry (which
    Perfetto refuses) as `perfetto_trace.json.gz` beside it."""
    run = max((log_dir / "plugins" / "profile").iterdir(), key=os.path.getmtime)
    found = sorted(run.glob("*.trace.json.gz"))
    if len(found) != 1:
        raise ValueError(f"Invalid trace folder: {run}")
    with gzip.open(found[0], "rt") as f:
        doc = json.load(f)
    doc.pop("metadata", None)
    out = run / "perfetto_trace.json.gz"
    with gzip.open(out, "wt") as f:
        json.dump(doc, f)
    return out


# JAX: jax/_src/profiler.py trace
@contextlib.contextmanager
def trace(log_dir: os.PathLike | str, create_perfetto_link: bool = False,
          create_perfetto_trace: bool = False, profiler_options=None):
    """`start_trace(...)` on entry, `stop_trace()` on exit (also when the block raises)."""
    start_trace(log_dir, create_perfetto_link, create_perfetto_trace, profiler_options)
    try:
        yield
    finally:
        stop_trace()


# JAX: jax/_src/profiler.py TraceAnnotation — differs: wraps TraceMe rather than subclassing it
class TraceAnnotation:
    """A span named `name` on the trace's host timeline while the `with` block runs (keyword
    arguments are shown as its arguments); costs nearly nothing when no trace is recording."""

    def __init__(self, name: str, **kwargs):
        self._span = xla_bridge.profiler_runtime().TraceMe(name, **kwargs)

    def __enter__(self):
        self._span.__enter__()
        return self

    def __exit__(self, *exc):
        return self._span.__exit__(*exc)


# JAX: jax/_src/profiler.py StepTraceAnnotation
class StepTraceAnnotation(TraceAnnotation):
    """A TraceAnnotation the profiler reads as one step of a loop (pass `step_num=`)."""

    def __init__(self, name: str, **kwargs):
        super().__init__(name, _r=1, **kwargs)


# JAX: jax/_src/profiler.py annotate_function
def annotate_function(func: Callable, name: str | None = None, **decorator_kwargs) -> Callable:
    """`func` with each call inside a TraceAnnotation named `name` (default: its qualified
    name). Usable as a decorator."""
    name = name or getattr(func, "__qualname__", None) or func.__name__

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with TraceAnnotation(name, **decorator_kwargs):
            return func(*args, **kwargs)
    return wrapper


# JAX: jax/_src/profiler.py device_memory_profile
def device_memory_profile(backend: str | None = None) -> bytes:
    """The live device buffers and executables, with the Python stacks that made them, as a
    gzip-compressed pprof profile (bytes). `backend` must be None (the one minijax uses)."""
    if backend is not None:
        raise ValueError(f"device_memory_profile: backend={backend!r}; minijax has one backend "
                         "(pass None)")
    return gzip.compress(xla_bridge.get_backend().heap_profile())


# JAX: jax/_src/profiler.py save_device_memory_profile
def save_device_memory_profile(filename, backend: str | None = None) -> None:
    """Write `device_memory_profile(backend)` to `filename`."""
    Path(filename).write_bytes(device_memory_profile(backend))
