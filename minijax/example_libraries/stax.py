"""`stax`: neural networks as pairs of functions.

A layer is `(init_fun, apply_fun)`: `init_fun(rng, input_shape)` returns the output shape and
the parameters (drawn from `rng`), `apply_fun(params, inputs, **kwargs)` the outputs.
Combinators (`serial`, `parallel`, `FanOut`, ...) build layers of layers; their parameters are
tuples of their children's. Output shapes of convolutions and pools are found by tracing the
layer's function on a stand-in of the input shape (`minijax.eval_shape`). Mirrors
jax/example_libraries/stax.py — differs: no BatchNorm, ConvTranspose, shape_dependent, and no
Elu/LeakyRelu/Selu (minijax.nn lacks those activations).
"""

from __future__ import annotations

import functools

import numpy as np

from minijax import eval_shape, lax, numpy as jnp, random
from minijax.core import ShapeDtypeStruct
from minijax.nn import gelu, log_softmax, relu, sigmoid, softmax, softplus
from minijax.nn.initializers import glorot_normal, normal


def _shape_of(fun, *shapes) -> tuple:
    return tuple(eval_shape(fun, *[ShapeDtypeStruct(tuple(s), np.float32) for s in shapes])
                 .shape)


# JAX: jax/example_libraries/stax.py Dense
def Dense(out_dim, W_init=None, b_init=None):
    """inputs `[..., n]` @ W `[n, out_dim]` + b `[out_dim]` (W: glorot_normal, b: normal by
    default)."""
    W_init, b_init = W_init or glorot_normal(), b_init or normal()
    def init_fun(rng, input_shape):
        k1, k2 = random.split(rng)
        return (*input_shape[:-1], out_dim), (W_init(k1, (input_shape[-1], out_dim)),
                                              b_init(k2, (out_dim,)))

    def apply_fun(params, inputs, **kwargs):
        W, b = params
        return jnp.dot(inputs, W) + b
    return init_fun, apply_fun


