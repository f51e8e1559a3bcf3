"""The `numpy` comparison topic (`compare/numpy.py`) at quick sizes: every value case of the
generated conformance table agrees with JAX or is a known gap, and the gap table in
docs/numpy_conformance.md is current."""

import pytest

from compare import numpy as numpy_topic


@pytest.mark.slow
def test_numpy_topic_checks_pass():
    res = numpy_topic.run(quick=True)
    failing = [c.name for c in res.checks if not c.ok]
    assert len(res.checks) >= 3 and not failing, (failing, res.sections[0])
    assert res.extra["functions"] >= 150 and res.extra["cases"] > 1000
