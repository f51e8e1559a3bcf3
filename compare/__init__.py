"""compare: run the same programs through minijax and real JAX, check they agree, time both.

`python -m compare [topic ...] [--json PATH] [--quick]` runs topics (all by default) and writes
`compare/out/report.md`. Each topic is a module `compare/<topic>.py` with a `run(quick=False)`
function returning a `TopicResult` (see `compare/_report.py`).

Eight CPU devices are requested here, before JAX is first imported, so sharding topics have a mesh.
"""

import os

if "jax" not in __import__("sys").modules:
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = (flags + " --xla_force_host_platform_device_count=8").strip()

# Topics in report order: the models and the core first, then the topics of the JAX 201 pages
# (each check says which modules it ran: `compare/_report.py: Check.runs`).
TOPICS = [
    "core",
    "mnist_mlp",
    "numpy_cnn",
    "cnn_bn",
    "gpt",
    "moe",
    "gpt_sharded",
    "addition",
    "numpy",
    "jit",
    "dispatch",
    "control_flow",
    "placement",
    "sharding",
    "multi_process",
    "shard_map",
    "callbacks",
    "debugging",
    "offloading",
    "compute_on",
    "pallas",
    "ragged",
    "profiling",
    "precision_xla",
    "scaling_book",
    "scaling_laws",
]
