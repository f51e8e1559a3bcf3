"""Random sharded programs (tests/sharded_programs.py) agree with JAX: a fixed slice, in one
child process with 8 CPU devices. The sweep of 1,000 and more is a command:
`python tests/sharded_programs.py --n 1000`.
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import sharded_programs as sp

SLICE = list(range(40))
CRASHER = 10_000  # a seed whose child kills itself (SIGSEGV): the sweep must report it


@pytest.mark.slow
def test_fixed_slice_agrees_with_jax_and_crashes_are_reported():
    out = sp.sweep(SLICE + [CRASHER], quiet=True, env={"SHARDED_PROGRAMS_CRASH_AT":
                                                      str(CRASHER)})
    assert out["crashes"] == {CRASHER: "signal 11"}, out["crashes"]
    failures = [sp.report(s, r["diff"]) for s, r in sorted(out["results"].items()) if r["diff"]]
    assert not failures, "\n".join(failures)
    assert sorted(out["results"]) == SLICE
    counts = sp.summary(out)
    # the slice runs programs to the end, not only into errors
    assert counts["both_ran"] >= len(SLICE) // 4, counts


def test_compare_tells_values_layouts_types_and_error_families_apart():
    leaf = {"shape": [8], "dtype": "float32", "sharding": [[8], "('a',)"],
            "spec": "P('a',)", "type": "float32[8@a]", "value": [1.0] * 8}
    ok = {"ok": [leaf]}
    assert sp.compare(ok, ok) is None
    assert sp.compare(ok, {"ok": [dict(leaf, spec="P('a', None)")]}) is None  # one layout
    for key, other in [("value", [1.0] * 7 + [1.5]), ("sharding", [[8], "()"]),
                       ("sharding", [[2, 4], "('a',)"]), ("type", "float32[8]"),
                       ("dtype", "int32")]:
        assert sp.compare(ok, {"ok": [dict(leaf, **{key: other})]}), key
    err = {"error": "ValueError", "message": "ValueError: x"}
    assert sp.compare(err, err) is None
    assert sp.compare(err, {"error": "TypeError", "message": "TypeError: x"})
    assert sp.compare(err, ok) and sp.compare(ok, err)


def test_programs_are_reproducible_and_varied():
    assert sp.generate(5) == sp.generate(5)
    srcs = [sp.generate(s) for s in range(200)]
    assert len(set(srcs)) == len(srcs)
    text = "\n".join(srcs)
    for feature in ["Explicit", "Auto", "(2, 2, 2)", "(8,)", "J.shard_map", "lax.psum(",
                    "lax.pmax(", "lax.all_gather(", "lax.psum_scatter(", "lax.ppermute(",
                    "lax.all_to_all(", "lax.axis_index(", "J.pure_callback", "S.reshard(",
                    "with_sharding_constraint", "out_shardings=", "in_shardings=", "J.grad(",
                    "J.jvp(", "J.vmap(", "J.set_mesh(", "axis_names="]:
        assert feature in text, feature


def test_jax_internal_failures_are_told_by_message_and_where_raised():
    ran = {"ok": []}
    msg = "ValueError: Sharding passed to jit does not match the sharding on the respective arg"
    # raised by a jit's transpose on JAX's own cotangent: not compared
    own = {"error": "ValueError", "message": msg, "frames": ["backward_pass3",
                                                             "_pjit_transpose_fancy"]}
    assert sp._jax_bug(own) and sp.compare(own, ran) is None
    # the same text for the user's in_shardings, raised in the forward call: compared
    users = dict(own, frames=["_pjit_call_impl", "_resolve_in_shardings"])
    assert not sp._jax_bug(users) and sp.compare(users, ran)
    ct = {"error": "ValueError", "frames": [],
          "message": "ValueError: Expected cotangent type float32[4,4] but got float32[4@c,4]"}
    assert sp._jax_bug(ct) and sp.compare(ct, ran) is None
