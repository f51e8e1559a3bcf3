"""What Pallas knows of TPU chips (jax.experimental.pallas.tpu's `ChipVersion`, `TpuInfo`,
`get_tpu_info`, `Tiling`...): per generation, the sizes a kernel author tiles for (lanes,
sublanes, MXU width), the memories' capacities and the peak rates. Figures are per TensorCore,
as in JAX. See chapters/16-pallas.md, "Pallas on a TPU"."""

from __future__ import annotations

import dataclasses
import enum

from minijax import xla_bridge


# JAX: jax/_src/pallas/mosaic/tpu_info.py ChipVersion
class ChipVersion(enum.Enum):
    """A TPU generation, by the name in its device kind ("TPU v5 lite" is TPU_V5E)."""

    TPU_V2 = "v2"
    TPU_V3 = "v3"
    TPU_V4I = "v4i"
    TPU_V4 = "v4"
    TPU_V5E = "v5e"
    TPU_V5P = "v5p"
    TPU_V6E = "v6e"
    TPU_7 = "7"
    TPU_7X = "7x"
    TPU_8I = "8i"

    def __str__(self) -> str:
        return self.value

    @property
    def num_physical_tensor_cores_per_chip(self) -> int:
        return 1 if self.is_lite else 2

    @property
    def supports_megacore(self) -> bool:
        """Two TensorCores usable as one device (v4, v5p)."""
        return self in (ChipVersion.TPU_V4, ChipVersion.TPU_V5P)

    @property
    def is_lite(self) -> bool:
        return self in (ChipVersion.TPU_V4I, ChipVersion.TPU_V5E, ChipVersion.TPU_V6E)


_KINDS = {"TPU v2": "v2", "TPU v3": "v3", "TPU v4": "v4", "TPU v4 lite": "v4i",
          "TPU v5e": "v5e", "TPU v5 lite": "v5e", "TPU v5": "v5p", "TPU v5p": "v5p",
          "TPU v6e": "v6e", "TPU v6 lite": "v6e", "TPU7": "7", "TPU7x": "7x", "TPU8i": "8i"}


# JAX: jax/_src/pallas/mosaic/tpu_info.py SparseCoreInfo
@dataclasses.dataclass(frozen=True, kw_only=True)
class SparseCoreInfo:
    """A chip's SparseCores: how many, their vector subcores, lanes and memory."""

    num_cores: int
    num_subcores: int
    num_lanes: int
    vmem_capacity_bytes: int
    dma_granule_size_bytes: int


# JAX: jax/_src/pallas/mosaic/tpu_info.py TpuInfo
@dataclasses.dataclass(frozen=True, kw_only=True)
class TpuInfo:
    """One TensorCore's hardware: vector shape (`num_sublanes` x `num_lanes`), MXUs
    (`num_mxus` of `mxu_column_size` columns), memory capacities (bytes) and peak rates
    (bytes/s, ops/s). Multiply by `num_cores` for a whole logical device."""

    chip_version: ChipVersion
    generation: int
    num_cores: int
    num_lanes: int
    num_sublanes: int
    mxu_column_size: int
    num_mxus: int
    num_accumulators: int
    vmem_capacity_bytes: int
    cmem_capacity_bytes: int
    smem_capacity_bytes: int
    hbm_capacity_bytes: int
    mem_bw_bytes_per_second: int
    bf16_ops_per_second: int
    int8_ops_per_second: int
    fp8_ops_per_second: int
    int4_ops_per_second: int
    sparse_core: SparseCoreInfo | None = None

    @property
    def is_lite(self) -> bool:
        return self.chip_version.is_lite

    @property
    def is_split_chip(self) -> bool:
        """A two-core chip used one core per device."""
        return self.num_cores == 1 and self.chip_version.num_physical_tensor_cores_per_chip > 1

    @property
    def is_megacore(self) -> bool:
        return self.num_cores > 1


