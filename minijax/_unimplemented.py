"""The JAX public names minijax does not implement, by module (written by
tools/public_surface.py; the table with reasons is docs/public_surface.md)."""

UNIMPLEMENTED = {
    'minijax': frozenset("""
        ad distributed lib
    """.split()),
    'minijax.numpy': frozenset("""
        ComplexWarning angle apply_along_axis apply_over_axes argpartition array_equiv array_repr
        array_str bartlett bitwise_count blackman block bool c_ can_cast cdouble character choose
        complex128 complex_ complexfloating compress csingle diag_indices_from diagflat double
        dsplit einsum_path euler_gamma extract fft fill_diagonal flexible float4_e2m1fn
        float6_e2m3fn float6_e3m2fn float8_e3m4 float8_e4m3 float8_e4m3b11fnuz float8_e4m3fn
        float8_e4m3fnuz float8_e5m2 float8_e5m2fnuz float8_e8m0fnu float_ from_dlpack frombuffer
        fromfile fromfunction fromiter frompyfunc fromstring generic get_printoptions gradient
        hamming hanning histogram2d histogram_bin_edges histogramdd i0 index_exp int1 int2 int4
        int_ intersect1d iscomplex isdtype iterable ix_ kaiser load mask_indices matvec mgrid
        object_ ogrid packbits partition piecewise place poly polyadd polyder polydiv polyfit
        polyint polymul polysub printoptions put put_along_axis r_ ravel_multi_index rollaxis roots
        s_ save savez set_printoptions setdiff1d setxor1d signedinteger single sort_complex spacing
        tril_indices_from trim_zeros triu_indices_from ufunc uint uint1 uint2 uint4 union1d
        unique_all unique_counts unique_inverse unique_values unpackbits unsignedinteger unwrap
        vander vecmat vectorize
    """.split()),
    'minijax.lax': frozenset("""
        AccuracyMode ConvGeneralDilatedDimensionNumbers DotAlgorithm DotAlgorithmPreset
        DotDimensionNumbers FftType GatherScatterMode PrecisionLike RandomAlgorithm RoundingMethod
        Tolerance after_all after_all_p approx_max_k approx_min_k approx_top_k_p associative_scan
        batch_matmul bessel_i0e bessel_i0e_p bessel_i1e bessel_i1e_p betainc broadcast_like
        broadcast_shapes broadcast_to_rank clz clz_p collapse composite conv_general_dilated_local
        conv_general_dilated_patches conv_general_permutations conv_general_shape_tuple
        conv_shape_tuple conv_transpose conv_transpose_shape_tuple copy_p create_token
        create_token_p custom_linear_solve custom_root dce_sink dce_sink_p dtype empty eq_to_p exp2
        exp2_p fft fft_p igamma igamma_grad_a igamma_grad_a_p igamma_p igammac igammac_p
        index_in_dim index_take le_to_p linear_solve_p lt_to_p mulhi mulhi_p optimization_barrier
        optimization_barrier_p pbroadcast platform_dependent polygamma polygamma_p population_count
        population_count_p precv psend pshuffle psum_p pswapaxes ragged_all_to_all
        ragged_all_to_all_p random_gamma_grad reduce reduce_and reduce_and_p reduce_or reduce_or_p
        reduce_p reduce_prod reduce_prod_p reduce_window_p reduce_window_shape_tuple reduce_xor
        reduce_xor_p regularized_incomplete_beta_p rng_bit_generator rng_bit_generator_p
        rng_uniform rng_uniform_p round round_p scaled_dot scatter_apply scatter_sub scatter_sub_p
        select_and_scatter_p shape_as_value slice_in_dim split split_p stage stage_p tile tile_p
        zeta zeta_p
    """.split()),
    'minijax.random': frozenset("""
        ball beta binomial chisquare dirichlet f gamma generalized_normal loggamma multinomial
        poisson random_gamma_p t
    """.split()),
    'minijax.nn': frozenset("""
    """.split()),
    'minijax.tree_util': frozenset("""
        default_registry
    """.split()),
    'minijax.tree': frozenset("""
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
