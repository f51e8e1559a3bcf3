"""Pallas on a TPU: kernel jaxprs lowered to Mosaic (`lowering.py`) and emitted as the
`tpu_custom_call` of the jit's StableHLO (`pallas_call_registration.py`). This package is
minijax's third door to the backend: it imports `jaxlib.mlir` and `jaxlib.mosaic`. Mirrors
jax/_src/pallas/mosaic/. See chapters/16-pallas.md."""
