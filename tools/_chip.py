"""The one "no accelerator" guard of the chip scripts (`tools/accelerator_tpu.py`,
`accelerator_compare.py`, `accelerator_eager.py`, `accelerator_numbers.py`, `tpu_ops.py`,
`addition_tpu.py`, `scaling_tpu.py`, `dispatch_tpu.py`).

Each measures a chip and writes its results under `chapters/data/`, where the chapters read
them as the chip's. Run on a machine without that chip, a script would time the CPU and write
its numbers where the chip's belong; `main()` asks this guard first and stops, having said why.
"""

from __future__ import annotations


def no_accelerator(consequence: str, *, platform: str = "tpu", allow: bool = False) -> bool:
    """Whether the script must stop: True, after printing why, when JAX's first device is not
    a `platform` device ("tpu" or "gpu") and `allow` is False (a script's `--smoke`, or an
    output path that is not the chip's record). `consequence` finishes the printed line
    ("nothing measured, X not written"). Imports JAX only when called, as the scripts do.

    Prints `no accelerator: jax.devices()[0] is 'cpu' (cpu); <consequence>`."""
    import jax

    dev = jax.devices()[0]
    if dev.platform == platform or allow:
        return False
    print(f"no accelerator: jax.devices()[0] is {dev.platform!r} ({dev.device_kind}); "
          f"{consequence}")
    return True
