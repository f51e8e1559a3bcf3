"""Back-of-the-envelope models of accelerators and of the programs that run on them.

The Scaling Book ("How to Scale Your Model", github.com/jax-ml/scaling-book) answers its
exercises with a handful of formulas: a roofline (time is bounded by FLOPs / peak and by bytes /
bandwidth), the cost of each collective on a ring or torus, the parameter and FLOP counts of a
Transformer, and the batch sizes at which each way of splitting training or inference stops
being compute-bound. This module holds those formulas as plain functions over plain numbers, and
the hardware figures they are fed as data, each with its public source.

It is not part of JAX (nothing here exists in `jax/`), so it lives in `compare/`. Chapter 29
(`chapters/29-scaling-book.md`) explains it; `compare/_scaling_exercises.py` answers every
exercise of the book with it, and `compare/scaling_book.py` checks the formulas against programs
minijax compiles (cost analysis and collectives of the compiled HLO).

Units: seconds, bytes, FLOPs (one multiply-add = 2 FLOPs), bytes/s. `W` is a bandwidth.
"""

from __future__ import annotations

import dataclasses
import math

# ---------------------------------------------------------------------------------------------
# Hardware specs as data
# ---------------------------------------------------------------------------------------------

BOOK_TPUS = "scaling-book tpus.md, 'Here are some specific numbers for our chips' (tables)"


@dataclasses.dataclass(frozen=True)
class Chip:
    """One accelerator chip. FLOP/s are dense (no structured sparsity).

    flops: peak FLOP/s per dtype ("bf16", "int8", "fp8"); hbm_bytes / hbm_bw: memory capacity
    and bandwidth; link_bw: one-way bandwidth of one interconnect link (ICI or NVLink); axes:
    torus dimensions a pod has (2 for v5e/v6e, 3 for v4p/v5p; 0 for a switched GPU node);
    pod / host: chips per pod and per host as topology shapes; cores: TensorCores per chip;
    pcie_bw: host <-> chip bandwidth; dcn_bw: data-center network bandwidth per host (both
    default to tpus.md's "typically" figures, 1.5e10 and 2.5e10); hop_latency: per-hop ICI
    overhead (sharding.md's ~1 us); source: where each figure comes from.
    """

    name: str
    flops: dict
    hbm_bytes: float
    hbm_bw: float
    link_bw: float
    axes: int
    pod: tuple = ()
    host: tuple = ()
    cores: int = 1
    pcie_bw: float = 1.5e10
    dcn_bw: float = 2.5e10
    hop_latency: float = 1e-6
    source: str = BOOK_TPUS

    @property
    def link_bidi(self) -> float:
        """Bytes/s one link carries in both directions together (what a full ring uses)."""
        return 2 * self.link_bw

    def peak(self, dtype: str = "bf16") -> float:
        if dtype not in self.flops:
            raise ValueError(f"{self.name}: no peak FLOP/s for dtype {dtype!r}; "
                             f"known: {sorted(self.flops)}")
        return self.flops[dtype]


