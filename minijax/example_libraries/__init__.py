"""`minijax.example_libraries`: the small neural-network (`stax`) and optimizer (`optimizers`)
libraries JAX ships as examples, written on minijax's public API. Mirrors
jax/example_libraries/."""
