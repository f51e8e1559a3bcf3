"""Graded exercises: skeleton files to fill in, tested against real JAX (see README.md)."""
