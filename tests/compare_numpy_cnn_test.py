"""The `numpy_cnn` comparison topic (`compare/numpy_cnn.py`) at quick sizes: a small CNN's
logits, loss, gradients, per-example gradients and SGD losses agree between minijax and JAX."""

import pytest

from compare import numpy_cnn


@pytest.mark.slow
def test_numpy_cnn_topic_checks_pass():
    res = numpy_cnn.run(quick=True)
    failing = [(c.name, c.detail) if hasattr(c, "detail") else c.name
               for c in res.checks if not c.ok]
    assert len(res.checks) >= 5 and not failing, failing
    assert len(res.extra["losses"]["minijax"]) == len(res.extra["losses"]["jax"]) > 0
