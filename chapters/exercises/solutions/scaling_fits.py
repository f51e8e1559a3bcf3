"""Solution: the compute-optimal frontier from an isoFLOP sweep (chapter 27).

An isoFLOP sweep trains models of several sizes N on one compute budget C = 6 N D, each on
the D tokens the budget leaves it. Plotted against log N, their losses make a valley:
**approach 2** of Chinchilla fits a parabola in log N to each budget's valley and reads off
its minimum N_opt(C); across budgets, a straight line in log-log gives N_opt ∝ C^a.
**Approach 3** fits L(N, D) = E + A / N^α + B / D^β to every run, and the frontier follows
from it in closed form.
"""

from __future__ import annotations

import numpy as np


def isoflop_minimum(n: np.ndarray, loss: np.ndarray) -> tuple[float, float]:
    """The sizes `n` (f[k], k >= 3) of one budget and their losses (f[k]) -> (N_opt, L_opt):
    where the least-squares parabola of loss against log n has its minimum, and its value
    there. Raises ValueError when the parabola opens downward (it has no minimum)."""
    x = np.log(np.asarray(n, float))
    c2, c1, c0 = np.polyfit(x, np.asarray(loss, float), 2)
    if c2 <= 0:
        raise ValueError(f"isoflop_minimum: the parabola opens downward (x^2 coefficient "
                         f"{c2:.3g}): the losses {list(loss)} have no minimum in log N")
    x_min = -c1 / (2 * c2)
    return float(np.exp(x_min)), float(c0 + c1 * x_min + c2 * x_min ** 2)


def power_law(budgets: np.ndarray, values: np.ndarray) -> tuple[float, float]:
    """values ≈ k * budgets^e by least squares in log-log -> (e, k)."""
    e, log_k = np.polyfit(np.log(budgets), np.log(values), 1)
    return float(e), float(np.exp(log_k))


def optimal_allocation(budget: float, E: float, A: float, B: float, alpha: float,
                       beta: float) -> tuple[float, float]:
    """(N_opt, D_opt) minimising E + A / N^alpha + B / D^beta on the line 6 N D = budget.

    With D = C / (6N) the loss is E + A N^-α + B (C/6)^-β N^β; its derivative in N vanishes
    where α A N^-α = β B (C/6)^-β N^β, that is N^(α+β) = (α A / (β B)) (C/6)^β."""
    G = (alpha * A / (beta * B)) ** (1 / (alpha + beta))
    n = G * (budget / 6) ** (beta / (alpha + beta))
    return float(n), float(budget / (6 * n))