GB = 1e9
CHIPS = {
    "v3": Chip("TPU v3", {"bf16": 1.4e14, "int8": 1.4e14}, 32 * GB, 9.0e11, 1e11, 2,
               (32, 32), (4, 2), cores=2, source=BOOK_TPUS + "; cloud.google.com/tpu/docs/v3"),
    "v4p": Chip("TPU v4p", {"bf16": 2.75e14, "int8": 2.75e14}, 32 * GB, 1.2e12, 4.5e10, 3,
                (16, 16, 16), (2, 2, 1), cores=2,
                source=BOOK_TPUS + "; cloud.google.com/tpu/docs/v4"),
    "v5p": Chip("TPU v5p", {"bf16": 4.59e14, "int8": 9.18e14}, 96 * GB, 2.8e12, 9e10, 3,
                (16, 20, 28), (2, 2, 1), cores=2,
                source=BOOK_TPUS + "; cloud.google.com/tpu/docs/v5p"),
    "v5e": Chip("TPU v5e", {"bf16": 1.97e14, "int8": 3.94e14}, 16 * GB, 8.1e11, 4.5e10, 2,
                (16, 16), (4, 2), cores=1,
                source=BOOK_TPUS + "; cloud.google.com/tpu/docs/v5e"),
    "v6e": Chip("TPU v6e", {"bf16": 9.2e14, "int8": 1.84e15}, 32 * GB, 1.6e12, 9e10, 2,
                (16, 16), (4, 2), cores=1, pcie_bw=3.2e10,
                source=BOOK_TPUS + "; cloud.google.com/tpu/docs/v6e"),
    # NVIDIA's sheets print tensor-core FLOP/s "with sparsity"; dense is half of that.
    "H100": Chip("H100 SXM", {"bf16": 1.979e15 / 2, "fp8": 3.958e15 / 2}, 80 * GB, 3.35e12,
                 4.5e11, 0, (8,), (8,), cores=132, pcie_bw=6.4e10,
                 source="nvidia.com/en-us/data-center/h100 (datasheet: 1,979 TFLOPS bf16 with "
                        "sparsity, 3.35 TB/s HBM3, NVLink 900 GB/s per GPU both ways)"),
    "H800": Chip("H800 SXM", {"bf16": 1.979e15 / 2, "fp8": 3.026e15 / 2}, 80 * GB, 3.35e12,
                 2e11, 0, (8,), (8,), cores=132,
                 source="lenovopress.lenovo.com/lp1814 (3,026 TFLOPS fp8 with sparsity), the "
                        "sheet transformers.md Q7 cites; NVLink 400 GB/s"),
    "B200": Chip("B200", {"bf16": 4.5e15 / 2, "fp8": 9e15 / 2}, 192 * GB, 8e12, 9e11, 0,
                 (8,), (8,), cores=148,
                 source="nvidia.com/en-us/data-center/hgx (HGX B200: 4.5 PFLOPS bf16 and 9 "
                        "PFLOPS fp8 with sparsity per GPU, 8 TB/s HBM3e, NVLink 1.8 TB/s)"),
}


def chips_in(shape: tuple) -> int:
    return math.prod(shape)


# ---------------------------------------------------------------------------------------------
# The roofline
# ---------------------------------------------------------------------------------------------

def intensity(flops: float, nbytes: float) -> float:
    """Arithmetic intensity: FLOPs per byte moved."""
    return flops / nbytes


def ridge(peak: float, bw: float) -> float:
    """The intensity at which compute time equals transfer time (the roofline's corner)."""
    return peak / bw


def roofline(flops: float, nbytes: float, peak: float, bw: float) -> dict:
    """Times of an operation: t_math, t_comms, and the bounds on the whole.

    lower = max(t_math, t_comms) (perfect overlap), upper = t_math + t_comms (none);
    bound = "compute" or "memory" (or "comms" when `bw` is a network's)."""
    t_math, t_comms = flops / peak, nbytes / bw
    return {"t_math": t_math, "t_comms": t_comms, "lower": max(t_math, t_comms),
            "upper": t_math + t_comms, "bound": "compute" if t_math >= t_comms else "memory"}


def matmul_cost(B: int, D: int, F: int, a_bytes: float = 2, w_bytes: float = 2,
                out_bytes: float = 2, batched_weights: bool = False) -> tuple[float, float]:
    """(FLOPs, bytes) of x[B, D] @ w[D, F] -> y[B, F]; with batched_weights, w is [B, D, F]
    (a different matrix per row, as in roofline.md Q4)."""
    w_elems = B * D * F if batched_weights else D * F
    return 2 * B * D * F, a_bytes * B * D + w_bytes * w_elems + out_bytes * B * F


def matmul_critical_batch(peak: float, bw: float, w_bytes: float = 2, D: int | None = None,
                          F: int | None = None, a_bytes: float | None = None,
                          out_bytes: float | None = None) -> float:
    """Smallest B at which x[B, D] @ w[D, F] is compute-bound.

    Without D and F it is the limit B << D, F: the weights dominate the bytes, intensity is
    2B / w_bytes, so B > w_bytes * ridge / 2. With D and F it solves
    2BDF / peak = (a B D + w D F + o B F) / bw exactly (a, o default to w_bytes)."""
    if D is None:
        return w_bytes * ridge(peak, bw) / 2
    a = w_bytes if a_bytes is None else a_bytes
    o = w_bytes if out_bytes is None else out_bytes
    slope = 2 * D * F / peak - (a * D + o * F) / bw
    if slope <= 0:
        return math.inf  # the activations alone already outweigh the compute
    return (w_bytes * D * F / bw) / slope


