"""compare: run the same programs through minijax and real JAX, check they agree, time both.

`python -m compare [topic ...] [--json PATH] [--quick]` runs topics (all by default) and writes
`compare/out/report.md`. Each topic is a module `compare/<topic>.py` with a `run(quick=False)`
function returning a `TopicResult` (see `compare/_report.py`), listed in `TOPICS`.

Eight CPU devices are requested here, before JAX is first imported, so sharding topics have a mesh.
"""

import os

if "jax" not in __import__("sys").modules:
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = (flags + " --xla_force_host_platform_device_count=8").strip()

# Topics in report order, each with the modules it declares it runs: "both" (its programs run
# under minijax and JAX, `compare/_modules.py: MODULES`) or "jax" (JAX only). That is what the
# report says of a topic skipped on this machine, and of a check that does not say which
# modules it ran (`compare/_report.py: Check.runs`; the topics of the JAX 201 pages mark their
# JAX-only parts so).
TOPICS = {
    "core": "both",
    "mnist_mlp": "both",
    "numpy_cnn": "both",
    "cnn_bn": "both",
    "gpt": "both",
    "moe": "both",
    "gpt_sharded": "both",
    "addition": "both",
    "numpy": "both",
    "jit": "both",
    "dispatch": "both",
    "control_flow": "both",
    "placement": "both",
    "sharding": "both",
    "multi_process": "both",
    "shard_map": "both",
    "callbacks": "both",
    "debugging": "both",
    "offloading": "both",
    "compute_on": "both",
    "pallas": "both",
    "ragged": "both",
    "profiling": "both",
    "precision_xla": "both",
    "scaling_book": "both",
    "scaling_laws": "both",
}
