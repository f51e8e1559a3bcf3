"""minijax.experimental.pallas.tpu: the scalar-prefetch grid spec, as in
jax.experimental.pallas.tpu. minijax runs every kernel in interpret mode, so nothing here is
TPU-specific: the name is JAX's, for kernels written once for both modules."""

from minijax.experimental.pallas.pallas_call import GridSpec


# JAX: jax/_src/pallas/mosaic/core.py PrefetchScalarGridSpec
class PrefetchScalarGridSpec(GridSpec):
    """A GridSpec whose first `num_scalar_prefetch` inputs are prefetched whole (on a TPU,
    into scalar memory): the kernel gets them as its first refs and every index map gets
    them after the grid indices, `index_map(*grid_ids, *prefetched)`."""

    def __init__(self, num_scalar_prefetch: int, grid=(), in_specs=None, out_specs=None,
                 scratch_shapes=()) -> None:
        super().__init__(grid, in_specs, out_specs, scratch_shapes)
        self.num_scalar_prefetch = int(num_scalar_prefetch)