# ---------------------------------------------------------------------------------------------
# Collectives on rings, tori and switches
# ---------------------------------------------------------------------------------------------

def collective_time(kind: str, nbytes: float, chip: Chip, *, n: int | None = None,
                    n_axes: int = 1, wraparound: bool = True, exact: bool = False) -> float:
    """Bandwidth time of one collective over `n_axes` torus axes of `chip` (book's model).

    nbytes: V, the size of the whole (gathered, or unreduced) array. The book's rule for an
    all-gather or reduce-scatter on a ring with wraparound is V / (W_bidi * n_axes); with
    exact=True the (n-1)/n factor a ring really pays is kept (n: devices along the axes).
    Without a wraparound link (a line, e.g. a v5e axis shorter than 16) only one direction
    per neighbour helps: (n-1)/n * V / (W_oneway * n_axes). all-reduce = 2 x all-gather;
    all-to-all = all-gather / 4 on a bidirectional ring (/2 one-way); permute = one hop of V.
    """
    factor = {"all-gather": 1.0, "reduce-scatter": 1.0, "all-reduce": 2.0,
              "all-to-all": 0.25 if wraparound else 0.5}
    if kind not in factor and kind != "permute":
        raise ValueError(f"collective_time: unknown collective {kind!r}; expected one of "
                         f"{sorted(factor) + ['permute']}")
    if kind == "permute":
        return nbytes / chip.link_bw
    frac = (n - 1) / n if (exact or not wraparound) and n else 1.0
    w = chip.link_bidi if wraparound else chip.link_bw
    return factor[kind] * frac * nbytes / (w * n_axes)


def hops(n: int, wraparound: bool = True) -> int:
    """Hops for a value to cross an axis of n chips: n/2 on a ring, n-1 on a line."""
    return n // 2 if wraparound else n - 1


def latency_bound_time(kind: str, nbytes: float, chip: Chip, n: int, *, n_axes: int = 1,
                       wraparound: bool = True) -> float:
    """max(hop latency x hops, bandwidth time): small collectives are latency-bound."""
    lat = chip.hop_latency * hops(n, wraparound) * (2 if kind == "all-reduce" else 1)
    return max(lat, collective_time(kind, nbytes, chip, n=n, n_axes=n_axes,
                                    wraparound=wraparound))


def switched_collective_time(kind: str, nbytes: float, n: int, bw: float) -> float:
    """A collective inside an all-to-all switched node (NVLink/NVSwitch): each GPU sends and
    receives (n-1)/n of V at its one-way bandwidth bw; all-reduce twice that."""
    mult = {"all-gather": 1.0, "reduce-scatter": 1.0, "all-reduce": 2.0, "all-to-all": 1.0 / n}
    if kind not in mult:
        raise ValueError(f"switched_collective_time: unknown collective {kind!r}")
    return mult[kind] * (n - 1) / n * nbytes / bw


def ring_link_load(kind: str, N: int, D: int, bidirectional: bool) -> float:
    """Scalars the busiest link carries in one collective of an N x N array over a ring of D
    devices (sharding.md Q10), counted block by block along shortest paths.

    all-gather: every strip of N/D x N travels to the D-1 others; all-to-all: device s sends
    block (s -> t) of N/D x N/D to each t != s. Each block takes the shorter way round when
    bidirectional (a block exactly halfway is split over both ways)."""
    if kind not in ("all-gather", "all-to-all"):
        raise ValueError(f"ring_link_load: kind must be 'all-gather' or 'all-to-all', "
                         f"not {kind!r}")
    size = N * N / D if kind == "all-gather" else N * N / (D * D)
    load = {}  # (direction, link leaving device i) -> scalars
    for s in range(D):
        used = {}  # links this source's data crosses, with the share it sends over each
        for t in range(D):
            d = (t - s) % D
            if d == 0:
                continue
            back = D - d
            if not bidirectional or d < back:
                ways = [(1, d, 1.0)]
            elif back < d:
                ways = [(-1, back, 1.0)]
            else:
                ways = [(1, d, 0.5), (-1, back, 0.5)]
            for step, dist, share in ways:
                for h in range(dist):
                    key = (step, (s + step * h) % D)
                    # an all-gather forwards one strip (each link carries it once); an
                    # all-to-all sends a different block to each destination
                    used[key] = (max(used.get(key, 0.0), share) if kind == "all-gather"
                                 else used.get(key, 0.0) + share)
        for key, share in used.items():
            load[key] = load.get(key, 0.0) + share * size
    return max(load.values())


