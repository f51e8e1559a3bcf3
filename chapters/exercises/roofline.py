"""Exercise: the roofline model from a compiled program's cost analysis (chapter 17).

A program that does `flops` arithmetic operations and moves `bytes` of memory cannot run
faster than either ceiling of the machine: `flops / peak` seconds (compute) or
`bytes / bandwidth` seconds (memory). Its arithmetic intensity `flops / bytes` says which
ceiling binds: below the ridge point `peak / bandwidth` the program is memory-bound.
Fill in the three functions marked `NotImplementedError`; the tests feed them XLA's
`cost_analysis()` of real programs compiled by both modules.
"""

from __future__ import annotations


def arithmetic_intensity(cost: dict) -> float:
    """FLOP per byte of a `compiled.cost_analysis()` dict (keys 'flops', 'bytes accessed')."""
    raise NotImplementedError


def attainable_flops(intensity: float, peak: float, bandwidth: float) -> float:
    """The roofline: the best FLOP/s a program of this intensity can reach on a machine with
    `peak` FLOP/s and `bandwidth` bytes/s."""
    raise NotImplementedError


def bound(cost: dict, peak: float, bandwidth: float) -> str:
    """"memory" if the program is left of the ridge point (memory-bound), else "compute"."""
    raise NotImplementedError


def best_time_s(cost: dict, peak: float, bandwidth: float) -> float:
    """The shortest time the roofline allows for the program: flops / attainable FLOP/s."""
    intensity = arithmetic_intensity(cost)
    return float(cost["flops"]) / attainable_flops(intensity, peak, bandwidth)
