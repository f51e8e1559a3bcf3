"""Tracebacks a user can read: minijax's frames are filtered out of errors raised through its
entry points as JAX filters its own (`jax_traceback_filtering`), and tracer errors give the
specific advice JAX's give. Mirrors JAX's tests/errors_test.py (FilteredTracebackTest)."""

from __future__ import annotations

import contextlib
import os
import traceback

import jax
import numpy as np
import pytest

import minijax

HERE = os.path.abspath(__file__)


def _frames(e: BaseException) -> list[tuple[str, str]]:
    """(file, function) of each frame of the error's traceback, files outside this test as
    'jax' or 'minijax' (whichever library they belong to) or their base name."""
    out = []
    for fs in traceback.extract_tb(e.__traceback__):
        path = os.path.abspath(fs.filename)
        if path == HERE:
            out.append(("test", fs.name))
        elif f"{os.sep}minijax{os.sep}" in path:
            out.append(("internal", ""))
        elif f"{os.sep}jax{os.sep}" in path or f"{os.sep}jaxlib{os.sep}" in path:
            out.append(("internal", ""))
        else:
            out.append((os.path.basename(path), fs.name))
    return out


@contextlib.contextmanager
def filtering(mode: str):
    old = (jax.config.jax_traceback_filtering, minijax.config.jax_traceback_filtering)
    jax.config.update("jax_traceback_filtering", mode)
    minijax.config.update("jax_traceback_filtering", mode)
    try:
        yield
    finally:
        jax.config.update("jax_traceback_filtering", old[0])
        minijax.config.update("jax_traceback_filtering", old[1])


def _error(run):
    with pytest.raises(Exception) as info:
        run()
    return info.value


def f_if(x):
    if x > 0:
        return x * 2
    return x


def f_raises(x):
    raise ValueError("bad value in the user's function")


def f_int(x):
    return x * int(x)


def body_if(c, x):
    if x > 0:
        return c, x
    return c, -x


# (label, program of J): each raises inside the user's own function
PROGRAMS = {
    "jit(grad(f)) with if x > 0": lambda J: J.jit(J.grad(f_if))(1.0),
    "grad(jit(f))": lambda J: J.grad(J.jit(f_if))(1.0),
    "vmap(f) raising": lambda J: J.vmap(f_raises)(np.ones(3, np.float32)),
    "jit(vmap(grad(f))) with int(x)": lambda J: J.jit(J.vmap(J.grad(f_int)))(
        np.ones(3, np.float32)),
    "lax.scan body with if": lambda J: J.lax.scan(body_if, 0.0, np.ones(3, np.float32)),
    "jvp of jit": lambda J: J.jvp(J.jit(f_if), (1.0,), (1.0,)),
}


@pytest.mark.parametrize("label", PROGRAMS)
def test_filtered_frames_are_jaxs(label):
    """By default ('auto' outside IPython) the traceback holds the same frames as JAX's: the
    test's call, then the user's function, no library frame."""
    program = PROGRAMS[label]
    got = {J.__name__: _frames(_error(lambda J=J: program(J))) for J in (jax, minijax)}
    assert got["minijax"] == got["jax"], label
    assert ("internal", "") not in got["minijax"]


def test_jit_of_grad_traceback_puts_the_users_line_second():
    e = _error(lambda: minijax.jit(minijax.grad(f_if))(1.0))
    frames = traceback.extract_tb(e.__traceback__)
    ej = _error(lambda: jax.jit(jax.grad(f_if))(1.0))
    # _error's call, the lambda's call of jit(grad(f_if)), then the user's line: as JAX's
    assert len(frames) == len(traceback.extract_tb(ej.__traceback__)) == 3
    assert frames[2].name == "f_if" and frames[2].line == "if x > 0:"
    assert type(e).__name__ == type(ej).__name__ == "TracerBoolConversionError"
    # the note says frames were removed and how to see them, once, as JAX's
    assert len(e.__notes__) == len(ej.__notes__) == 1
    assert "jax_traceback_filtering" in e.__notes__[0]
    printed = "".join(traceback.format_exception(e))
    assert "minijax/" not in printed.replace("chapters/02", "")


def test_filtering_off_keeps_every_frame():
    with filtering("off"):
        e = _error(lambda: minijax.jit(minijax.grad(f_if))(1.0))
        ej = _error(lambda: jax.jit(jax.grad(f_if))(1.0))
    for err in (e, ej):
        frames = _frames(err)
        assert frames[:2] == [("test", "_error"), ("test", "<lambda>")]
        assert ("test", "f_if") in frames
        assert frames.count(("internal", "")) > 5
        assert not getattr(err, "__notes__", None)


def test_remove_frames_keeps_the_unfiltered_trace_as_cause():
    with filtering("remove_frames"):
        e = _error(lambda: minijax.jit(minijax.grad(f_if))(1.0))
        ej = _error(lambda: jax.jit(jax.grad(f_if))(1.0))
    for err in (e, ej):
        assert ("internal", "") not in _frames(err)
        cause = err.__cause__
        assert type(cause).__name__ == "UnfilteredStackTrace"
        assert ("internal", "") in _frames(cause) and ("test", "f_if") in _frames(cause)
        assert str(err).splitlines()[0] in str(cause)


def test_filtering_leaves_no_trace_state_and_errors_outside_work():
    _error(lambda: minijax.jit(minijax.grad(f_if))(1.0))
    assert float(minijax.jit(minijax.grad(lambda x: x * x))(3.0)) == 6.0
    # an error before any boundary (a plain lax call) is untouched: its frames are all there
    e = _error(lambda: minijax.lax.add(np.ones(2, np.float32), np.ones(3, np.float32)))
    assert ("internal", "") in _frames(e) and not getattr(e, "__notes__", None)


def test_bad_mode_raises_as_jax():
    for J in (jax, minijax):
        with pytest.raises(ValueError, match="new enum value must be in"):
            J.config.update("jax_traceback_filtering", "sometimes")


@pytest.mark.parametrize("conv,hint", [("int", "x.astype(int)"), ("float", "x.astype(float)")])
def test_conversion_errors_suggest_astype_as_jax(conv, hint):
    fun = {"int": lambda x: int(x), "float": lambda x: float(x)}[conv]
    for J in (jax, minijax):
        e = _error(lambda J=J: J.jit(fun)(1.0))
        assert type(e).__name__ == "ConcretizationTypeError"
        assert hint in str(e), J.__name__


def test_bool_and_index_errors_name_the_remedy():
    e = _error(lambda: minijax.jit(f_if)(1.0))
    assert "lax.cond" in str(e) and "jnp.where" in str(e) and "static_argnums" in str(e)
    e = _error(lambda: minijax.jit(lambda i: [1, 2][i])(np.int32(0)))
    assert type(e).__name__ == "TracerIntegerConversionError"
    assert "jnp.asarray(xs)[i]" in str(e)
