"""The `scaling_book` comparison topic at quick sizes (8 CPU devices): every exercise row agrees
with the book or explains why not, the JAX chapter's programs equal the unsharded results under
minijax and JAX, and at least 10 cross-checks against compiled minijax programs hold."""

import jax
import pytest

from compare import scaling_book


@pytest.mark.slow
def test_scaling_book_topic_quick():
    assert jax.device_count() == 8
    res = scaling_book.run(quick=True)
    failing = [c.name for c in res.checks if not c.ok]
    assert not failing, failing
    rows = res.extra["exercises"]
    assert {"jax-stuff", "profiling"} <= {r["chapter"] for r in rows}
    assert all(r["ok"] or r["note"] for r in rows)
    xc = res.extra["cross_checks"]
    assert len(xc) >= 10 and all(x["ok"] for x in xc)
    jax_rows = [r for r in rows if r["chapter"] == "jax-stuff" and r["book"] is True]
    assert len(jax_rows) >= 8 and all(r["ours"] is True for r in jax_rows)
