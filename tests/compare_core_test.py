"""The minijax-vs-JAX comparison topics (`compare/core.py`, `compare/mnist_mlp.py`) at quick
sizes: every check must pass.

Each topic is one test so `pytest -n 2` can spread them over workers; quick mode writes its
plots to a fresh temporary folder.
"""

import importlib

import pytest
from model_checks import assert_grads_checked_and_profiled


def _run_quick(topic):
    res = importlib.import_module(f"compare.{topic}").run(quick=True)
    assert res.checks, f"{topic}: no checks were recorded"
    failing = [f"{c.name} (max_err={c.max_err})" for c in res.checks if not c.ok]
    assert not failing, f"{topic}: {len(failing)} failing check(s): {failing}"
    assert res.sections, f"{topic}: no report sections"
    return res


@pytest.mark.slow
def test_core_programs_agree():
    res = _run_quick("core")
    names = [c.name for c in res.checks]
    # the jaxpr-text assertions ran (not only the value checks)
    assert any("jaxpr text" in n for n in names)
    assert any(n.endswith(": grad") for n in names) and any(n.endswith(": vmap") for n in names)


@pytest.mark.slow
def test_mnist_mlp_losses_agree():
    res = _run_quick("mnist_mlp")
    for name in ("minijax", "jax"):
        rec = res.extra[name]
        assert set(rec) == {"losses", "test_accuracy", "step_ms"}
        assert len(rec["losses"]) > 0 and rec["step_ms"] > 0
        assert 0.0 <= rec["test_accuracy"] <= 1.0
    assert res.extra["minijax"]["losses"] == pytest.approx(res.extra["jax"]["losses"], abs=1e-4)
    assert res.timings_ms["ratio minijax/jax"] > 0
    assert_grads_checked_and_profiled(res, [f"MLP step {stage}" for stage in (
        "trace", "lower", "compile", "first call")])


def test_rename_vars_makes_names_canonical():
    from compare.core import jaxpr_grade, rename_vars

    ours = "{ lambda ; a:f32[3]. let b:f32[3] = sin a in (b,) }"
    theirs = "{ lambda ; b:f32[3]. let c:f32[3] = sin b in (c,) }"
    assert rename_vars(ours) == rename_vars(theirs)
    assert jaxpr_grade(ours, theirs) == "renamed"
    assert jaxpr_grade(ours, ours.replace("sin", "cos")) == "differs"
    with_param = ("{ lambda ; a:f32[3]. let b:f32[] = reduce_sum[axes=(0,) out_sharding=None] a "
                  "in (b,) }")
    assert jaxpr_grade(with_param.replace(" out_sharding=None", ""), with_param) == "params"
    # an axis JAX's batching computed with NumPy prints as np.int64(1): the same param
    assert jaxpr_grade(ours.replace("sin a", "sin[axes=(1,)] a"),
                       ours.replace("sin a", "sin[axes=(np.int64(1),)] a")) == "params"


def test_jaxpr_section_prints_equal_jaxprs_once_and_a_diff_otherwise():
    from compare.core import jaxpr_section

    text = "{ lambda ; a:f32[3]. let b:f32[3] = sin a in (b,) }"
    same = jaxpr_section(text, text, "identical")
    assert same.count(text) == 1 and "identical" in same
    other = text.replace("sin", "cos")
    diff = jaxpr_section(other, text, "differs")
    assert "```diff" in diff and "-{ lambda ; a:f32[3]. let b:f32[3] = sin" in diff
    assert "+{ lambda ; a:f32[3]. let b:f32[3] = cos" in diff


def _write_idx(path, arr, gz):
    import gzip

    import numpy as np

    code = {np.dtype(np.uint8): 0x08}[arr.dtype]
    header = bytes([0, 0, code, arr.ndim]) + np.array(arr.shape, ">u4").tobytes()
    (gzip.open if gz else open)(path, "wb").write(header + arr.tobytes())


def test_idx_reader_loads_mnist_layout(tmp_path):
    import numpy as np

    from compare.mnist_mlp import load_idx_mnist, read_idx

    rng = np.random.RandomState(0)
    imgs = rng.randint(0, 256, (5, 28, 28)).astype(np.uint8)
    labels = rng.randint(0, 10, 5).astype(np.uint8)
    _write_idx(tmp_path / "train-images-idx3-ubyte.gz", imgs, gz=True)
    _write_idx(tmp_path / "train-labels-idx1-ubyte", labels, gz=False)
    _write_idx(tmp_path / "t10k-images.idx3-ubyte", imgs[:2], gz=False)  # Kaggle-style name
    _write_idx(tmp_path / "t10k-labels-idx1-ubyte.gz", labels[:2], gz=True)
    assert np.array_equal(read_idx(tmp_path / "train-images-idx3-ubyte.gz"), imgs)
    x_tr, y_tr, x_te, y_te = load_idx_mnist(tmp_path)
    assert x_tr.shape == (5, 784) and x_tr.dtype == np.float32 and x_tr.max() <= 1.0
    assert np.allclose(x_tr * 255, imgs.reshape(5, -1)) and np.array_equal(y_tr, labels)
    assert x_te.shape == (2, 784) and np.array_equal(y_te, labels[:2])
