"""The linear maps of reverse mode print like JAX's, on both of minijax's linearize paths.

For a program `f` and input `x` (the random programs of tests/jaxpr_identity_test.py: the
straight-line ones, and each family's construct), this compares with JAX's, character for
character:

- `make_jaxpr` of the linear function `linearize(f, x)[1]`, and
- `make_jaxpr` of the backward function `vjp(f, x)[1]`,

once with `jax_use_direct_linearize` off (jvp + partial evaluation) and once on
(`ad.LinearizeTrace`), and checks that the two paths give the same values as each other and
as JAX (tangents and cotangents). JAX 0.10.2 has only the direct path.

`python tests/linearize_identity_test.py [family ...]` prints the identity rate of each family
for both paths (N_FAMILY_PROGRAMS programs each) and every pair that differs; the figures are in
docs/jaxpr_identity.md.
"""

from __future__ import annotations

import os

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from jaxpr_identity_test import (
    _SETTINGS,
    FAMILIES,
    OPS,
    _family_f,
    build as build_program,
    family_programs,
    inputs,
    programs,
)

import minijax
from minijax import core
from minijax.interpreters import ad

# Slow (CI runs it, `make test-fast` does not): whole programs linearized under both modules.
pytestmark = pytest.mark.slow

N_FAMILY_PROGRAMS = 60
PATHS = {"classic": False, "direct": True}
# (the families of one drawn operation, OPS, are measured by jaxpr_identity_test only)
FAMILY_NAMES = ["straight-line", *[f for f in FAMILIES if f not in ("nested", "hvp", *OPS)]]


def _function(J, family, program):
    """(f, args) of one drawn program, with its outer transformation left out."""
    if family == "straight-line":
        in_shapes, steps, _ = program
        return build_program(J, (in_shapes, steps, "none")), inputs(program)
    _, shape, body_list, _, policy = program
    x = np.random.RandomState(0).rand(*shape).astype(np.float32) + 0.5
    return _family_f(J, family, body_list, policy), [x]


def _attempt(fn):
    try:
        return fn()
    except Exception:  # JAX refuses some: vjp of while_loop, custom_vjp's tangents
        return None


def _texts_and_values(J, f, args):
    """({'linearize': text, 'vjp': text}, {'linearize': tangent, 'vjp': cotangents}) at
    tangent / cotangent ones; an entry is None where the module raises."""
    make_jaxpr = J.make_jaxpr
    out, lin = J.linearize(f, *args)
    ones = [np.ones_like(a) for a in args]
    ct = np.ones(np.shape(out), np.float32)
    vjp = _attempt(lambda: J.vjp(f, *args)[1])
    texts = {"linearize": str(make_jaxpr(lin)(*ones)),
             "vjp": None if vjp is None else _attempt(lambda: str(make_jaxpr(vjp)(ct)))}
    values = {"linearize": _attempt(lambda: np.asarray(lin(*ones))),
              "vjp": None if vjp is None else _attempt(lambda: [np.asarray(c) for c in vjp(ct)])}
    return texts, values


def _flat(values) -> np.ndarray:
    return np.concatenate([np.ravel(v) for v in (values if isinstance(values, list) else [values])])


def _assert_close(got, want, what: str) -> None:
    if got is not None and want is not None:
        np.testing.assert_allclose(_flat(got), _flat(want), rtol=1e-4, atol=1e-4, err_msg=what)


def compare(family, program) -> dict | None:
    """{(path, 'linearize' | 'vjp'): (identical?, JAX's text, minijax's)} for one program;
    None if JAX rejects it. Raises AssertionError when a path's tangents or cotangents differ
    from JAX's or from the other path's."""
    try:
        want, want_values = _texts_and_values(jax, *_function(jax, family, program))
    except Exception:  # a program JAX rejects
        return None
    result, path_values = {}, {}
    for path, direct in PATHS.items():
        with minijax.config.override("jax_use_direct_linearize", direct):
            try:
                got, path_values[path] = _texts_and_values(
                    minijax, *_function(minijax, family, program))
            except Exception as e:  # counted as a difference, and reported
                got = {k: f"raised {type(e).__name__}: {e}" for k in want}
                path_values[path] = dict.fromkeys(want)
        for kind in want:
            if want[kind] is not None:
                result[path, kind] = (got[kind] == want[kind], want[kind], got[kind])
            _assert_close(path_values[path][kind], want_values[kind], f"{path} {kind} {program}")
    for kind in want:
        _assert_close(path_values["direct"][kind], path_values["classic"][kind],
                      f"direct against classic, {kind} {program}")
    return result


