"""QDWH polar decomposition and the SVD built on it: how `svd` lowers on a TPU, which has no
LAPACK (mirrors jax/_src/tpu/linalg/). Importing `svd` registers its lowering."""

from minijax.tpu.linalg import qdwh, svd  # noqa: F401