# JAX: jax/example_libraries/stax.py GeneralConv
def GeneralConv(dimension_numbers, out_chan, filter_shape, strides=None, padding="VALID",
                W_init=None, b_init=None):
    """A convolution with `out_chan` filters of `filter_shape`; `dimension_numbers` names the
    layouts of inputs, kernel and outputs ("NHWC", "HWIO", "NHWC")."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    ones = (1,) * len(filter_shape)
    strides = strides or ones
    W_init = W_init or glorot_normal(rhs_spec.index("I"), rhs_spec.index("O"))
    b_init = b_init or normal(1e-6)

    def conv(x, W):
        return lax.conv_general_dilated(x, W, strides, padding, ones, ones,
                                        dimension_numbers=dimension_numbers)

    def init_fun(rng, input_shape):
        spatial = iter(filter_shape)
        kernel = tuple(out_chan if c == "O" else input_shape[lhs_spec.index("C")] if c == "I"
                       else next(spatial) for c in rhs_spec)
        k1, k2 = random.split(rng)
        W, b = W_init(k1, kernel), b_init(k2, tuple(out_chan if c == "C" else 1
                                                     for c in out_spec))
        return _shape_of(conv, input_shape, kernel), (W, b)

    def apply_fun(params, inputs, **kwargs):
        W, b = params
        return conv(inputs, W) + b
    return init_fun, apply_fun


Conv = functools.partial(GeneralConv, ("NHWC", "HWIO", "NHWC"))


# JAX: jax/example_libraries/stax.py elementwise
def elementwise(fun, **fun_kwargs):
    """A layer with no parameters applying `fun(inputs, **fun_kwargs)`."""
    return (lambda rng, input_shape: (input_shape, ()),
            lambda params, inputs, **kwargs: fun(inputs, **fun_kwargs))


Tanh = elementwise(jnp.tanh)
Relu = elementwise(relu)
Exp = elementwise(jnp.exp)
LogSoftmax = elementwise(log_softmax, axis=-1)
Softmax = elementwise(softmax, axis=-1)
Softplus = elementwise(softplus)
Sigmoid = elementwise(sigmoid)
Gelu = elementwise(gelu)


def _pooling_layer(init_val, reducer, average: bool):
    def PoolingLayer(window_shape, strides=None, padding="VALID", spec=None):
        """A pooling layer over `window_shape` (spatial dimensions; batch and channels, at
        `spec`'s N and C or first and last, are not pooled)."""
        strides = strides or (1,) * len(window_shape)
        n, c = (0, len(window_shape) + 1) if spec is None else (spec.index("N"),
                                                                 spec.index("C"))
        dims, steps = list(window_shape), list(strides)
        for i in sorted((n, c)):
            dims.insert(i, 1)
            steps.insert(i, 1)

        def pool(x):
            out = lax.reduce_window(x, init_val, reducer, tuple(dims), tuple(steps), padding)
            if average:  # divided by the number of inputs each window covers (padding: fewer)
                out = out / lax.reduce_window(jnp.ones(x.shape, x.dtype), 0.0, lax.add,
                                              tuple(dims), tuple(steps), padding)
            return out
        return (lambda rng, input_shape: (_shape_of(pool, input_shape), ()),
                lambda params, inputs, **kwargs: pool(inputs))
    return PoolingLayer


MaxPool = _pooling_layer(-np.inf, lax.max, False)
SumPool = _pooling_layer(0.0, lax.add, False)
AvgPool = _pooling_layer(0.0, lax.add, True)

# JAX: jax/example_libraries/stax.py Flatten, Identity, FanInSum
Flatten = (lambda rng, input_shape: ((input_shape[0], int(np.prod(input_shape[1:]))), ()),
           lambda params, inputs, **kwargs: jnp.reshape(inputs, (inputs.shape[0], -1)))
Identity = (lambda rng, input_shape: (input_shape, ()),
            lambda params, inputs, **kwargs: inputs)
FanInSum = (lambda rng, input_shape: (input_shape[0], ()),
            lambda params, inputs, **kwargs: functools.reduce(lambda a, b: a + b, inputs))


def FanOut(num):
    """One input handed on as `num` copies."""
    return (lambda rng, input_shape: ([input_shape] * num, ()),
            lambda params, inputs, **kwargs: [inputs] * num)


def FanInConcat(axis=-1):
    """Several inputs concatenated along `axis`."""
    def init_fun(rng, input_shape):
        ax = axis % len(input_shape[0])
        return (*input_shape[0][:ax], sum(s[ax] for s in input_shape),
                *input_shape[0][ax + 1:]), ()
    return init_fun, lambda params, inputs, **kwargs: jnp.concatenate(inputs, axis)


# JAX: jax/example_libraries/stax.py Dropout
def Dropout(rate, mode="train"):
    """In "train" mode, each input kept with probability `rate` and scaled by 1 / rate
    (`apply_fun` needs `rng=`; ValueError without it); in any other mode the identity."""
    def apply_fun(params, inputs, **kwargs):
        rng = kwargs.get("rng", None)
        if mode != "train":
            return inputs
        if rng is None:
            raise ValueError("Dropout layer requires apply_fun to be called with a PRNG key "
                             "argument. That is, instead of `apply_fun(params, inputs)`, call "
                             "it like `apply_fun(params, inputs, rng)` where `rng` is a "
                             "PRNG key (e.g. from `jax.random.key`).")
        keep = random.bernoulli(rng, rate, inputs.shape)
        return jnp.where(keep, inputs / rate, 0)
    return (lambda rng, input_shape: (input_shape, ())), apply_fun


# JAX: jax/example_libraries/stax.py serial
def serial(*layers):
    """The layers one after the other; params: a tuple of theirs."""
    init_funs, apply_funs = zip(*layers) if layers else ((), ())

    def init_fun(rng, input_shape):
        params = []
        for init in init_funs:
            rng, sub = random.split(rng)
            input_shape, p = init(sub, input_shape)
            params.append(p)
        return input_shape, params

    def apply_fun(params, inputs, **kwargs):
        rng = kwargs.pop("rng", None)
        rngs = random.split(rng, len(layers)) if rng is not None else (None,) * len(layers)
        for fun, p, r in zip(apply_funs, params, rngs):
            inputs = fun(p, inputs, rng=r, **kwargs)
        return inputs
    return init_fun, apply_fun


# JAX: jax/example_libraries/stax.py parallel
def parallel(*layers):
    """Layer i on input i (a list of inputs in, a list of outputs out)."""
    init_funs, apply_funs = zip(*layers)

    def init_fun(rng, input_shape):
        rngs = random.split(rng, len(layers))
        return tuple(zip(*[init(r, s) for init, r, s in zip(init_funs, rngs, input_shape)]))

    def apply_fun(params, inputs, **kwargs):
        rng = kwargs.pop("rng", None)
        rngs = random.split(rng, len(layers)) if rng is not None else (None,) * len(layers)
        return [f(p, x, rng=r, **kwargs) for f, p, x, r in zip(apply_funs, params, inputs, rngs)]
    return init_fun, apply_fun
