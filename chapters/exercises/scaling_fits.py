"""Exercise: the compute-optimal frontier from an isoFLOP sweep (chapter 27).

An isoFLOP sweep trains models of several sizes N on one compute budget C = 6 N D, each on
the D tokens the budget leaves it. Plotted against log N, their losses make a valley:
**approach 2** of Chinchilla fits a parabola in log N to each budget's valley and reads off
its minimum N_opt(C); across budgets, a straight line in log-log gives N_opt ∝ C^a.
**Approach 3** fits L(N, D) = E + A / N^α + B / D^β to every run, and the frontier follows
from it in closed form. Write the three functions marked `NotImplementedError`; the tests
check them on losses that follow Chinchilla's published fit exactly, where the answers are
known in closed form, and against `compare/scaling_laws.py`.
"""

from __future__ import annotations

import numpy as np


def isoflop_minimum(n: np.ndarray, loss: np.ndarray) -> tuple[float, float]:
    """The sizes `n` (f[k], k >= 3) of one budget and their losses (f[k]) -> (N_opt, L_opt):
    where the least-squares parabola of loss against log n has its minimum, and its value
    there. Raises ValueError when the parabola opens downward (it has no minimum)."""
    raise NotImplementedError("isoflop_minimum")


def power_law(budgets: np.ndarray, values: np.ndarray) -> tuple[float, float]:
    """values ≈ k * budgets^e by least squares in log-log -> (e, k)."""
    raise NotImplementedError("power_law")


def optimal_allocation(budget: float, E: float, A: float, B: float, alpha: float,
                       beta: float) -> tuple[float, float]:
    """(N_opt, D_opt) minimising E + A / N^alpha + B / D^beta on the line 6 N D = budget."""
    raise NotImplementedError("optimal_allocation")
