"""The TPU the candidate is compiled for: the host's own chips, or (without one) a deviceless
topology that libtpu compiles for without hardware.

Deviceless compilation needs libtpu installed and these variables set before jax is imported:
JAX_PLATFORMS=cpu (so no TPU runtime starts), TPU_SKIP_MDS_QUERY=1 (no GCE metadata server),
TPU_ACCELERATOR_TYPE / TPU_WORKER_HOSTNAMES (what libtpu would otherwise read from it).
`deviceless_environment` gives them; the worker applies them before its first jax import.
"""
from __future__ import annotations

import dataclasses

# Named targets -> (topology name for get_topology_desc, accelerator type libtpu expects, peaks).
# Peaks are the public per-chip figures (bf16 MXU FLOP/s, HBM bytes/s), used only for the
# roofline fraction in the profile summary on a TPU host.
TARGETS = {
    "v5e": ("v5e:2x2", "v5litepod-4", 197e12, 819e9),
    "v6e": ("v6e:2x2", "v6e-4", 918e12, 1640e9),
}
DEFAULT_TARGET = "v5e"


def host_has_tpu() -> bool:
    """TPU VMs expose their chips as /dev/accel* (v4, v5e, v6e) or /dev/vfio/<n> (v5p and later)."""
    import glob
    return bool(glob.glob("/dev/accel*") or glob.glob("/dev/vfio/[0-9]*"))


def deviceless_environment(target: str) -> dict[str, str]:
    _, accelerator, _, _ = TARGETS[target]
    # ALLOW_MULTIPLE_LIBTPU_LOAD: workers that share a /tmp (no sandbox) would otherwise trip over
    # libtpu's single-process lockfile; without a TPU there is nothing for them to contend for.
    return {"JAX_PLATFORMS": "cpu", "TPU_SKIP_MDS_QUERY": "1", "TPU_ACCELERATOR_TYPE": accelerator,
            "TPU_WORKER_HOSTNAMES": "localhost", "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}


@dataclasses.dataclass
class Target:
    name: str             # "v5e", "v6e"
    on_tpu: bool          # the host's own TPU chips run the kernels (timing is real)
    device: object        # the jax Device compiled for
    device_kind: str      # as libtpu names it, e.g. "TPU v5 lite"
    peak_flops: float
    peak_bytes_per_s: float


def open_target(name: str) -> Target:
    import jax
    _, _, peak_flops, peak_bw = TARGETS[name]
    tpus = [d for d in jax.devices() if d.platform == "tpu"] if _tpu_runtime_allowed() else []
    if tpus:
        return Target(name, True, tpus[0], tpus[0].device_kind, peak_flops, peak_bw)
    from jax.experimental import topologies
    topology_name, _, _, _ = TARGETS[name]
    topology = topologies.get_topology_desc(topology_name, "tpu")
    device = topology.devices[0]
    return Target(name, False, device, device.device_kind, peak_flops, peak_bw)


def _tpu_runtime_allowed() -> bool:
    import os
    platforms = os.environ.get("JAX_PLATFORMS", "")
    return platforms == "" or "tpu" in platforms.split(",")


def abstract_args(target: Target, specs) -> list:
    """ShapeDtypeStructs placed on the target device: what a deviceless compile lowers against."""
    import jax
    sharding = jax.sharding.SingleDeviceSharding(target.device)
    return [jax.ShapeDtypeStruct(tuple(s.shape), s.dtype, sharding=sharding) for s in specs]


@dataclasses.dataclass
class Compiled:
    executable: object
    cost: dict                 # XLA's cost analysis (flops, bytes accessed, optimal_seconds, ...)
    memory: dict               # argument/output/temp bytes from memory_analysis
    seconds: float


def compile_for(target: Target, fn, specs) -> Compiled:
    """Lowers and compiles `fn` for the target (raises what lowering or Mosaic raise)."""
    import time
    import jax
    start = time.perf_counter()
    # The target's device as the default one: Mosaic asks the default device for the chip's facts
    # (tpu_info.get_tpu_info) while lowering some operations (an integer `//`'s sign, 1-D blocks),
    # and without a TPU that was the CPU ("Unsupported TPU device kind: cpu": honest kernels
    # refused, red team round 12).
    with jax.default_device(target.device):
        compiled = jax.jit(fn).lower(*abstract_args(target, specs)).compile()
    seconds = time.perf_counter() - start
    cost = compiled.cost_analysis() or {}
    if isinstance(cost, list):  # older jax: one dict per computation
        cost = cost[0] if cost else {}
    memory = {}
    stats = compiled.memory_analysis()
    if stats is not None:
        for field in ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes",
                      "generated_code_size_in_bytes", "alias_size_in_bytes"):
            memory[field] = float(getattr(stats, field, 0) or 0)
    return Compiled(compiled, {k: float(v) for k, v in cost.items() if isinstance(v, (int, float))},
                    memory, seconds)
