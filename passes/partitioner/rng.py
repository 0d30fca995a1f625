"""`rng_bit_generator` with its bits split: generated whole, then each
device's block cut out, as XLA's SPMD partitioner does.

That is not the waste it looks like: XLA expands the generator into
elementwise counter arithmetic and fuses the cut into it, so each device
computes only its block's elements (XLA's cost analysis counts the same
per-device FLOPs as for a block-sized generator). The alternative, each
device generating its block alone from the state with its counter advanced
to the block (XLA fills the output row-major from the state's 64-bit
counter: 64 bits per ThreeFry step, 128 per Philox step, 32 per element),
gives the same bits but measured slower: on one CPU device a (2, 128, 3072)
block took 5.5 ms generated alone against 3.2 ms cut from the (16, 128,
3072) output, on an H100 0.085 ms against 0.075 ms, and a data-parallel
dropout step (`bench` row dropout_rbg) ran 1.5x jax.jit's step with it. So
the block is cut, and no remark is made: nothing is gathered but the
state where it is split (16 bytes).
"""

from __future__ import annotations

from meshjit.compiler.graph import Node
from meshjit.passes.partitioner.context import PartitionCtx
from meshjit.passes.partitioner.local import run_replicated


def rng_bit_generator(node: Node, ctx: PartitionCtx) -> None:
    """The op on the replicated state and the whole output shape; the new
    state stays replicated and the bits are cut to their layout."""
    run_replicated(ctx, node, "generated whole by choice", remark=False)
