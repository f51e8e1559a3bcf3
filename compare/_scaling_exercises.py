"""Every exercise of the Scaling Book, answered with `compare/_scaling_models.py`.

Each function below takes one question of one chapter of "How to Scale Your Model"
(github.com/jax-ml/scaling-book, commit 0819a7d of February 2025; chapter = the markdown file's
name) and returns `Answer` rows, one per part: our number, computed from the question's inputs,
and the book's published number, copied as a fact. Where the book rounds, `rtol` says how much;
where it publishes no answer, `book` is None and `note` says what we assumed; where our number
and the book's disagree, `note` shows why (a slip in the book's arithmetic, a rounded input, a
different assumption). The programming problems of the JAX chapter and the profile questions
run real programs and live in `compare/scaling_book.py`.
"""

from __future__ import annotations

import dataclasses
import math

from compare._scaling_models import (
    CHIPS,
    Transformer,
    chips_in,
    collective_time,
    dcn_min_batch_per_pod,
    decode_step_time,
    dp_min_batch_per_chip,
    fsdp_optimal_ways,
    hops,
    latency_bound_time,
    matmul_collective,
    matmul_cost,
    matmul_critical_batch,
    max_batch,
    min_chips,
    mixed_min_batch_per_chip,
    prefill_time,
    ridge,
    ring_link_load,
    roofline,
    tp_max_ways,
    train_memory,
    training_time,
)

V5E, V5P, V4P, V6E, H100, H800 = (CHIPS[k] for k in ("v5e", "v5p", "v4p", "v6e", "H100",
                                                      "H800"))
DAY, YEAR = 86400.0, 365.25 * 86400.0
NO_ANSWER = "the book publishes no answer; "


@dataclasses.dataclass
class Answer:
    """One part of one exercise: ours vs the book's published value."""

    chapter: str
    id: str
    question: str
    ours: object
    book: object = None
    rtol: float = 0.0
    note: str = ""

    @property
    def ok(self) -> bool:
        """Agreement within the stated tolerance (no published answer: nothing to disagree)."""
        if self.book is None:
            return True
        if isinstance(self.book, (bool, str)) or isinstance(self.ours, (bool, str)):
            return self.ours == self.book
        return math.isclose(float(self.ours), float(self.book), rel_tol=self.rtol,
                            abs_tol=0.0)

    @property
    def explained(self) -> bool:
        return self.ok or bool(self.note)

    def to_json(self) -> dict:
        def num(v):  # JSON has no infinity: an unbounded answer is written as "inf"
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return float(v) if math.isfinite(v) else str(v)
            return v
        return {"chapter": self.chapter, "id": self.id, "question": self.question,
                "ours": num(self.ours), "book": num(self.book), "ok": self.ok,
                "rtol": self.rtol, "note": self.note}


EXERCISES = []


def exercise(fn):
    EXERCISES.append(fn)
    return fn


def all_answers() -> list[Answer]:
    return [a for fn in EXERCISES for a in fn()]


# ---------------------------------------------------------------------------------------------
# roofline.md, "A Few Problems to Work" (HBM 8.1e11 B/s, int8 3.94e14 OP/s, bf16 1.97e14)
# ---------------------------------------------------------------------------------------------

@exercise
def roofline_q1():
    c = "roofline"
    B, D, F = 64, 8192, 32768  # the question is symbolic; any B << D, F shows the formulas
    flops, nbytes = matmul_cost(B, D, F, 1, 1, 1)
    r = roofline(flops, nbytes, V5E.peak("int8"), V5E.hbm_bw)
    return [
        Answer(c, "Q1.1", "int8 bytes read + written (B=64, D=8192, F=32768)", nbytes,
               B * D + D * F + B * F),
        Answer(c, "Q1.2", "OPs performed", flops, 2 * B * D * F),
        Answer(c, "Q1.3", "int8 ridge point (OPs/byte)", ridge(V5E.peak("int8"), V5E.hbm_bw),
               486, rtol=0.01),
        Answer(c, "Q1.3b", "batch above which the int8 matmul is compute-bound",
               matmul_critical_batch(V5E.peak("int8"), V5E.hbm_bw, w_bytes=1), 243, rtol=0.01),
        Answer(c, "Q1.4", "runtime bounds: lower = max(T_math, T_comms), upper = sum",
               (r["lower"], r["upper"]) == (max(r["t_math"], r["t_comms"]),
                                            r["t_math"] + r["t_comms"]), True),
    ]


@exercise
def roofline_q2():
    b = matmul_critical_batch(V5E.peak("bf16"), V5E.hbm_bw, w_bytes=1)
    return [Answer("roofline", "Q2", "bf16 activations x int8 weights: compute-bound batch", b,
                   120, rtol=0.02,
                   note="book rounds the bf16 ridge 1.97e14 / 8.1e11 = 243 to 240")]


@exercise
def roofline_q3():
    # A roofline plot: attainable FLOP/s vs B. We give the value at the knee for D = F = 8192.
    B = 121.6
    flops, nbytes = matmul_cost(int(B), 8192, 8192, 2, 1, 2)
    att = min(V5E.peak(), flops / nbytes * V5E.hbm_bw)
    return [Answer("roofline", "Q3", "attainable FLOP/s at B=121 (D=F=8192), a point of the "
                   "plot the topic draws", att, None,
                   note=NO_ANSWER + "the question asks for a plot (drawn in full runs)")]


@exercise
def roofline_q4():
    B, D, F = 256, 4096, 4096
    flops, nbytes = matmul_cost(B, D, F, 1, 1, 1, batched_weights=True)
    return [Answer("roofline", "Q4", "intensity of int8[B,D] x int8[B,D,F] (one matrix per "
                   "row)", flops / nbytes, 2, rtol=0.01)]


@exercise
def roofline_q5():
    return [Answer("roofline", "Q5", "H100 batch at which a bf16 matmul is compute-bound",
                   matmul_critical_batch(H100.peak(), H100.hbm_bw), 298, rtol=0.02,
                   note="book rounds the dense peak 989.5e12 up to 1e15")]


