"""Solution: a tiny Trace (chapter 02).

Write `TapeTrace`, an interpreter that computes as usual and also writes down the name of every
primitive bound while it is the current trace: a "tape". Each `TapeTracer` wraps one value;
`process_primitive` unwraps its operands, binds the primitive again under the trace that was
current before (`parent_trace`, so the tape composes with `grad`, `vmap` and `jit` around it),
records the name and wraps the results.

The reference solution. Tests: tests/chapters/exercises_test.py
-k tiny_trace. JAX's counterpart of the whole pattern is jax/_src/core.py EvalTrace plus any
interpreter's `process_primitive`.
"""

from __future__ import annotations

from minijax import core
from minijax.tree_util import tree_flatten, tree_unflatten


class TapeTracer(core.Tracer):
    __slots__ = ("val",)

    def __init__(self, trace: "TapeTrace", val) -> None:
        self._trace = trace
        self.val = val

    @property
    def aval(self):
        return core.get_aval(self.val)


class TapeTrace(core.Trace):
    def __init__(self, parent_trace: core.Trace) -> None:
        super().__init__()
        self.parent_trace = parent_trace
        self.tape: list[str] = []

    def to_val(self, x):
        """The value under `x`: unwrap our own tracers, leave anything else as it is."""
        if isinstance(x, TapeTracer) and x._trace is self:
            return x.val
        core.check_not_escaped(x)
        return x

    def process_primitive(self, primitive, tracers, params):
        """Bind `primitive` on the unwrapped values under `self.parent_trace` (see
        `primitive.bind_with_trace`), append `primitive.name` to the tape, and wrap each result
        in a `TapeTracer` (`primitive.multiple_results` says whether there is a list)."""
        vals = [self.to_val(t) for t in tracers]
        out = primitive.bind_with_trace(self.parent_trace, vals, params)
        self.tape.append(primitive.name)
        if primitive.multiple_results:
            return [TapeTracer(self, o) for o in out]
        return TapeTracer(self, out)


def record_primitives(fun):
    """`record_primitives(f)(*args)` is `(f(*args), [names of the primitives bound])`."""
    def wrapped(*args):
        trace = TapeTrace(core.current_trace())
        flat, tree = tree_flatten(args)
        try:
            with core.set_current_trace(trace):
                out = fun(*tree_unflatten(tree, [TapeTracer(trace, x) for x in flat]))
            flat_out, out_tree = tree_flatten(out)
            flat_out = [trace.to_val(o) for o in flat_out]
        finally:
            trace.invalidate()
        return tree_unflatten(out_tree, flat_out), trace.tape
    return wrapped
