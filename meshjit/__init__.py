"""meshjit: jax.jit's sharding API on meshjit's own propagation and SPMD partitioner."""

# First: compiled builds of the hot modules are found only if this runs before
# any of them is imported (see meshjit/native.py).
from meshjit import native as _native

_native.install()

# ruff: noqa: E402
# Next: a jax outside the supported range fails here, with the range named.
from meshjit.compiler import bridge as _bridge  # noqa: F401
from meshjit.compiler.persistent_cache import set_cache_dir
from meshjit.compiler.persistent_cache import stats as cache_stats
from meshjit.errors import (
    DeletedArgumentError,
    InternalError,
    JitArgumentError,
    MeshjitError,
    MissingMeshError,
    PipelineError,
    ProcessMismatchError,
    ShardingError,
)
from meshjit.frontend.cache import explain_cache_misses
from meshjit.frontend.explain import Explanation, explain, report
from meshjit.frontend.interop import device_put
from meshjit.frontend.jit import JitFunction, jit, pjit, with_sharding_constraint
from meshjit.frontend.shard_map import shard_map
from meshjit.sharding import (
    GSPMDSharding,
    Mesh,
    NamedSharding,
    P,
    PartitionSpec,
    PmapSharding,
    PositionalSharding,
    Sharding,
    SingleDeviceSharding,
    visualize_array_sharding,
    visualize_sharding,
)

__all__ = [
    "DeletedArgumentError",
    "Explanation",
    "GSPMDSharding",
    "InternalError",
    "JitArgumentError",
    "JitFunction",
    "Mesh",
    "MeshjitError",
    "MissingMeshError",
    "NamedSharding",
    "P",
    "PartitionSpec",
    "PipelineError",
    "PmapSharding",
    "PositionalSharding",
    "ProcessMismatchError",
    "Sharding",
    "ShardingError",
    "SingleDeviceSharding",
    "cache_stats",
    "device_put",
    "explain",
    "explain_cache_misses",
    "jit",
    "pjit",
    "report",
    "set_cache_dir",
    "shard_map",
    "visualize_array_sharding",
    "visualize_sharding",
    "with_sharding_constraint",
]