# ---------------------------------------------------------------------------------------------
# Sharded matmuls: which dimension is sharded -> which collective
# ---------------------------------------------------------------------------------------------

def matmul_collective(lhs: tuple, rhs: tuple) -> str:
    """The communication the book prescribes for A[I, J] . B[J, K] with shardings lhs = (I's
    mesh axis or None, J's) and rhs = (J's, K's).

    Case 1, no contracting dimension sharded: none (unless both non-contracting dimensions
    use the same axis: all-gather one). Case 2, one operand's contracting dimension sharded:
    all-gather that operand. Case 3, both on the same axis: local matmul, then all-reduce (or
    reduce-scatter) of the partial sums."""
    (i, j), (j2, k) = lhs, rhs
    if j and j2:
        if j != j2:
            raise ValueError(f"matmul_collective: contracting dimension sharded over two "
                             f"different axes {j!r} and {j2!r}; all-gather one first")
        return f"all-reduce over {j}"
    if j or j2:
        return f"all-gather {'A' if j else 'B'} over {j or j2}"
    if i and k and i == k:
        return f"all-gather one operand over {i}"
    return "none"


# ---------------------------------------------------------------------------------------------
# Transformers: parameters, FLOPs, memory
# ---------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Transformer:
    """A decoder-only Transformer in the book's notation.

    L layers, D model width, F feed-forward width, N query heads, K key/value heads, H head
    width, V vocabulary; ffw_mats: 3 for a gated MLP (two in-projections, one out), 2 plain;
    tied: one embedding matrix shared by input and output; E experts with k active per token
    (E=1: dense)."""

    L: int
    D: int
    F: int
    N: int
    K: int
    H: int
    V: int
    ffw_mats: int = 3
    tied: bool = False
    E: int = 1
    k: int = 1

    def attn_params(self) -> int:
        return self.L * (2 * self.D * self.N * self.H + 2 * self.D * self.K * self.H)

    def ffw_params(self, active: bool = False) -> int:
        return self.L * self.ffw_mats * self.D * self.F * (self.k if active else self.E)

    def vocab_params(self) -> int:
        return (1 if self.tied else 2) * self.V * self.D

    def params(self, active: bool = False) -> int:
        """Total parameters (active=True: only those one token uses: k of the E experts).
        Norm weights are left out, as the book does."""
        return self.attn_params() + self.ffw_params(active) + self.vocab_params()

    def kv_bytes_per_token(self, dtype_bytes: float = 2) -> float:
        """Keys and values of every layer for one token: 2 L K H elements."""
        return 2 * self.L * self.K * self.H * dtype_bytes

    def forward_flops(self, tokens: int, context: int = 0) -> float:
        """Matmul FLOPs of a forward pass: 2 per active parameter per token, plus attention
        (QK^T and AV: 4 N H per query per key, `context` keys per query)."""
        return 2 * self.params(active=True) * tokens + 4 * self.L * self.N * self.H * tokens \
            * context

    def train_flops(self, tokens: int, context: int = 0) -> float:
        """Forward + backward = 3 x forward (the 6 N T rule)."""
        return 3 * self.forward_flops(tokens, context)


def train_memory(params: float, tokens: float, layer_ckpt_elems: float, L: int, *,
                 param_bytes: float = 2, opt_bytes: float = 8, act_bytes: float = 2) -> dict:
    """HBM for training with Adam: weights, optimizer state (two f32 moments = 8 bytes per
    parameter) and saved activations (`layer_ckpt_elems` per token per layer, e.g. 3 x D for
    three saved [B, D] checkpoints)."""
    p, o = params * param_bytes, params * opt_bytes
    a = act_bytes * L * tokens * layer_ckpt_elems
    return {"params": p, "optimizer": o, "activations": a, "total": p + o + a}


# ---------------------------------------------------------------------------------------------
# Training strategies: when each becomes communication-bound
# ---------------------------------------------------------------------------------------------