def measure(family: str, n: int) -> tuple[int, dict, list]:
    """(programs, {(path, kind): identical count}, the differing (program, key, want, got))."""
    rows = []

    @settings(_SETTINGS, max_examples=n)
    @given(programs() if family == "straight-line" else family_programs(family))
    def check(program):
        r = compare(family, program)
        if r is not None:
            rows.append((program, r))

    check()
    counts: dict = {}
    diffs = []
    for program, r in rows:
        for key, (same, want, got) in r.items():
            counts[key] = counts.get(key, 0) + same
            if not same:
                diffs.append((program, key, want, got))
    return len(rows), counts, diffs


# The fixed slice CI runs: the first N_CI_PROGRAMS (derandomized) programs of each family. The
# direct path must print as JAX's at least as often as the classic one, and as often as
# measured (CI_IDENTICAL: (linearize, vjp)); the full figures (N_FAMILY_PROGRAMS each) are in
# docs/jaxpr_identity.md.
N_CI_PROGRAMS = 5
CI_IDENTICAL = {"straight-line": (5, 5), "cond": (5, 5), "switch": (5, 5), "while_loop": (5, 0),
                "fori_loop": (5, 5), "scan": (5, 5), "custom_jvp": (5, 5), "custom_vjp": (5, 5),
                "checkpoint": (5, 5)}


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_linearize_identity(family):
    n, counts, diffs = measure(family, N_CI_PROGRAMS)
    assert n >= N_CI_PROGRAMS // 2
    for kind, floor in zip(("linearize", "vjp"), CI_IDENTICAL[family]):
        assert counts.get(("direct", kind), 0) >= floor, (kind, diffs[:2])
        if ("classic", kind) in counts:
            assert counts["direct", kind] >= counts["classic", kind], (kind, diffs[:2])


def test_option_has_jax_name_and_minijax_default():
    assert jax.config.jax_use_direct_linearize is True  # JAX's default (nothing reads it)
    assert type(minijax.config)._defaults["jax_use_direct_linearize"] is True  # JAX's
    if "MINIJAX_DIRECT_LINEARIZE" not in os.environ:  # tests/conftest.py may force a path
        assert minijax.config.jax_use_direct_linearize is True
    assert "jax_use_direct_linearize" in type(minijax.config)._trace_options  # keys jit caches


def test_direct_path_runs_linearize_trace_and_rules():
    seen = []

    def f(x):
        y = minijax.numpy.sin(x) * x
        seen.append((type(core.current_trace()), type(y)))
        return y

    x = np.array([0.5, 1.0, 2.0], np.float32)
    for direct in (False, True):
        with minijax.config.override("jax_use_direct_linearize", direct):
            _, f_jvp = minijax.linearize(f, x)
            g = minijax.grad(lambda x: f(x).sum())(x)
        np.testing.assert_allclose(f_jvp(np.ones_like(x)), np.cos(x) * x + np.sin(x), rtol=1e-6)
        np.testing.assert_allclose(g, np.cos(x) * x + np.sin(x), rtol=1e-6)
    assert seen[0] == (ad.JVPTrace, ad.JVPTracer)
    assert seen[2] == (ad.LinearizeTrace, ad.LinearizeTracer)
    assert minijax.lax.sin_p in ad.primitive_linearizations


def test_jit_retraces_when_the_option_changes():
    traces = []

    @minijax.jit
    def g(x):
        traces.append(minijax.config.jax_use_direct_linearize)
        return minijax.grad(lambda x: minijax.numpy.sin(x).sum())(x)

    x = np.ones(3, np.float32)
    for direct in (False, True, False):
        with minijax.config.override("jax_use_direct_linearize", direct):
            np.testing.assert_allclose(g(x), np.cos(x), rtol=1e-6)
    assert traces == [False, True]


if __name__ == "__main__":  # python tests/linearize_identity_test.py [family ...]
    import sys
    for family in sys.argv[1:] or FAMILY_NAMES:
        n, counts, diffs = measure(family, N_FAMILY_PROGRAMS)
        for program, key, want, got in diffs:
            print("=" * 80, "\n", program, key, "\n--- jax\n", want, "\n--- minijax\n", got)
        rates = ", ".join(f"{p} {k} {c}/{n} ({100 * c / n:.0f}%)"
                          for (p, k), c in sorted(counts.items()))
        print(f"{family}: {rates}", flush=True)