_K, _M, _G, _T = 2 ** 10, 2 ** 20, 10 ** 9, 10 ** 12
# per chip: generation, MXU columns, MXUs, accumulators, VMEM, CMEM, SMEM, HBM, HBM bytes/s,
# bf16 / int8 / fp8 / int4 ops/s, SparseCore (cores, subcores, lanes, VMEM, DMA granule);
# the figures of JAX 0.10.2's table (public specifications of each generation)
_CHIPS = {
    "v2": (2, 128, 1, 0, 16 * _M, 0, 16 * _K, 8 * _G, 358 * _G, 23 * _T, 0, 0, 0, None),
    "v3": (3, 128, 2, 0, 16 * _M, 0, 16 * _K, 17.2 * _G, 412.5 * _G, 70 * _T, 0, 0, 0, None),
    "v4i": (4, 128, 4, 0, 16 * _M, 134 * 10 ** 6, _M, 8.59 * _G, 614 * _G, 137 * _T, 0, 0, 0,
            None),
    "v4": (4, 128, 4, 0, 16 * _M, 67 * 10 ** 6, _M, 17.2 * _G, 615 * _G, 137.5 * _T, 0, 0, 0,
           None),
    "v5e": (5, 128, 4, 0, 128 * _M, 0, _M, 17.2 * _G, 820 * _G, 197 * _T, 394 * _T, 0,
            788 * _T, None),
    "v5p": (5, 128, 4, 0, 64 * _M, 0, _M, 51.5 * _G, 1230 * _G, 229.5 * _T, 459 * _T, 0,
            920 * _T, (4, 16, 8, 512 * _K, 32)),
    "v6e": (6, 256, 2, 0, 128 * _M, 0, _M, 34.4 * _G, 1640 * _G, 920 * _T, 1840 * _T,
            920 * _T, 3680 * _T, (2, 16, 8, 256 * _K, 32)),
    "7": (7, 256, 2, 128, 64 * _M, 0, _M, 103 * _G, 3700 * _G, 1155 * _T, 0, 2300 * _T, 0,
          (2, 16, 16, 512 * _K, 32)),
    "8i": (8, 256, 2, 256, 192 * _M, 0, _M, 154.5 * _G, 4300 * _G, 550.5 * _T, 0, 4404 * _T, 0,
           (1, 4, 16, 512 * _K, 64)),
}
_CHIPS["7x"] = _CHIPS["7"]


# JAX: jax/_src/pallas/mosaic/tpu_info.py get_tpu_info_for_chip
def get_tpu_info_for_chip(chip_version: ChipVersion, num_tensor_cores_per_logical_device: int
                          ) -> TpuInfo:
    """The `TpuInfo` of `chip_version` used with that many TensorCores per device: 1, or 2
    for a Megacore (v4, v5p); ValueError for 2 on any other chip."""
    n = num_tensor_cores_per_logical_device
    if not chip_version.supports_megacore and n != 1:
        raise ValueError("Lite chips and dual-core chips that do not support Megacore must "
                         f"have num_tensor_cores_per_logical_device=1, but got {n}.")
    gen, cols, mxus, accs, *mem, sc = _CHIPS[chip_version.value]
    names = ("vmem_capacity_bytes", "cmem_capacity_bytes", "smem_capacity_bytes",
             "hbm_capacity_bytes", "mem_bw_bytes_per_second", "bf16_ops_per_second",
             "int8_ops_per_second", "fp8_ops_per_second", "int4_ops_per_second")
    return TpuInfo(chip_version=chip_version, generation=gen, num_cores=n, num_lanes=128,
                   num_sublanes=8, mxu_column_size=cols, num_mxus=mxus, num_accumulators=accs,
                   **{k: int(round(v)) for k, v in zip(names, mem)},
                   sparse_core=None if sc is None else SparseCoreInfo(
                       num_cores=sc[0], num_subcores=sc[1], num_lanes=sc[2],
                       vmem_capacity_bytes=sc[3], dma_granule_size_bytes=sc[4]))


def _device():
    return xla_bridge.get_backend().local_devices()[0]


# JAX: jax/_src/pallas/mosaic/tpu_info.py is_tpu_device
def is_tpu_device() -> bool:
    """Whether the default device is a TPU chip Pallas knows (False on a CPU)."""
    return _device().device_kind in _KINDS


# JAX: jax/_src/pallas/mosaic/tpu_info.py get_tpu_info
def get_tpu_info() -> TpuInfo:
    """The `TpuInfo` of the default device; ValueError ("Unsupported TPU device kind: cpu")
    where it is no TPU."""
    kind = _device().device_kind
    if kind not in _KINDS:
        raise ValueError(f"Unsupported TPU device kind: {kind}")
    return get_tpu_info_for_chip(ChipVersion(_KINDS[kind]),
                                 getattr(_device(), "num_cores", 1) or 1)


# JAX: jax/_src/pallas/mosaic/tpu_info.py Tiling
class Tiling(enum.Enum):
    """A memory tiling: COMPACT, a TensorCore's (8, 128) vreg tile; SPARSE_CORE, (8,)."""

    COMPACT = enum.auto()
    SPARSE_CORE = enum.auto()

    @property
    def shape(self) -> tuple[int, ...]:
        return (8, 128) if self is Tiling.COMPACT else (8,)
