import sys, time, statistics, cProfile, pstats, io, os
sys.path.insert(0, ".")
from tools import accelerator_compare as A
entries, batches, _ = A.BUILDERS["mlp"](False, 3, A._modules())
state = {}
for n, (J, call, st) in entries.items():
    st2, loss = call(st, *batches[0]); J.block_until_ready(loss); state[n] = st2
args = {n: (state[n], *entries[n][0].device_put(batches[0])) for n in entries}
def blocked(n, k):
    J, call, _ = entries[n]; a = args[n]
    t0 = time.perf_counter()
    for _ in range(k):
        J.block_until_ready(call(*a)[1])
    return (time.perf_counter() - t0) / k * 1e6
def unblocked(n, k):
    J, call, _ = entries[n]; a = args[n]; outs = []
    t0 = time.perf_counter()
    for _ in range(k):
        outs.append(call(*a)[1])
    t1 = time.perf_counter()
    J.block_until_ready(outs[-1])
    return (t1 - t0) / k * 1e6, (time.perf_counter() - t0) / k * 1e6
for n in entries: blocked(n, 50)
for rnd in range(3):
    for n in entries:
        print(rnd, n, "blocked us/call %.1f" % blocked(n, 300), "dispatch-only us/call %.1f (with final wait %.1f)" % unblocked(n, 300), flush=True)
J, call, _ = entries["minijax"]
print("minijax jit type", type(call), "fastpath attr", [k for k in dir(call) if "fast" in k.lower()])
for n in entries:
    pr = cProfile.Profile(); pr.enable(); blocked(n, 300); pr.disable()
    s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(18); print(n, s.getvalue()[:3500])
