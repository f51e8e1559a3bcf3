"""Printed jaxprs of the five tiers of random programs (tests/jaxpr_tiers.py) against JAX's:
the first N_CI valid seeds of each tier, and how many of them must print exactly as JAX's.

The floors sit at the identical counts measured on this slice when they were set (the full
measurement, 200 programs a tier, is `python tests/jaxpr_tiers.py --n 200`; its figures are in
docs/conformance.md). Raise a floor when a fix lifts its tier.
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jaxpr_tiers as tiers

N_CI = 30
CI_IDENTICAL = {1: 30, 2: 30, 3: 30, 4: 30, 5: 28}


@pytest.mark.parametrize("tier", sorted(CI_IDENTICAL))
def test_tier_identity_floor(tier):
    n, same, diffs = tiers.measure(tier, N_CI)
    assert n == N_CI
    causes = [tiers.first_difference(want, got) for _, _, want, got in diffs]
    assert same >= CI_IDENTICAL[tier], (same, causes)


def test_programs_are_reproducible_and_grow_with_the_tier():
    assert tiers.generate(3, 4) == tiers.generate(3, 4)
    srcs = {t: [tiers.generate(s, t) for s in range(40)] for t in (1, 3, 4, 5)}
    assert len(set(srcs[1])) == 40
    assert not any("lax.scan" in s or "lax.cond" in s for s in srcs[1])
    assert sum("lax.scan" in s or "lax.cond" in s or "fori_loop" in s for s in srcs[3]) > 10
    assert all("J.grad" in s or "J.vmap" in s or "J.jvp" in s or "value_and_grad" in s
               for s in srcs[4])
    assert sum(".at[" in s or "J.jit(" in s or "np.int32" in s for s in srcs[5]) > 10


def test_a_difference_is_seen_and_named():
    want = "{ lambda ; a:f32[3]. let\n    b:f32[3] = sin a\n  in (b,) }"
    got = want.replace("sin", "cos")
    assert tiers.first_difference(want, got) == "_:f32[3] = sin _  ||  _:f32[3] = cos _"
    assert tiers.first_difference(want, "raised TypeError: x") == "raised TypeError: x"