def ici_intensity(chip: Chip, dtype: str = "bf16") -> float:
    """alpha = C / W_ici (bidirectional link bandwidth): the book's 2550 for v5p."""
    return chip.peak(dtype) / chip.link_bidi


def dp_min_batch_per_chip(chip: Chip, n_axes: int = 1) -> float:
    """Data parallelism and FSDP are compute-bound when tokens per chip > alpha / n_axes."""
    return ici_intensity(chip) / n_axes


def tp_max_ways(chip: Chip, F: int, n_axes: int = 1) -> float:
    """Tensor (model) parallelism is compute-bound while Y < n_axes F / alpha."""
    return n_axes * F / ici_intensity(chip)


def mixed_min_batch_per_chip(chip: Chip, F: int, mxmy: float = 2) -> float:
    """FSDP x tensor parallelism: compute-bound when B / N > 4 alpha^2 / (M_X M_Y F), where
    M_X M_Y is the product of the axes given to each (2 on a 3D torus)."""
    return 4 * ici_intensity(chip) ** 2 / (mxmy * F)


def fsdp_optimal_ways(B: float, N: int, F: int, mx_over_my: float = 2) -> float:
    """Best FSDP degree X = sqrt(B N M_X / (F M_Y)) when mixing with tensor parallelism."""
    return math.sqrt(B * N * mx_over_my / F)


def expert_parallel_bytes(tokens: int, k: int, D: int, F_out: int, n: int,
                          dtype_bytes: float = 2) -> float:
    """Bytes one device receives for expert parallelism over n devices: an all-to-all sends
    each of its `tokens` x k routed copies (D wide) to the device holding the expert, a second
    one brings the expert outputs (F_out wide) back; a ring receives (n-1)/n of each, and the
    buffers are sized for the worst case, every copy to one device (capacity tokens x k per
    destination)."""
    return (n - 1) / n * n * tokens * k * (D + F_out) * dtype_bytes


def pipeline_bubble(stages: int, microbatches: int) -> float:
    """Idle fraction of a GPipe schedule: (P - 1) / (M + P - 1)."""
    return (stages - 1) / (microbatches + stages - 1)


def dcn_min_batch_per_pod(chips: int, chip: Chip) -> float:
    """Data parallelism across pods over DCN is compute-bound when the tokens per pod exceed
    C_pod / W_dcn (W_dcn: per-host DCN bandwidth times hosts)."""
    hosts = chips / chips_in(chip.host)
    return chips * chip.peak() / (hosts * chip.dcn_bw)


def training_time(flops: float, chips: int, chip: Chip, mfu: float) -> float:
    return flops / (chips * chip.peak() * mfu)


# ---------------------------------------------------------------------------------------------
# Inference: prefill and decode
# ---------------------------------------------------------------------------------------------

def decode_step_time(batch: int, kv_bytes_per_seq: float, param_bytes: float,
                     param_count: float, chips: int, chip: Chip, dtype: str = "bf16") -> float:
    """One generate step: attention reads every KV cache (always memory-bound); the MLP reads
    the weights or does 2 x batch x params FLOPs, whichever takes longer."""
    bw, c = chips * chip.hbm_bw, chips * chip.peak(dtype)
    return batch * kv_bytes_per_seq / bw + max(2 * batch * param_count / c, param_bytes / bw)


def prefill_time(param_count: float, tokens: int, chips: int, chip: Chip,
                 mfu: float = 1.0) -> float:
    """Prefill is compute-bound: 2 x params x tokens FLOPs at `mfu` of peak."""
    return 2 * param_count * tokens / (chips * chip.peak() * mfu)


def max_batch(chips: int, chip: Chip, param_bytes: float, kv_bytes_per_seq: float) -> int:
    """How many sequences' KV caches fit in the HBM left after the weights."""
    free = chips * chip.hbm_bytes - param_bytes
    return max(0, int(free // kv_bytes_per_seq))


def min_chips(nbytes: float, chip: Chip, power_of_two: bool = True) -> int:
    """Fewest chips whose HBM holds `nbytes` (rounded up to a power of two: a real slice)."""
    n = math.ceil(nbytes / chip.hbm_bytes)
    return 2 ** math.ceil(math.log2(n)) if power_of_two else n
