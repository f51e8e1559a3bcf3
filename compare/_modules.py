"""The modules a topic runs its programs under, as (name, module) pairs: JAX, the reference,
first, then minijax. Every topic that writes a program once over a module argument `J` loops
over `MODULES` (`for name, J in MODULES`), so the two runs see the same code.

Which modules each topic runs, "both" or "jax" alone, it declares in `compare/__init__.py:
TOPICS`, read by `python -m compare` (`compare/__main__.py: runs_of`). The matmul precision
every topic runs at (`check_precision`, `precision_scope`) is set here for all modules.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import jax

import minijax

MODULES = (("jax", jax), ("minijax", minijax))
ROOT = Path(__file__).resolve().parents[1]  # the repository: what a child imports from


# Child processes that run JAX: where this process holds an accelerator, on the CPU.
CHIP_HELD = "measured on the CPU: the chip is held by this process"


def children_on_cpu() -> bool:
    """Whether a child process that runs JAX must be sent to the CPU: this process's default
    platform is not the CPU, and an accelerator such as a TPU opens in one process at a time
    (a child asking for the chip this process holds fails to start its backend)."""
    return jax.default_backend() != "cpu"


def child_env(env: dict[str, str]) -> dict[str, str]:
    """`env` for a child that runs JAX or minijax: the repository first on `PYTHONPATH`, ahead
    of what `env` has there (where the packages may live: ml_dtypes, say, on a machine whose
    JAX is not installed in site-packages), and `JAX_PLATFORMS=cpu` where `children_on_cpu()`
    (minijax takes JAX's default backend, `minijax/xla_bridge.py: get_backend`, so the
    variable sends both to the CPU)."""
    path = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env = {**env, "PYTHONPATH": path}
    return {**env, "JAX_PLATFORMS": "cpu"} if children_on_cpu() else env


# Topics that keep the TPU's default precision, and why.
DEFAULT_PRECISION_ON_TPU = {
    "cnn_bn": "at the highest precision its training step does not compile on a TPU v5e "
              "within minutes, under JAX as under minijax: XLA's compile of one of its "
              "convolutions at HIGHEST, the weight gradient of the first layer (float32 "
              "64x1x28x28 by 64x16x28x28; 5.2 s at the default), did not finish in 25 s "
              "(tools/accelerator_conv_highest.py, chapters/data/compare-tpu-run/"
              "cnn-highest.json). So its training runs at the default there; its gradient "
              "checks, on a tiny model, run at the highest (compare/cnn_bn.py: grad_checks)",
}


def check_precision(topic: str = "") -> str | None:
    """The matmul precision `topic` runs at: "highest" on a TPU (but for the topics of
    DEFAULT_PRECISION_ON_TPU), None (each backend's default) elsewhere. A TPU multiplies
    float32 matrices in one bf16 pass by default, three decimal digits where the topics'
    checks (gradients against finite differences, a layer against its loop, two code
    paths, minijax's losses against JAX's) hold float32 results to float32 tolerances;
    `highest` gives float32 products, so the checks test the programs, not the default's
    rounding. The default's own figures (step times, where minijax's and JAX's losses
    part) are measured by tools/accelerator_compare.py."""
    tpu = jax.default_backend() == "tpu"
    return "highest" if tpu and topic not in DEFAULT_PRECISION_ON_TPU else None


def precision_scope(precision: str | None):
    """Every module's `default_matmul_precision(precision)`, or nothing when None."""
    if precision is None:
        return contextlib.nullcontext()
    stack = contextlib.ExitStack()
    for _, J in MODULES:
        stack.enter_context(J.default_matmul_precision(precision))
    return stack
