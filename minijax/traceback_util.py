"""Tracebacks that end in the user's code: an error raised while `jit`, `grad`, `vmap`... run
the user's function loses the frames of minijax's own files, so its first lines are the call
site and the user's line that failed. Explained in chapters/15-debugging.md.

Mirrors jax/_src/traceback_util.py. The option `jax_traceback_filtering` (minijax/config.py)
picks the mode: 'auto' (the default: 'tracebackhide' under IPython, else
'quiet_remove_frames'), 'quiet_remove_frames' (internal frames dropped, a note says so),
'remove_frames' (dropped, and the whole traceback kept as the error's `__cause__`, an
`UnfilteredStackTrace`), 'tracebackhide' (frames marked for IPython and pytest to hide) and
'off'.
"""

from __future__ import annotations

import functools
import os
import sys
import traceback
import types
from typing import Callable, TypeVar

from minijax.config import config

C = TypeVar("C", bound=Callable)

# every file of the package is internal (JAX registers its files one by one)
# JAX: jax/_src/traceback_util.py register_exclusion
_exclude_paths: list[str] = [os.path.dirname(os.path.abspath(__file__))]


def register_exclusion(path: str) -> None:
    """Treat the frames of files under `path` as internal."""
    _exclude_paths.append(os.path.abspath(path))


def include_filename(filename: str) -> bool:
    """Whether a frame of `filename` is the user's (shown in filtered tracebacks)."""
    path = os.path.abspath(filename)
    return not any(path == p or path.startswith(p + os.sep) for p in _exclude_paths)


def _include_frame(f: types.FrameType) -> bool:
    return include_filename(f.f_code.co_filename)


# JAX: jax/_src/traceback_util.py filter_traceback
def filter_traceback(tb: types.TracebackType | None) -> types.TracebackType | None:
    """The traceback `tb` with minijax's frames removed (a new chain, `tb` unchanged)."""
    out = None
    for f, lineno in reversed(list(traceback.walk_tb(tb))):
        if _include_frame(f):
            out = types.TracebackType(out, f, f.f_lasti, lineno)
    return out


# JAX: jax/_src/traceback_util.py _add_call_stack_frames — the frames above the boundary
# (caller of the caller...) up to the first run of module-level frames, so the unfiltered
# trace shows where the call came from
def _add_call_stack_frames(tb: types.TracebackType) -> types.TracebackType:
    out, reached_module = tb, False
    for f, lineno in traceback.walk_stack(tb.tb_frame):
        if reached_module and f.f_code.co_name != "<module>":
            break
        if _include_frame(f):
            out = types.TracebackType(out, f, f.f_lasti, lineno)
        reached_module = reached_module or f.f_code.co_name == "<module>"
    return out


class UnfilteredStackTrace(Exception):
    """The `__cause__` of an error in 'remove_frames' mode: the same error with every frame."""


_SIMPLIFIED = ("minijax has removed its internal frames from the traceback of this error; "
               "see them with minijax.config.update('jax_traceback_filtering', 'off') or "
               "JAX_TRACEBACK_FILTERING=off.")


def _filtering_mode() -> str:
    mode = config.jax_traceback_filtering
    if mode == "auto":
        ipython = sys.modules.get("IPython")
        inside = ipython is not None and ipython.get_ipython() is not None
        return "tracebackhide" if inside else "quiet_remove_frames"
    return mode


# the code of the functions that filter what is raised through them: api_boundary's wrapper,
# and entry points that catch and call `filter_raised` themselves (jit's call: one frame less)
_boundary_codes: set = set()


def _is_reraiser_frame(f) -> bool:
    return f.f_code in _boundary_codes


# an error passing through nested boundaries (jit of grad...) is filtered once, by the outermost
def _is_under_reraiser(e: BaseException) -> bool:
    tb = e.__traceback__
    return tb is not None and any(_is_reraiser_frame(f)
                                  for f, _ in traceback.walk_stack(tb.tb_frame.f_back))


def filter_raised(e: Exception) -> None:
    """Filter the traceback of `e`, raised through a boundary, in place as
    `jax_traceback_filtering` says, unless an outer boundary will; the caller re-raises."""
    mode = _filtering_mode()
    if mode == "off" or _is_under_reraiser(e):
        return
    tb = e.__traceback__
    if mode == "tracebackhide":
        for f, _ in traceback.walk_tb(tb):
            if not _include_frame(f) and not _is_reraiser_frame(f):
                f.f_locals["__tracebackhide__"] = True
        return
    if mode == "remove_frames":
        unfiltered = UnfilteredStackTrace(
            "".join(traceback.format_exception_only(type(e), e)).strip()
            + "\n\nThe above is the error with every frame; below, the same error "
            "without minijax's internal frames.")
        unfiltered.with_traceback(_add_call_stack_frames(tb))
        unfiltered.__cause__, unfiltered.__context__ = e.__cause__, e.__context__
        unfiltered.__suppress_context__ = e.__suppress_context__
        e.__cause__, e.__context__ = unfiltered, None
    else:
        e.add_note("--------------------\n" + _SIMPLIFIED)
    e.with_traceback(filter_traceback(tb))


def boundary(fun: C) -> C:
    """Mark `fun` as an entry point that catches, `filter_raised`s and re-raises itself (as
    `api_boundary`'s wrapper does, without the wrapper's frame on a hot path)."""
    _boundary_codes.add(fun.__code__)
    return fun


# JAX: jax/_src/traceback_util.py api_boundary
def api_boundary(fun: C) -> C:
    """Wrap a public entry point (`grad(f)`, `vmap(f)`, `lax.scan`...) so that an exception
    raised below it leaves with minijax's frames filtered, as the option
    `jax_traceback_filtering` says. The exception's type and message are unchanged."""

    @functools.wraps(fun)
    def reraise_with_filtered_traceback(*args, **kwargs):
        __tracebackhide__ = True  # read by pytest and IPython
        try:
            return fun(*args, **kwargs)
        except Exception as e:
            filter_raised(e)
            raise
    _boundary_codes.add(reraise_with_filtered_traceback.__code__)
    return reraise_with_filtered_traceback  # type: ignore[return-value]
