"""The Pallas ladder of chapters/exercises/pallas_ladder.py (chapter 16): each rung runs under
`minijax.experimental.pallas` and `jax.experimental.pallas` (both interpret mode), on the
skeleton a learner fills in and on the reference solution, against a NumPy reference.

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
              pytest.mark.parametrize("which", list(MODULES))]

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
