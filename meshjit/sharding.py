"""`meshjit.sharding`: the `jax.sharding` module as documented for jit/pjit users.

Includes the classes jax 0.10.2 removed (PositionalSharding, PmapSharding,
GSPMDSharding); see meshjit.frontend.sharding for what differs from JAX.
"""

from jax.sharding import AxisType

from meshjit.errors import ShardingError
from meshjit.frontend.mesh import Mesh, current_mesh, set_mesh, use_mesh
from meshjit.frontend.sharding import (
    AUTO,
    UNCONSTRAINED,
    Chunked,
    GSPMDSharding,
    NamedSharding,
    NoSharding,
    P,
    PartitionSpec,
    PmapSharding,
    PositionalSharding,
    Replicated,
    ShardedAxis,
    Sharding,
    ShardingSpec,
    SingleDeviceSharding,
    Unstacked,
    from_jax,
    to_jax,
)
from meshjit.frontend.visualize import (
    render_sharding,
    visualize_array_sharding,
    visualize_sharding,
)

__all__ = [
    "AUTO",
    "UNCONSTRAINED",
    "AxisType",
    "Chunked",
    "GSPMDSharding",
    "Mesh",
    "NamedSharding",
    "NoSharding",
    "P",
    "PartitionSpec",
    "PmapSharding",
    "PositionalSharding",
    "Replicated",
    "ShardedAxis",
    "Sharding",
    "ShardingError",
    "ShardingSpec",
    "SingleDeviceSharding",
    "Unstacked",
    "current_mesh",
    "from_jax",
    "render_sharding",
    "set_mesh",
    "to_jax",
    "use_mesh",
    "visualize_array_sharding",
    "visualize_sharding",
]
