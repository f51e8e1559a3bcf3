"""Generated conformance tests: every case of tests/numpy_conformance.py's spec table, minijax.numpy
against jax.numpy (value, dtype, shape, weak type, or both raise), plus one gradient case per
differentiable function. Cases in `KNOWN_GAPS` are xfail(strict=True), so a fixed gap fails
until its entry is removed; docs/numpy_conformance.md must list exactly those gaps.

JAX references are computed one jit per function and cached (see `jax_references`).
"""

import numpy_conformance as nc
import pytest


def _param(case: nc.Case):
    reason = nc.gap_for(case)
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(case, id=case.id, marks=marks)


def _grad_param(name: str):
    reason = nc.gap_for(name)
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(name, id=f"{name}-grad", marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in nc.cases()])
def test_conformance(case):
    failure = nc.check_case(case)
    assert failure is None, failure


@pytest.mark.parametrize("name", [_grad_param(n) for n in nc.grad_names()])
def test_grad_conformance(name):
    failure = nc.check_grad(name)
    assert failure is None, failure


def test_known_gaps_name_real_cases():
    ids = {c.id for c in nc.cases()}
    for fn, sel in nc.KNOWN_GAPS:
        assert fn in nc.SPECS, fn
        assert sel in ("*", "grad") or sel in nc.SPECS[fn].dtypes or f"{fn}-{sel}" in ids, (
            fn, sel)


def test_docs_list_exactly_the_known_gaps():
    assert nc.DOCS_PATH.read_text() == nc.gaps_markdown(), (
        "docs/numpy_conformance.md is stale: run `python tests/numpy_conformance.py --write-docs`")
