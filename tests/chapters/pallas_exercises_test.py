"""The Pallas ladder of chapters/exercises/pallas_ladder.py (chapters 16 and 28): each rung
runs under `minijax.experimental.pallas` and `jax.experimental.pallas` (interpret mode), on the
skeleton a learner fills in and on the reference solution, against a NumPy or `jax.numpy`
reference. The TPU rung (`tpu_matmul`) runs in TPU interpret mode, and with JAX's Pallas is
also lowered for a TPU, so that Mosaic's checks run on this CPU.

As in tests/chapters/exercises_test.py: in the suite a skeleton must fail with
NotImplementedError (a strict xfail) and a solution must pass; `make exercise
NAME=pallas_ladder` makes the skeleton cases plain tests run on the learner's copy in
chapters/exercises/mine/. Tiny shapes: one compilation per rung and module.
"""

from __future__ import annotations

import importlib.util
import math
import os
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as jpl

import minijax
from minijax.experimental import pallas as mpl

EXERCISES = Path(__file__).resolve().parents[2] / "chapters" / "exercises"
LEARNER = os.environ.get("MINIJAX_EXERCISES") == "mine"
MODULES = {"minijax": (minijax, mpl), "jax": (jax, jpl)}


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(
        f"minijax_exercises.{path.parent.name}.{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MINE = EXERCISES / "mine" / "pallas_ladder.py"
SKELETON = pytest.param(MINE if LEARNER and MINE.exists() else EXERCISES / "pallas_ladder.py",
                        id="skeleton", marks=() if LEARNER else
                        pytest.mark.xfail(strict=True, raises=NotImplementedError,
                                          reason="a skeleton, to be filled in"))
SOLUTION = pytest.param(EXERCISES / "solutions" / "pallas_ladder.py", id="solution")
pytestmark = [pytest.mark.parametrize("path", [SKELETON, SOLUTION]),
              pytest.mark.parametrize("which", list(MODULES)),
              pytest.mark.slow]  # every rung's kernels in interpret mode; `make exercises`

rng = np.random.default_rng(0)


def rand(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def _run(path, which, name, *args, **kw):
    J, pl = MODULES[which]
    return np.asarray(getattr(_load(path), name)(J, pl, *args, **kw))


def _close(got, want, tol=1e-5):
    np.testing.assert_allclose(got, np.asarray(want, np.float64), rtol=tol, atol=tol)


def _attention(q, k, v, mask):
    s = q.astype(np.float64) @ k.T / math.sqrt(q.shape[1])
    s = np.where(mask, s, -np.inf)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ v


def test_add_bias(path, which):
    x, b = rand(16, 8), rand(8)
    _close(_run(path, which, "add_bias", x, b, rows=8), x + b)


def test_mask_rows(path, which):
    # lengths 0 and 24 (all masked, none masked) and lengths that end inside a tile and on
    # its edge
    x = rand(16, 24)
    lengths = np.array([0, 24, 5, 8, 9, 16, 23, 1, 12, 3, 17, 24, 7, 0, 20, 11], np.int32)
    want = jnp.where(jnp.arange(24)[None, :] < lengths[:, None], x, 0.0)
    np.testing.assert_array_equal(_run(path, which, "mask_rows", x, lengths, br=8, bc=8), want)


def test_row_sum_max(path, which):
    x = rand(16, 32) - 3.0  # negative rows: a maximum started at 0 would show
    J, pl = MODULES[which]
    sums, maxes = _load(path).row_sum_max(J, pl, x, br=8, bc=8)
    _close(np.asarray(sums), jnp.sum(x, axis=1), tol=2e-5)
    np.testing.assert_array_equal(np.asarray(maxes), jnp.max(x, axis=1))


def test_matmul_bias_relu(path, which):
    x, y, bias = rand(16, 24), rand(24, 16), rand(16)
    _close(_run(path, which, "matmul_bias_relu", x, y, bias),
           np.maximum(x.astype(np.float64) @ y + bias, 0), tol=2e-5)


def test_grouped_matmul(path, which):
    # 4 experts over 24 rows; group sizes 5, 0, 11, 8 straddle the tiles of 8 rows, and
    # expert 1 owns none
    x, w = rand(24, 8), rand(4, 8, 4)
    offsets = np.array([0, 5, 5, 16, 24], np.int32)
    want = np.concatenate([x[offsets[g]:offsets[g + 1]].astype(np.float64) @ w[g]
                           for g in range(4)])
    _close(_run(path, which, "grouped_matmul", x, w, offsets, bm=8), want)


def test_online_softmax(path, which):
    x = rand(8, 32) * 4
    e = np.exp(x - x.max(axis=1, keepdims=True))
    _close(_run(path, which, "online_softmax", x, rows=4, bc=8), e / e.sum(axis=1, keepdims=True))


def test_flash_attention(path, which):
    q, k, v = rand(32, 8), rand(32, 8), rand(32, 8)
    _close(_run(path, which, "flash_attention", q, k, v, bq=8, bk=8),
           _attention(q, k, v, np.ones((32, 32), bool)))


@pytest.mark.parametrize("causal", [False, True])
def test_masked_attention(path, which, causal):
    q, k, v = rand(32, 8), rand(32, 8), rand(32, 8)
    block_mask = np.array([[1, 0, 0, 1], [0, 1, 0, 0], [1, 1, 1, 0], [0, 0, 1, 1]], np.int32)
    mask = np.kron(block_mask, np.ones((8, 8), np.int32)).astype(bool)
    if causal:
        mask &= np.tril(np.ones((32, 32), bool))
    _close(_run(path, which, "masked_attention", q, k, v, block_mask, bq=8, bk=8,
                causal=causal), _attention(q, k, v, mask))


def _visits(sizes, m: int, bm: int):
    """(offsets, group_ids, m_tile_ids): one visit per (row tile, group) that meet, ordered
    by tile, and one for each tile no group reaches (a group whose rows miss it)."""
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32)
    gid, tid = [], []
    for t in range(m // bm):
        meet = [g for g in range(len(sizes))
                if offsets[g] < (t + 1) * bm and offsets[g + 1] > t * bm]
        for g in meet or [len(sizes) - 1]:
            gid.append(g)
            tid.append(t)
    return offsets, np.array(gid, np.int32), np.array(tid, np.int32)


def _by_group(x, offsets, fn):
    out = np.zeros((x.shape[0],) + fn(x[:0], 0).shape[1:])
    for g in range(len(offsets) - 1):
        out[offsets[g]:offsets[g + 1]] = fn(x[offsets[g]:offsets[g + 1]].astype(np.float64), g)
    return out


def test_gmm(path, which):
    # groups of 5, 0, 11, 3 rows over 32 rows in tiles of 8: tile 0 is shared by groups 0
    # and 2, tile 2 holds group 3 and 5 rows of no group, tile 3 no group at all
    x, w = rand(32, 16), rand(4, 16, 8)
    offsets, gid, tid = _visits([5, 0, 11, 3], 32, 8)
    want = _by_group(x, offsets, lambda rows, g: rows @ w[g])
    _close(_run(path, which, "gmm", x, w, offsets, gid, tid, bm=8, bk=8), want)


def test_fused_mlp(path, which):
    x, up, down = rand(24, 8), rand(3, 8, 16) * 0.3, rand(3, 16, 8) * 0.3
    offsets, gid, tid = _visits([9, 0, 6], 24, 8)
    silu = lambda h: h / (1 + np.exp(-h))
    want = _by_group(x, offsets, lambda rows, g: silu(rows @ up[g]) @ down[g])
    _close(_run(path, which, "fused_mlp", x, up, down, offsets, gid, tid, bm=8, bf=8), want,
           tol=2e-5)


def test_tpu_matmul(path, which):
    # the TPU rung: values in TPU interpret mode, and with JAX's Pallas, Mosaic's lowering
    # checks (the (8, 128) block rule) and a grid that really tiles M, N and K
    J, pl = MODULES[which]
    ladder = _load(path)
    x, y = rand(32, 512), rand(512, 256)
    tpu = importlib.import_module(f"{J.__name__}.experimental.pallas.tpu")
    got = ladder.tpu_matmul(J, pl, x, y, interpret=tpu.InterpretParams())
    _close(np.asarray(got), x.astype(np.float64) @ y, tol=1e-4)
    if which == "jax":
        def compiled(x, y):
            return ladder.tpu_matmul(jax, jpl, x, y, interpret=False)

        text = jax.jit(compiled).trace(x, y).lower(lowering_platforms=("tpu",)).as_text()
        assert "tpu_custom_call" in text
        (call,) = [e for e in jax.make_jaxpr(compiled)(x, y).eqns
                   if e.primitive.name == "pallas_call"]
        grid = call.params["grid_mapping"].grid
        assert len(grid) == 3 and min(grid) >= 2, f"grid {grid}: tile M, N and K"
