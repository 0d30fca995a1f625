"""The partitioner's cost model: estimated seconds for collectives and for
per-device compute, so that choices weigh communication against work.

A collective costs a fixed latency plus the bytes one device sends over the
link bandwidth (ring algorithms: `dialects/reshard.step_bytes` gives those
bytes). Compute costs the larger of its FLOPs over the device's rate and the
bytes it touches over memory bandwidth. Constants are per platform; the
defaults describe this project's CI machine (8 virtual CPU devices on 2
cores), `meshjit-opt --calibrate` (see `calibrate.py`) measures them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CostModel:
    """Seconds per collective and per unit of work on one device."""

    latency: float = 20e-6  # per collective launch
    bandwidth: float = 4e9  # bytes per second one device sends
    flops: float = 8e9  # per device
    memory_bandwidth: float = 8e9  # bytes per second one device touches

    def collective_seconds(self, kind: str, nbytes: int, group: int) -> float:
        if group <= 1 and kind != "collective-permute":
            return 0.0
        return self.latency + nbytes / self.bandwidth

    def compute_seconds(self, flops: float, nbytes: float) -> float:
        return max(flops / self.flops, nbytes / self.memory_bandwidth)


DEFAULT = CostModel()