# ---------------------------------------------------------------------------------------------
# tpus.md, "Worked Problems"
# ---------------------------------------------------------------------------------------------

@exercise
def tpus_q1():
    t = 2 * 200e9 / 32 / V4P.hbm_bw
    return [Answer("tpus", "Q1", "load 200B bf16 params from HBM on 32 v4p (s)", t, 10e-3,
                   rtol=0.05, note="book uses 1.23e12 B/s and rounds to 10 ms")]


@exercise
def tpus_q2():
    c = "tpus"
    out = []
    for key, book in (("v5e", (32, 256, 5.1e16, 4e12)), ("v5p", (2240, 17920, 4e18, 860e12))):
        chip = CHIPS[key]
        n = chips_in(chip.pod)
        ours = (n // chips_in(chip.host), n * chip.cores, n * chip.peak(), n * chip.hbm_bytes)
        names = ("hosts", "TensorCores", "pod bf16 FLOP/s", "pod HBM bytes")
        tols = (0, 0, 0.03, 0.03)
        out += [Answer(c, f"Q2.{key}.{nm}", f"full {key} pod: {nm}", o, b, rtol=t,
                       note="book rounds the per-chip peak" if "FLOP" in nm else "")
                for nm, o, b, t in zip(names, ours, book, tols)]
    return out


@exercise
def tpus_q3():
    C, W = V6E.peak(), 1.5e10
    approx = matmul_critical_batch(C, W)  # B << D limit: B > C / W
    exact = matmul_critical_batch(C, W, D=8192, F=4 * 8192)
    return [
        Answer("tpus", "Q3", "v6e over PCIe: smallest compute-bound batch (B << D)", approx,
               61000, rtol=0.01),
        Answer("tpus", "Q3.exact", "same, solved without B << D for D=8192, F=4D", exact, None,
               note=NO_ANSWER + "without the B << D shortcut there is no such batch (inf): at "
                    "B ~ 61,000 > D the activations' own PCIe traffic (2BD + 2BF bytes) grows "
                    "as fast as the FLOPs, so the answer holds only for D well above 61,000"),
    ]


@exercise
def tpus_q4():
    C, W = V5E.peak("int8"), V5E.hbm_bw
    hbm = matmul_critical_batch(C, W, w_bytes=1, D=4096, F=16384)
    vmem = matmul_critical_batch(C, 22 * W, w_bytes=1, D=4096, F=16384)
    return [
        Answer("tpus", "Q4.1", "int8 [B,4096] x [4096,16384] on v5e from HBM: compute-bound "
               "batch", hbm, 271, rtol=0.04,
               note="ours 263: the book rounds 2*4096*16384 = 1.34e8 to 1.3e8 FLOPs per row"),
        Answer("tpus", "Q4.2", "same from VMEM (22x HBM bandwidth)", vmem, 11, rtol=0.03),
    ]


@exercise
def tpus_q5():
    nbytes = 2 * 8 * 128 * 8192
    bw = 2 * V5E.link_bw  # two ports out of TPU{0,0}, no wraparound on a 4x4
    first = V5E.hop_latency * (hops(4, False) + hops(4, False))
    return [
        Answer("tpus", "Q5.1", "first byte TPU{0,0} -> TPU{3,3} on a v5e 4x4 (s)", first, 6e-6),
        Answer("tpus", "Q5.2", "whole bf16[8,128,8192] transfer (s)", nbytes / bw + first,
               194e-6, rtol=0.01, note="book rounds 1.68e7 bytes to 1.7e7"),
    ]


@exercise
def tpus_q6():
    c = "tpus"
    nbytes = (128 * 1024) ** 2  # int8: 2**34 = 17.2e9 bytes; the book calls it 16 GB
    pcie = nbytes / 2 / (8 * V5E.pcie_bw)
    ici = nbytes * 15 / 16 / (2 * V5E.link_bw)
    hbm = nbytes / V5E.hbm_bw
    flops = 2 * 8 * nbytes / V5E.peak()
    note = "book takes the 2**34-byte array as 16e9 bytes (it is 16 GiB = 17.2e9): ours is 7% more"
    return [
        Answer(c, "Q6.pcie", "PCIe load, 8 links per host (s)", pcie, 66e-3, 0.02, note),
        Answer(c, "Q6.ici", "ICI gather into TPU{0,0} over 2 links (s)", ici, 167e-3, 0.02, note),
        Answer(c, "Q6.hbm", "HBM -> MXU load (s)", hbm, 19e-3, 0.02, note),
        Answer(c, "Q6.flops", "bf16 FLOPs (s)", flops, 1.3e-3, 0.1),
        Answer(c, "Q6.total", "pipelined total lies in the book's 150-200 ms",
               150e-3 <= max(pcie, ici, hbm, flops) <= 200e-3, True),
    ]


# ---------------------------------------------------------------------------------------------
# sharding.md: the two pop quizzes and "Some Problems to Work"
# ---------------------------------------------------------------------------------------------

@exercise
def sharding_pop_quizzes():
    c = "sharding"
    per_dev = 128 // (2 * 8) * 2048
    ag = collective_time("all-gather", 2 * 2048 * 8192, V5E)
    ag_line = collective_time("all-gather", 2 * 2048 * 8192, V5E, n=4, wraparound=False)
    small = latency_bound_time("all-gather", 2 * 256 * 256, V5E, 4, wraparound=False)
    return [
        Answer(c, "PopQuiz1.device", "int8[128,2048] as A[I_XY, J] on {X:2,Y:8,Z:2}: bytes "
               "per device", per_dev, 16384),
        Answer(c, "PopQuiz1.total", "bytes over all 32 devices", per_dev * 32, 512 * 1024),
        Answer(c, "PopQuiz2.ring", "AllGather_Y bf16[2048_Y, 8192], Y=4, v5e, V/W_bidi (s)", ag,
               377e-6, 0.02, "book rounds 33.5 MB to 34 MB"),
        Answer(c, "PopQuiz2.line", "same without wraparound (v5e axis of 4): 3 hops one way (s)",
               ag_line, 560e-6, 0.01),
        Answer(c, "PopQuiz2.small", "E=F=256: latency-bound, 3 hops of 1 us (s)", small, 3e-6),
    ]


@exercise
def sharding_q1():
    return [Answer("sharding", "Q1", "A[I_X, J, ...] on {X:4,Y:8,Z:2}: total bytes / one copy",
                   4 * 8 * 2 / 4, 16)]


@exercise
def sharding_q2():
    c, B, D = "sharding", 1024, 4096
    shard_bytes = 2 * B * D / 16  # [B_X, D_Y] on X=4, Y=4
    return [
        Answer(c, "Q2.a", "AllGather_X([B_X, D_Y]) on v4p 4x4x4 (s)",
               collective_time("all-gather", 2 * B * D / 4, V4P), 23e-6, 0.02),
        Answer(c, "Q2.b", "AllGather_XY([B_X, D_Y]) (s)",
               collective_time("all-gather", 2 * B * D, V4P, n_axes=2), 46e-6, 0.02),
        Answer(c, "Q2.c", "AllReduce_Z([B_X, D_Y]{U_Z}) (s)",
               collective_time("all-reduce", shard_bytes, V4P), 190e-6, 0.02,
               "book disagrees: its 4BD/W = 186 us reduces the whole [B, D] array, but each "
               "Z-ring holds only one [B/4, D/4] block (X and Y stay sharded), so the volume is "
               "16x smaller: 11.6 us"),
    ]


@exercise
def sharding_q3():
    t = latency_bound_time("all-gather", 2 * 128, V4P, 4)
    return [Answer("sharding", "Q3", "AllGather_X([B_X]), B=128 bf16, v4p 4x4x4: latency-bound "
                   "(s)", t, 2e-6)]


@exercise
def sharding_q4():
    alpha = ridge(V5P.peak(), V5P.link_bidi)
    return [
        Answer("sharding", "Q4.D", "strategy 2 (local matmul + AllReduce) beats gathering the "
               "weights when D > 2 C/W", 2 * alpha, 5100, 0.001),
        Answer("sharding", "Q4.X", "strategy 2 is compute-bound for X < D/(2 C/W), D=8192",
               8192 / (2 * alpha), 2, 0.25, "book rounds 1.6 to 'roughly 2'"),
    ]


@exercise
def sharding_q5():
    B, D, F = 512, 8192, 32768
    t = 2 * B * D * F / (64 * V5P.peak())
    return [Answer("sharding", "Q5", "lowest-latency A[B,D].W[D,F] on v5p 4x4x4 (B=512, D=8192, "
                   "F=32768): A[B_X, D] and W[D, F_YZ] pre-replicated, no comms; FLOPs time (s)",
                   t, None, note=NO_ANSWER + "any layout needing no collective is optimal; "
                   f"{matmul_collective(('X', None), (None, 'YZ'))} communication")]


@exercise
def sharding_q6():
    c, I, J, K = "sharding", 8192, 8192, 8192  # sizes assumed; the question gives none
    flops = 2 * I * J * K / 16 / V5E.peak()
    a = collective_time("all-reduce", 2 * I * K / 4, V5E, n=4, wraparound=False)
    b = collective_time("all-gather", 2 * J * K / 4, V5E, n=4, wraparound=False)
    assume = NO_ANSWER + "I=J=K=8192 bf16 assumed, v5e 4x4 has no wraparound; "
    return [
        Answer(c, "Q6.a", "A[I_X,J_Y].B[J_Y,K]: AllReduce_Y of C[I_X,K]; comms / FLOPs time",
               a / flops, None, note=assume + matmul_collective(("X", "Y"), ("Y", None))),
        Answer(c, "Q6.b", "A[I_X,J].B[J_X,K_Y]: AllGather_X of B[J,K_Y]; comms / FLOPs time",
               b / flops, None, note=assume + matmul_collective(("X", None), ("X", "Y"))),
        Answer(c, "Q6.c", "A[I_X,J].B[J,K_Y]: no communication",
               matmul_collective(("X", None), (None, "Y")), None, note=NO_ANSWER),
    ]


@exercise
def sharding_q7():
    B, D, F = 128, 8192, 32768
    w_per_chip = 2 * (2 * D * F) / 4  # both weights split 4 ways
    flops = 2 * 2 * B * D * F / 4 / V5E.peak()
    comms = collective_time("all-reduce", 2 * B * D, V5E, n=4, n_axes=2)
    return [Answer("sharding", "Q7", "v5e 2x2, 300 MB/chip: shard B[D, F_XY], C[F_XY, D]; "
                   "weights per chip (bytes), then FLOPs vs AllReduce time",
                   w_per_chip < 300e6 and flops > comms, None,
                   note=NO_ANSWER + f"268 MB of weights per chip; FLOPs {flops * 1e6:.0f} us, "
                   f"AllReduce of the [B, D] output {comms * 1e6:.0f} us: compute-bound")]


@exercise
def sharding_q9():
    N, M, K = 1024, 8192, 2048
    ag = collective_time("all-gather", N * M, V5P)
    rs = collective_time("reduce-scatter", N * K, V5P)
    return [Answer("sharding", "Q9.3", "comms of gather-A-then-matmul / matmul-then-"
                   "reduce-scatter = M / K (N=1024, M=8192, K=2048)", ag / rs, M / K)]


@exercise
def sharding_q10():
    c, N, D = "sharding", 64, 64
    ag1 = ring_link_load("all-gather", N, D, False)
    a1 = ring_link_load("all-to-all", N, D, False)
    ag2 = ring_link_load("all-gather", N, D, True)
    a2 = ring_link_load("all-to-all", N, D, True)
    lim = "the book's ratio is the D >> 1 limit; a ring of 64 gives "
    return [
        Answer(c, "Q10.1", "all-gather, one-way ring: scalars on one link / N^2(1-1/D)",
               ag1 / (N * N * (1 - 1 / D)), 1),
        Answer(c, "Q10.2", "all-to-all, one-way: scalars on one link / (N^2/2)(1-1/D)",
               a1 / (N * N / 2 * (1 - 1 / D)), 1),
        Answer(c, "Q10.3", "all-gather / all-to-all, one-way", ag1 / a1, 2),
        Answer(c, "Q10.4", "all-gather: one-way / bidirectional", ag1 / ag2, 2),
        Answer(c, "Q10.5", "all-to-all: one-way / bidirectional", a1 / a2, 4, 0.02,
               lim + f"{a1 / a2:.4f}"),
        Answer(c, "Q10.6", "all-gather / all-to-all, bidirectional", ag2 / a2, 4, 0.02,
               lim + f"{ag2 / a2:.4f}"),
    ]


# ---------------------------------------------------------------------------------------------
# transformers.md, "A Few Problems to Work"
# ---------------------------------------------------------------------------------------------

@exercise
def transformers_q1():
    m = Transformer(L=64, D=4096, F=4 * 4096, N=32, K=32, H=128, V=32000)
    per_layer_attn = m.attn_params() / (m.attn_params() + m.ffw_params())
    return [
        Answer("transformers", "Q1.params", "parameters of D=4096, F=4D, V=32000, L=64",
               m.params() + m.L * m.D, 16e9, 0.1,
               "ours 17.4e9: the book rounds 4096 to 4e3 and 16384 to 16e3 before multiplying"),
        Answer("transformers", "Q1.attn", "fraction of layer parameters in attention",
               per_layer_attn, 0.25),
        Answer("transformers", "Q1.kv", "int8 KV cache per token (bytes)",
               m.kv_bytes_per_token(1), 512 * 1024),
    ]


@exercise
def transformers_q2():
    B, D, F, X, Y, Z = 1024, 4096, 16384, 4, 8, 4
    total, per = 2 * B * D * F * Z, 2 * B * D * F / (X * Y)
    return [
        Answer("transformers", "Q2.total", "A[B_X,D_Y].W[D_Y,F] on {X:4,Y:8,Z:4}: total FLOPs "
               "(replicated over Z)", total, 2 * B * D * F * Z),
        Answer("transformers", "Q2.device", "FLOPs per device", per, 2 * B * D * F / (X * Y)),
    ]


@exercise
def transformers_q3():
    dims = dict(I=2, J=3, K=4, L=5, M=6, N=7, O=8)
    return [Answer("transformers", "Q3", "FLOPs of A[I,J,K,L] * B[I,J,M,N,O] -> C[K,L,M,N,O]",
                   2 * math.prod(dims.values()), 2 * 2 * 3 * 4 * 5 * 6 * 7 * 8)]


@exercise
def transformers_q4():
    def att_intensity(T, S, G):  # FLOPs 4BTSNH over bytes 4BHK(TG + S), N = K G
        return T * S * G / (T * G + S)
    v5e_ridge = ridge(V5E.peak(), V5E.hbm_bw)
    T_big_G = next(t for t in range(1, 10 ** 5) if att_intensity(t, t, 10 ** 6) > v5e_ridge)
    T_mha = next(t for t in range(1, 10 ** 5) if att_intensity(t, t, 1) > v5e_ridge)
    return [
        Answer("transformers", "Q4.prefill", "prefill: context length at which attention is "
               "compute-bound on v5e (G >> 1)", T_big_G, 240, 0.02,
               f"book's 240 is the G >> 1 limit (intensity ~ T); plain multi-head attention "
               f"(G = 1) has intensity T/2 and needs T > {T_mha}"),
        Answer("transformers", "Q4.decode", "decode (T=1, S=8192, G=8): intensity -> G",
               att_intensity(1, 8192, 8), 8, 0.001),
    ]


@exercise
def transformers_q5():
    D = 4096  # attention 12 B T^2 N H (fwd+bwd) = QKVO 24 B T D N H  <=>  T = 2D
    T = next(t for t in range(1, 10 ** 5) if 12 * t * t >= 24 * t * D)
    return [Answer("transformers", "Q5", "sequence length where attention FLOPs = QKVO "
                   "projection FLOPs (D=4096)", T, 8192)]


@exercise
def transformers_q6():
    B, T, N, H = 1, 4096, 32, 128
    return [Answer("transformers", "Q6", "extra FLOPs per layer to rematerialise when only the 7 "
                   "matmul outputs are saved (B=1, T=4096, N=32, H=128): the two attention "
                   "einsums, 4 B T^2 N H", 4 * B * T * T * N * H, None,
                   note=NO_ANSWER + "the saved matmul outputs give back everything but "
                   "QK^T and softmax(QK^T)V (and elementwise ops, negligible)")]


@exercise
def transformers_q7():
    peak_h = 2.79e6 * 3600 * H800.peak("fp8")
    used = 6 * 37e9 * 14.8e12
    return [Answer("transformers", "Q7", "DeepSeek v3 FLOPs utilisation on H800 fp8",
                   used / peak_h, 0.217, 0.01)]


# ---------------------------------------------------------------------------------------------
# training.md, "Worked Problems" (LLaMA-2 13B)
# ---------------------------------------------------------------------------------------------

LLAMA2_13B = Transformer(L=40, D=5120, F=int(2.7 * 5120), N=40, K=40, H=128, V=32000)


@exercise
def training_q1():
    m, c = LLAMA2_13B, "training"
    return [
        Answer(c, "Q1.ffw", "LLaMA-2 13B FFW params", m.ffw_params(), 8.5e9, 0.01),
        Answer(c, "Q1.attn", "attention params", m.attn_params(), 4.2e9, 0.01),
        Answer(c, "Q1.vocab", "vocabulary params", m.vocab_params(), 0.3e9, 0.1,
               "book rounds 0.33e9 to 0.3e9 here (and writes 0.39e9 in its sum)"),
        Answer(c, "Q1.total", "total params", m.params(), 13.1e9, 0.01),
    ]


@exercise
def training_q2():
    m = LLAMA2_13B
    mem = train_memory(m.params(), 16e6, m.D + 2 * m.F, m.L)
    return [
        Answer("training", "Q2.state", "bf16 params + two f32 Adam moments (bytes)",
               mem["params"] + mem["optimizer"], 130e9, 0.01),
        Answer("training", "Q2.acts", "activations, 3 checkpoints per layer, BS=16M (bytes)",
               mem["activations"], 42e12, 0.01),
    ]


@exercise
def training_q3():
    m, c = LLAMA2_13B, "training"
    chips = 16 ** 3
    tokens = 3e6
    mem = train_memory(m.params(), tokens, m.D + 2 * m.F, m.L)
    per_chip = tokens / chips
    return [
        Answer(c, "Q3.seqs", "sequences per batch (3M = 3 x 2^20 tokens / 32k)",
               3 * 2 ** 20 / 32768, 96),
        Answer(c, "Q3.hbm", "HBM of a v5p 16x16x16 (bytes)", chips * V5P.hbm_bytes, 393e12,
               0.001),
        Answer(c, "Q3.dp", "pure data parallelism fits (params+optimizer <= 96 GB)",
               mem["params"] + mem["optimizer"] <= V5P.hbm_bytes, False),
        Answer(c, "Q3.fsdp_mem", "FSDP: total memory (bytes)", mem["total"], 8e12, 0.02),
        Answer(c, "Q3.fsdp_min", "FSDP over 3 axes: smallest compute-bound global batch",
               dp_min_batch_per_chip(V5P, 3) * chips, 3.48e6, 0.01),
        Answer(c, "Q3.fsdp_ok", "pure FSDP is compute-bound at 3M tokens",
               per_chip > dp_min_batch_per_chip(V5P, 3), False),
        Answer(c, "Q3.mixed", "FSDP + model parallelism: smallest tokens per chip, "
               "2 alpha^2 / F", mixed_min_batch_per_chip(V5P, m.F), 940, 0.01),
    ]


@exercise
def training_q4():
    m, chips = LLAMA2_13B, 16 ** 3
    fsdp, mixed = dp_min_batch_per_chip(V5P, 3), mixed_min_batch_per_chip(V5P, m.F)
    rows = []
    for tokens in (1e6, 10e6):
        pc = tokens / chips
        mem = train_memory(m.params(), tokens, m.D + 2 * m.F, m.L)["total"]
        verdict = ("compute-bound with FSDP" if pc > fsdp else
                   "compute-bound with FSDP + TP" if pc > mixed else "communication-bound")
        rows.append(Answer("training", f"Q4.{int(tokens / 1e6)}M", f"BS={tokens:.0e}: tokens per "
                           f"chip {pc:.0f}, memory {mem / 1e12:.1f} TB of 393 TB", verdict, None,
                           note=NO_ANSWER + f"thresholds {fsdp:.0f} (FSDP) and {mixed:.0f} "
                           "(mixed) tokens per chip"))
    return rows


# ---------------------------------------------------------------------------------------------
# applied-training.md (LLaMA 3-70B on TPU v5p)
# ---------------------------------------------------------------------------------------------

LLAMA3_70B = Transformer(L=80, D=8192, F=28672, N=64, K=8, H=128, V=128256)
LLAMA3_405B = Transformer(L=126, D=16384, F=53248, N=128, K=8, H=128, V=128256)
LLAMA3_8B = Transformer(L=32, D=4096, F=14336, N=32, K=8, H=128, V=128256)


@exercise
def applied_training_counts():
    m, c = LLAMA3_70B, "applied-training"
    flops_tok = 6 * m.params()
    total = flops_tok * 15e12
    pod = chips_in(V5P.pod)
    t_pod = training_time(total, pod, V5P, 0.4)
    return [
        Answer(c, "params.ffw", "LLaMA 3-70B FFW params", m.ffw_params(), 56.3e9, 0.005),
        Answer(c, "params.vocab", "vocabulary params", m.vocab_params(), 2.1e9, 0.01),
        Answer(c, "params.attn", "attention params", m.attn_params(), 12e9, 0.01),
        Answer(c, "params.total", "total params", m.params(), 70.4e9, 0.005),
        Answer(c, "flops.token", "training FLOPs per token", flops_tok, 4.2e11, 0.01),
        Answer(c, "flops.token_s", "one token's step on one v5p at peak (s)",
               flops_tok / V5P.peak(), 1e-3, 0.1, "book rounds 0.92 ms to 1 ms"),
        Answer(c, "flops.total", "FLOPs for 15T tokens", total, 6.3e24, 0.01),
        Answer(c, "flops.years", "years on one v5p", total / V5P.peak() / YEAR, 435, 0.01),
        Answer(c, "pod.days", "days on a full v5p pod at 40% MFU", t_pod / DAY, 44, 0.02),
    ]


@exercise
def applied_training_memory():
    m, c = LLAMA3_70B, "applied-training"
    mem = train_memory(m.params(), 4e6, 4 * m.D, m.L)
    chips = mem["total"] / V5P.hbm_bytes
    pod = chips_in(V5P.pod)
    days = training_time(6 * m.params() * 15e12, math.ceil(chips), V5P, 0.4) / DAY
    return [
        Answer(c, "mem.ckpt", "4 checkpoints per layer, 4M tokens (bytes)", mem["activations"],
               20.9e12, 0.01, ""),
        Answer(c, "mem.total", "params + optimizer + checkpoints (bytes)", mem["total"],
               21.6e12, 0.01),
        Answer(c, "mem.chips", "fewest v5p chips that hold it", chips, 225, 0.01),
        Answer(c, "mem.days", "days to train on that many chips at 40% MFU", days, 1752, 0.015,
               "the book writes '44 days * 8960 / 171' but 1752 = 44 * 8960 / 225; ours uses "
               "226 whole chips and 70.55e9 parameters"),
        Answer(c, "mem.per_chip", "bytes per chip on 8960 chips", mem["total"] / pod, 2.4e9,
               0.02),
    ]


@exercise
def applied_training_sharding():
    m, c = LLAMA3_70B, "applied-training"
    tokens, pod = 4 * 2 ** 20, chips_in(V5P.pod)
    return [
        Answer(c, "shard.seqs", "4M tokens of 4k-long sequences: most data-parallel ways",
               tokens // 4096, 1024),
        Answer(c, "shard.fsdp_pc", "8960-way FSDP: tokens per chip", tokens / pod, 468, 0.002),
        Answer(c, "shard.fsdp_ok", "compute-bound (needs > alpha / 3 = 850)",
               tokens / pod > dp_min_batch_per_chip(V5P, 3), False),
        Answer(c, "shard.mixed_min", "mixed FSDP + TP: smallest tokens per chip",
               mixed_min_batch_per_chip(V5P, m.F), 453, 0.003),
        Answer(c, "shard.X_opt", "optimal FSDP ways sqrt(2 B N / F)",
               fsdp_optimal_ways(tokens, pod, m.F), 1618, 0.001),
    ]


@exercise
def applied_training_q1():
    m = LLAMA3_70B
    chips, tokens = 4 * chips_in(V5P.pod), 4 * 2 ** 20
    pc = tokens / chips
    days = training_time(6 * m.params() * 15e12, chips, V5P, 0.4) / DAY
    dcn = dcn_min_batch_per_pod(chips_in(V5P.pod), V5P)
    return [Answer("applied-training", "Q1", "4 pods, same 4M batch: tokens per chip "
                   f"{pc:.0f} < {mixed_min_batch_per_chip(V5P, m.F):.0f}; days at 40% MFU if "
                   "it were compute-bound", days, None,
                   note=NO_ANSWER + f"FSDP+TP inside each pod is ICI-bound at {pc:.0f} tokens "
                   f"per chip; DP across pods over DCN needs > {dcn:.0f} tokens per pod (has "
                   f"{tokens / 4:.0f}), so the ICI roofline sets the time")]


@exercise
def applied_training_q2():
    m, c = LLAMA3_405B, "applied-training"
    total = 6 * m.params() * 15e12
    chips = 8 * chips_in(V5P.pod)
    return [
        Answer(c, "Q2.params", "LLaMA 3-405B params (config: L=126, D=16384, F=53248, N=128, "
               "K=8, H=128, V=128256)", m.params(), 405e9, 0.01,
               "the book's 'answer' is the model's name"),
        Answer(c, "Q2.flops_token", "training FLOPs per token", 6 * m.params(), None,
               note=NO_ANSWER),
        Answer(c, "Q2.flops", "FLOPs for 15T tokens", total, None, note=NO_ANSWER),
        Answer(c, "Q2.days", "days on 8 v5p pods at 40% MFU", training_time(total, chips, V5P,
                                                                           0.4) / DAY, None,
               note=NO_ANSWER + "compute-bound needs > "
               f"{mixed_min_batch_per_chip(V5P, m.F):.0f} tokens per chip with FSDP + TP"),
    ]


# ---------------------------------------------------------------------------------------------
# inference.md: the pop quiz and "Worked Problems"
# ---------------------------------------------------------------------------------------------

@exercise
def inference_pop_quiz():
    kv = 100e3 * 8192
    small = decode_step_time(4, kv, 30e9, 30e9, 16, V5E)
    big = decode_step_time(256, kv, 30e9, 30e9, 16, V5E)
    return [
        Answer("inference", "PopQuiz.4", "30B int8, v5e 4x4, batch 4 decode step (s)", small,
               2.5e-3, 0.04),
        Answer("inference", "PopQuiz.256", "batch 256 (s)", big, 21e-3, 0.01),
    ]


INFER_MODEL = Transformer(L=64, D=4096, F=16384, N=32, K=8, H=256, V=32128, tied=True)


@exercise
def inference_q1():
    m = INFER_MODEL
    return [
        Answer("inference", "Q1.params", "parameters (tied embeddings)", m.params(), 18.4e9,
               0.002),
        Answer("inference", "Q1.kv", "bf16 KV cache per token (bytes)", m.kv_bytes_per_token(2),
               None, note=NO_ANSWER + "2 L K H = 262,144 values"),
    ]


@exercise
def inference_q2_q3():
    m, c = INFER_MODEL, "inference"
    kv_seq = m.kv_bytes_per_token(1) * 8192
    b8 = max_batch(16, V5E, m.params(), kv_seq)
    m1 = dataclasses.replace(m, K=1)
    b1 = max_batch(16, V5E, m1.params(), m1.kv_bytes_per_token(1) * 8192)
    return [
        Answer(c, "Q2.K8", "largest int8 batch on v5e 4x4 at 8k context", b8, None,
               note=NO_ANSWER + "8192-token context assumed"),
        Answer(c, "Q2.K1", "same with one KV head", b1, None, note=NO_ANSWER),
        Answer(c, "Q3", "HBM-bound time to stream the int8 weights once on 16 v5e (s)",
               m.params() / (16 * V5E.hbm_bw), None, note=NO_ANSWER),
    ]


@exercise
def inference_q4():
    m = INFER_MODEL
    y = tp_max_ways(V5E, m.F, 2)
    t = decode_step_time(32, m.kv_bytes_per_token(1) * 8192, m.params(), m.params(), 16, V5E)
    return [Answer("inference", "Q4", "v5e 4x4: largest compute-bound tensor parallelism over "
                   f"2 axes is {y:.0f}-way (F=16384); KV heads (K=8) shard 8 ways, batch the "
                   "rest; int8 decode step at batch 32, 8k context (s)", t, None,
                   note=NO_ANSWER)]


@exercise
def inference_q5():
    m = dataclasses.replace(INFER_MODEL, E=16, k=2)
    c = "inference"
    return [
        Answer(c, "Q5.params", "MoE E=16 k=2: parameters", m.params(), None, note=NO_ANSWER),
        Answer(c, "Q5.batch", "bf16 batch to be FLOPs-bound (each expert sees B k / E tokens)",
               matmul_critical_batch(V5E.peak(), V5E.hbm_bw) * m.E / m.k, None, note=NO_ANSWER),
        Answer(c, "Q5.kv", "KV bytes per token (bf16): unchanged by experts",
               m.kv_bytes_per_token(2), INFER_MODEL.kv_bytes_per_token(2)),
        Answer(c, "Q5.flops", "forward FLOPs per token (T tokens: times T)",
               m.forward_flops(1), None, note=NO_ANSWER),
    ]


@exercise
def inference_q6():
    m = dataclasses.replace(INFER_MODEL, E=16, k=2)
    nbytes = 2 * m.params()
    per = nbytes / 128
    return [
        Answer("inference", "Q6.load", "bf16 MoE on v5e 8x16 (Y=8, Z=16): weight load (s)",
               per / V5E.hbm_bw, None, note=NO_ANSWER + "bf16 weights assumed"),
        Answer("inference", "Q6.free", "free HBM per chip (bytes)", V5E.hbm_bytes - per, None,
               note=NO_ANSWER),
        Answer("inference", "Q6.min", "smallest slice that holds it (chips)",
               min_chips(nbytes, V5E), None, note=NO_ANSWER),
    ]


@exercise
def inference_q7():
    def comms_1d(N):
        return 4 / 3  # 1D model parallel over 3 axes: 4 B D / (3 W), in units of B D / W

    def comms_2d(N, f_over_d):
        x = math.sqrt(N / (2 * f_over_d))  # minimises 2 D / X + 4 F X / N
        return 2 / x + 4 * f_over_d * x / N

    lo, hi = 1.0, 1000.0  # bisect for the chip count where the two are equal
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if comms_2d(mid, 4) > comms_1d(mid) else (lo, mid)
    n = lo
    return [
        Answer("inference", "Q7.opt", "2D weight-stationary comms at the best X, F=4D, "
               "in units of B D / (sqrt(N) W)", comms_2d(64, 4) * math.sqrt(64),
               math.sqrt(128), 1e-9),
        Answer("inference", "Q7.N", "chips above which 2D weight-stationary sends less",
               n, 81, 0.01, "book disagrees with itself: 128 (3/4)^2 is 72, not 81; its "
               "general rule 32 (F/D)(3/4)^2 also gives 72 for F = 4D, and so does the "
               "minimisation here"),
    ]


# ---------------------------------------------------------------------------------------------
# applied-inference.md (LLaMA 3-70B on TPU v5e)
# ---------------------------------------------------------------------------------------------

@exercise
def applied_inference_kv():
    m, c = LLAMA3_70B, "applied-inference"
    kv = m.kv_bytes_per_token(1)
    seq32k = kv * 32768
    return [
        Answer(c, "kv.token", "int8 KV per token (bytes)", kv, 160e3, 0.03,
               "the book writes 160kB for 163,840 bytes (160 KiB)"),
        Answer(c, "kv.32k", "one 32k sequence (bytes)", seq32k, 5.3e9, 0.02),
        Answer(c, "kv.bs240", "240 such sequences (bytes)", 240 * seq32k, 1.3e12, 0.01),
        Answer(c, "kv.chips", "v5e chips to hold them plus the weights",
               (70e9 + 240 * seq32k) / V5E.hbm_bytes, 86, 0.02,
               "book rounds the 1.29e12 bytes of KV up to 1.3e12"),
    ]


@exercise
def applied_inference_bs32():
    m, c = LLAMA3_70B, "applied-inference"
    kv_total = m.kv_bytes_per_token(1) * 8192 * 32
    total = kv_total + m.params()
    t8 = decode_step_time(32, m.kv_bytes_per_token(1) * 8192, m.params(), m.params(), 8, V5E)
    t16 = decode_step_time(32, m.kv_bytes_per_token(1) * 8192, m.params(), m.params(), 16, V5E)
    note = "the book uses 160e3 B/token (ours 163,840) and 70e9 params (ours 70.55e9)"
    return [
        Answer(c, "bs32.kv", "KV bytes at BS32, 8k, int8", kv_total, 41.9e9, 0.03, note),
        Answer(c, "bs32.total", "params + KV (bytes)", total, 112e9, 0.02, note),
        Answer(c, "bs32.chips", "smallest slice (chips)", min_chips(total, V5E), 8),
        Answer(c, "bs32.step4x2", "decode step on 4x2 (s)", t8, 17e-3, 0.04, note),
        Answer(c, "bs32.tput", "tokens/s/chip on 4x2", 32 / t8 / 8, 235, 0.04, note),
        Answer(c, "bs32.ici", "TP ways before ICI-bound, 2 axes (v5p's 2550)",
               tp_max_ways(V5P, m.F, 2), 22, 0.03),
        Answer(c, "bs32.step4x4", "decode step on 4x4 (s)", t16, 8.5e-3, 0.04, note),
    ]


@exercise
def applied_inference_critical():
    c, C, W = "applied-inference", V5E.peak(), V5E.hbm_bw
    n = "book rounds the ridge 243 to 240"
    return [
        Answer(c, "crit.bf16", "bf16 weights, bf16 FLOPs", matmul_critical_batch(C, W), 240,
               0.02, n),
        Answer(c, "crit.int8w", "int8 weights, bf16 FLOPs", matmul_critical_batch(C, W, 1), 120,
               0.02, n),
        Answer(c, "crit.int8", "int8 weights, int8 FLOPs",
               matmul_critical_batch(V5E.peak("int8"), W, 1), 240, 0.02, n),
    ]


def _fits(dtype_bytes: float, chips: int) -> tuple[float, int, float, int]:
    m = LLAMA3_70B
    p = 70e9 * dtype_bytes
    kv_seq = m.kv_bytes_per_token(dtype_bytes) * 8192
    free = chips * V5E.hbm_bytes - p
    return p, min_chips(p, V5E), free, max_batch(chips, V5E, p, kv_seq)


@exercise
def applied_inference_smallest():
    c, rows = "applied-inference", []
    book = {"bf16": (140e9, 16, 116e9, 43), "int8": (70e9, 8, 68e9, 52),
            "int4": (45e9, 4, 19e9, 67)}
    for name, nb in (("bf16", 2), ("int8", 1), ("int4", 0.5)):
        p, chips, free, batch = _fits(nb, min_chips(70e9 * nb, V5E))
        bp, bchips, bfree, bbatch = book[name]
        wrong_int4 = "70e9 int4 params are 35e9 bytes, not 45e9; " if name == "int4" else ""
        free_note = ("book's remaining HBM is off: 8 x 16 GB - 70 GB = 58 GB, not 68"
                     if name == "int8" else wrong_int4 + "16 x 4 - 35 = 29 GB")
        rows += [
            Answer(c, f"min.{name}.params", f"{name}: parameter bytes", p, bp, 0.001,
                   wrong_int4.rstrip("; ")),
            Answer(c, f"min.{name}.chips", f"{name}: smallest slice (chips)", chips, bchips),
            Answer(c, f"min.{name}.free", f"{name}: HBM left for KV (bytes)", free, bfree, 0.01,
                   "" if name == "bf16" else free_note),
            Answer(c, f"min.{name}.batch", f"{name}: 8k KV caches that fit", batch, bbatch, 0.03,
                   "" if name == "bf16" else "follows from the remaining HBM above: every "
                   "dtype fits 43 caches, since KV bytes shrink with the weights"),
        ]
    return rows


@exercise
def applied_inference_latency():
    c = "applied-inference"
    step = V5E.hbm_bytes / V5E.hbm_bw
    rows = [
        Answer(c, "lat.step", "full HBM read per step (s)", step, 19e-3, 0.04,
               "book divides by 8.2e11 here (8.1e11 elsewhere)"),
        Answer(c, "lat.decode", "512 decode steps (s)", 512 * step, 9, 0.12,
               "book's 'about 9 s' for 512 x 19 ms = 9.7 s"),
        Answer(c, "lat.int4", "int4 weights only on 2x2 (s)", 35e9 / (4 * V5E.hbm_bw), 10e-3,
               0.1),
    ]
    book_qps = {"bf16": 0.27, "int8": 0.66, "int4": 1.72}
    book_dbl = {"bf16": 0.51, "int8": 1.03, "int4": 2.06}
    for name, nb in (("bf16", 2), ("int8", 1), ("int4", 0.5)):
        chips = min_chips(70e9 * nb, V5E)
        for key, n, book in (("qps", chips, book_qps), ("qps2x", 2 * chips, book_dbl)):
            batch = _fits(nb, n)[3]
            qps = batch / (step * 512 * n)
            rows.append(Answer(
                c, f"{key}.{name}", f"{name} on {n} chips: queries/s/chip (batch {batch})", qps,
                book[name], 0.03, "" if (name, key) == ("bf16", "qps") else
                "the book carries its batch sizes from the table above (52, 67, 161...), which "
                "come from its HBM slips; with the corrected batch ours is lower"))
    return rows


@exercise
def applied_inference_sharding():
    m, c = LLAMA3_70B, "applied-inference"
    B = 64
    t_ici = 2 * B * m.D / V5E.link_bidi
    t_hbm = 2 * m.D * m.F / (32 * V5E.hbm_bw)
    t_math = 2 * B * m.D * m.F / (32 * V5E.peak())
    return [
        Answer(c, "shard.Y", "bf16 4x8: TP ways before ICI-bound (2 axes)",
               tp_max_ways(V5P, m.F, 2), 22, 0.03),
        Answer(c, "shard.Ysmall", "memory-bound rule Y = F / (8 B), B=64", m.F / (8 * B), 56,
               0.01),
        Answer(c, "shard.ici", "T_ici per matmul (s)", t_ici, 11e-6, 0.06),
        Answer(c, "shard.hbm", "T_hbm per matmul (s)", t_hbm, 18e-6, 0.01),
        Answer(c, "shard.math", "T_math per matmul (s)", t_math, 4e-6, 0.2,
               "book truncates 4.8 us to 4 us"),
    ]


@exercise
def applied_inference_prefill():
    c = "applied-inference"
    t_pre = prefill_time(70e9, 8192, 16, V5E, 0.4)
    return [
        Answer(c, "prefill", "8k prefill on 16 v5e at 40% MFU (s)", t_pre, 0.91, 0.01),
        Answer(c, "evict.seqs", "sequences finishing per step (BS32, 4096 decode)", 32 / 4096,
               32 / 4096),
        Answer(c, "evict.tokens", "KV tokens evicted per step, B (P + G) / G",
               32 * (8192 + 4096) / 4096, 96),
        Answer(c, "disagg", "prefill : generate servers", t_pre * 32 / (0.019 * 512), 3, 0.01),
    ]


@exercise
def applied_inference_worked():
    c = "applied-inference"
    big, small = LLAMA3_405B, LLAMA3_8B
    kv8 = small.kv_bytes_per_token(1) * 8192
    total8 = small.params() + 240 * kv8
    # 405B int8 within 15 ms/step on 64 v5e: the KV budget left after streaming the weights
    n, limit = 64, 15e-3
    kv405 = big.kv_bytes_per_token(1) * 8192
    batch = int((limit * n * V5E.hbm_bw - big.params()) // kv405)
    return [
        Answer(c, "Q1.flops", "LLaMA 3-405B forward FLOPs per token", 2 * big.params(), None,
               note=NO_ANSWER + "FLOPs-bound: this / (N 1.97e14) s; memory-bound: bytes of "
               "the weights / (N 8.1e11) s"),
        Answer(c, "Q2.params", "LLaMA 3-8B int8 parameter bytes", small.params(), None,
               note=NO_ANSWER),
        Answer(c, "Q2.kv", "BS240 int8 KV caches at 8k context (bytes)", 240 * kv8, None,
               note=NO_ANSWER + "8k context assumed"),
        Answer(c, "Q2.topo", "smallest v5e slice (chips)", min_chips(total8, V5E), None,
               note=NO_ANSWER + "activations (~B F bytes per layer) are negligible"),
        Answer(c, "Q3", "405B int8, 15 ms/step on 64 v5e: largest 8k batch", batch, None,
               note=NO_ANSWER + "min step (weights only) "
               f"{big.params() / (n * V5E.hbm_bw) * 1e3:.1f} ms; "
               f"{batch / limit / n:.0f} tokens/s/chip"),
    ]


# ---------------------------------------------------------------------------------------------
# profiling.md Q2 needs the book's TPU Colab
# ---------------------------------------------------------------------------------------------

@exercise
def profiling_q2():
    return [Answer("profiling", "Q2", "mock Transformer on a TPU Colab: times per layer",
                   "needs the book's TPU", None,
                   note=NO_ANSWER + "the reference times (184 -> 67 ms/layer) are TPU profiles; "
                   "not reproducible on CPU devices")]
