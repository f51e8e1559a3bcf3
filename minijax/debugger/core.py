"""`debug.breakpoint`: stop a running program and look around, from inside traced code.

The frames of the Python stack at the breakpoint are captured while tracing; their traced
locals are the callback's arguments, so the debugger that opens when the program reaches the
breakpoint sees their runtime values (under `jit` each time the compiled program runs, under
`vmap` once per example, under `grad` the primal values). Mirrors jax/_src/debugger/core.py;
taught in chapters/15-debugging.md.
"""

from __future__ import annotations

import dataclasses
import inspect
import threading
from typing import Any, Callable

from minijax import core, debugging, lax
from minijax.callback import pure_callback
from minijax.traceback_util import include_filename
from minijax.tree_util import register_pytree_node, tree_flatten, tree_unflatten


class _Opaque:
    """What a local that cannot be flattened (a pytree that raises) is shown as."""

    def __repr__(self) -> str:
        return "<cant_flatten>"


_OPAQUE = _Opaque()


def _flatten_vars(variables: dict[str, Any]) -> tuple[list, Any, list[str]]:
    """(leaves, treedef, names) of a frame's variables, in the frame's order (names are not
    sorted, as a dict's keys would be)."""
    names, values = list(variables), []
    for v in variables.values():
        try:
            tree_flatten(v)
        except Exception:  # anything that does not flatten is shown opaque
            v = _OPAQUE
        values.append(v)
    leaves, tree = tree_flatten(values)
    return leaves, tree, names


# JAX: jax/_src/debugger/core.py DebuggerFrame
@dataclasses.dataclass(frozen=True)
class DebuggerFrame:
    """One Python frame as the debugger shows it: file, line, source around it, and its
    variables (`locals`; `globals` is left empty, as JAX leaves it). As a pytree its leaves
    are the traced values among the variables, so a debug callback carries them to run time."""

    filename: str
    locals: dict[str, Any]
    globals: dict[str, Any]
    code_context: list[str] | None
    source: list[str]
    lineno: int
    offset: int | None

    @classmethod
    def from_frameinfo(cls, info: inspect.FrameInfo) -> "DebuggerFrame":
        try:
            lines, start = inspect.getsourcelines(info.frame)
            source = "".join(lines).split("\n")
            offset = info.lineno - max(start, 1)  # a module's source starts at line 0
            if offset >= len(source):
                source, offset = [], None
        except OSError:
            source, offset = [], None
        return cls(info.filename, dict(info.frame.f_locals), {}, info.code_context, source,
                   info.lineno, offset)


class _Static:
    """A frame's untraced part, as pytree aux data: hashed and compared by identity (its
    lists and source lines are not hashable, and two frames are never the same node)."""

    def __init__(self, data: tuple):
        self.data = data


def _frame_flatten(frame: DebuggerFrame):
    loc, loc_tree, loc_names = _flatten_vars(frame.locals)
    glo, glo_tree, glo_names = _flatten_vars(frame.globals)
    leaves = loc + glo
    traced = [isinstance(v, core.Tracer) for v in leaves]
    kept = [v for v, t in zip(leaves, traced) if not t]
    aux = (traced, kept, len(loc), loc_tree, loc_names, glo_tree, glo_names,
           frame.filename, frame.code_context, frame.source, frame.lineno, frame.offset)
    return [v for v, t in zip(leaves, traced) if t], _Static(aux)


def _frame_unflatten(aux: _Static, traced_values) -> DebuggerFrame:
    (traced, kept, n_loc, loc_tree, loc_names, glo_tree, glo_names, filename, code_context,
     source, lineno, offset) = aux.data
    it_t, it_k = iter(traced_values), iter(kept)
    leaves = [next(it_t) if t else next(it_k) for t in traced]
    loc = dict(zip(loc_names, tree_unflatten(loc_tree, leaves[:n_loc])))
    glo = dict(zip(glo_names, tree_unflatten(glo_tree, leaves[n_loc:])))
    return DebuggerFrame(filename, loc, glo, code_context, source, lineno, offset)


register_pytree_node(DebuggerFrame, _frame_flatten, _frame_unflatten)

# name -> (priority, debugger): the highest priority opens unless a backend is named
# JAX: jax/_src/debugger/core.py _debugger_registry
_debugger_registry: dict[str, tuple[int, Callable[..., None]]] = {}


# JAX: jax/_src/debugger/core.py register_debugger
def register_debugger(name: str, debugger: Callable[..., None], priority: int) -> None:
    """Make `debugger(frames, thread_id, **kwargs)` available as backend `name`. Raises
    ValueError if `name` is taken."""
    if name in _debugger_registry:
        raise ValueError(f'Debugger with name "{name}" already registered.')
    _debugger_registry[name] = (priority, debugger)


# JAX: jax/_src/debugger/core.py get_debugger
def get_debugger(backend: str | None = None) -> Callable[..., None]:
    """The debugger registered as `backend`, else the one of highest priority."""
    if backend in _debugger_registry:
        return _debugger_registry[backend][1]
    if not _debugger_registry:
        raise ValueError("No debuggers registered!")
    return max(_debugger_registry.values(), key=lambda pd: pd[0])[1]


_debug_lock = threading.Lock()  # callbacks of several devices may stop at once


# JAX: jax/_src/debugger/core.py breakpoint
def breakpoint(*, backend: str | None = None, filter_frames: bool = True,
               num_frames: int | None = None, ordered: bool = False, token=None, **kwargs):
    """Open a debugger when the program reaches this point, showing the frames above it.

    Args:
      backend: the registered debugger to open (by default the one of highest priority: the
        text debugger `cli`, `minijax/debugger/cli_debugger.py`).
      filter_frames: leave out minijax's own frames (`traceback_util.include_filename`).
      num_frames: how many frames, innermost first, to keep.
      ordered: sequence this breakpoint with the other ordered debug callbacks.
      token: an array (or pytree) returned unchanged; the debugger opens once it is
        computed. Exclusive with `ordered`.
      **kwargs: passed to the debugger (the `cli` one takes `stdin=`/`stdout=` streams).
    Returns: `token` when given, else None. Raises ValueError for `ordered` with `token`.
    """
    if token is not None and ordered:
        raise ValueError("`ordered` and `token` are mutually exclusive arguments.")
    infos = inspect.stack()[1:]
    if filter_frames:
        infos = [i for i in infos if include_filename(i.filename)]
    frames = [DebuggerFrame.from_frameinfo(i) for i in infos][:num_frames]
    flat, frames_tree = tree_flatten(frames)

    def _breakpoint_callback(*flat_values):
        frames_now = tree_unflatten(frames_tree, list(flat_values))
        thread_id = (None if threading.current_thread() is threading.main_thread()
                     else threading.get_ident())
        with _debug_lock:
            get_debugger(backend)(frames_now, thread_id, **kwargs)

    if token is None:
        debugging.debug_callback(_breakpoint_callback, *flat, ordered=ordered)
        return None

    def _with_token(tok, *flat_values):
        _breakpoint_callback(*flat_values)
        return tok

    token, flat = lax.stop_gradient((token, flat))
    return pure_callback(_with_token, token, token, *flat)
