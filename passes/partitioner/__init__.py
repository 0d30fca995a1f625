"""meshjit's SPMD partitioner: a sharded module becomes the program every
device runs.

Input: a module whose values carry Shardy shardings (`sdy.sharding` on function
arguments and results, `#sdy.sharding_per_value` on ops, as propagation leaves
them; a value without one is replicated). Output: the same public function with
global types, whose body is one `sdy.manual_computation` over every mesh axis;
inside it every op runs on local shapes and data moves by explicit StableHLO
collectives (replica groups over mesh positions, `use_global_device_ids`).

Layout, after XLA's `xla/service/spmd/` (one visitor, a handler per op family):
- `module`: reads the mesh and layouts, walks the entry function, wraps the body;
- `context`: the walk's state and shared services (names, coordinates,
  resharding, partial sums); `builder`: the one writer of MLIR text;
- `table`: op -> handler; handlers: `elementwise` (and shape ops, the
  default), `contraction` (dot_general, convolution), `windows`
  (reduce_window, pad, halos), `movement` (slice, concatenate, ...),
  `gather_scatter`, `control_flow` (calls, while, case, shard_map);
- `factors` (choosing factor shardings), `local` (the shared
  choose-reshard-emit flow and the replicated fallback), `cost` (the cost
  model), `layouts` (layout arithmetic), `report` (collectives, remarks).
"""

from meshjit.passes.partitioner.module import partition_module_text, partition_support
from meshjit.passes.partitioner.report import (
    Collective,
    Decision,
    PartitionFailure,
    PartitionReport,
    Remark,
)

__all__ = [
    "Collective",
    "Decision",
    "PartitionFailure",
    "PartitionReport",
    "Remark",
    "partition_module_text",
    "partition_support",
]
