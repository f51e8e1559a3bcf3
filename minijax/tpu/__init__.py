"""What JAX keeps for TPUs alone: linear algebra written in lax (mirrors jax/_src/tpu/)."""
