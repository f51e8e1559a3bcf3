"""The JAX public names minijax does not implement, by module (written by
tools/public_surface.py; the table with reasons is docs/public_surface.md)."""

UNIMPLEMENTED = {
    'minijax': frozenset("""
        ad distributed lib
    """.split()),
    'minijax.numpy': frozenset("""
    """.split()),
    'minijax.lax': frozenset("""
        after_all after_all_p create_token create_token_p custom_linear_solve custom_root eq_to_p
        le_to_p linear_solve_p lt_to_p precv psend psum_p ragged_all_to_all ragged_all_to_all_p
        reduce_window_p scaled_dot select_and_scatter_p
    """.split()),
    'minijax.random': frozenset("""
    """.split()),
    'minijax.nn': frozenset("""
    """.split()),
    'minijax.tree_util': frozenset("""
        default_registry
    """.split()),
    'minijax.tree': frozenset("""
    """.split()),
    'minijax.scipy.special': frozenset("""
        sph_harm_y wofz
    """.split()),
    'minijax.sharding': frozenset("""
    """.split()),
    'minijax.experimental.pallas': frozenset("""
        core_map debug_check empty_ref_like enable_debug_checks enable_poison_buffers get_global
        kernel lower_as_mlir pallas_export_experimental select_ref semaphore
    """.split()),
    'minijax.experimental.pallas.tpu': frozenset("""
        get_barrier_semaphore sample_block to_pallas_key
    """.split()),
}


def missing(module: str, name: str) -> AttributeError:
    """The AttributeError for `module.name`: JAX's name, if it is one, is not implemented."""
    if name in UNIMPLEMENTED.get(module, ()):
        jax_name = 'jax' + module[len('minijax'):]
        return AttributeError(
            f"module {module!r} has no attribute {name!r}: {jax_name}.{name} is a JAX public name "
            "not implemented in minijax (docs/public_surface.md lists them)")
    return AttributeError(f"module {module!r} has no attribute {name!r}")
