"""Constants split per use in the output, as Shardy's constant splitter leaves
them in its propagation pipeline.

Propagation gives each use of a constant with several uses its own slot
(`build._Builder.use`), so that uses wanting different shardings do not
conflict. `split_constants` writes that in the module: a copy of the
constant op per use, placed where the constant was (in use order), each
with its use's sharding; the original goes. Only constant ops themselves
(`stablehlo.constant`, `sdy.constant`) are copied, and only in functions
that are not private callees (a callee's uses have a slot per call site).
"""

from __future__ import annotations

from collections.abc import Sequence

from meshjit.compiler.graph import CONSTANT_OPS, invalidate_graphs, op_handles
from meshjit.compiler.ir import ir
from meshjit.passes.propagation.build import SHARDING, Built, sh_text
from meshjit.passes.propagation.core import Sh


def split_constants(
    module: ir.Module, built: Built, state: Sequence[Sh | None]
) -> bool:
    """Copies each constant per use; returns whether the module changed."""
    g = built.graph
    todo = []
    for vid, uses in built.use_copies.items():
        owner = g.value(vid).owner
        if owner < 0 or g.node(owner).op not in CONSTANT_OPS or len(uses) < 2:
            continue
        if len(uses) != len(g.users(vid)):  # one entry per operand use
            continue  # some use was not read as its own copy
        todo.append((owner, uses))
    if not todo:
        return False
    handles = op_handles(module)
    p = built.problem
    with module.context:
        for owner, uses in todo:
            original = handles[owner]
            for user, index, slot in uses:
                copy = original.clone(ip=ir.InsertionPoint(original))
                sh = state[slot]
                if SHARDING in copy.attributes:
                    del copy.attributes[SHARDING]
                if sh is not None and sh.has_axes():
                    sizes = p.meshes.get(sh.mesh, {})
                    copy.attributes[SHARDING] = ir.Attribute.parse(
                        f"#sdy.sharding_per_value<[{sh_text(sh, sizes)}]>"
                    )
                handles[user].operands[index] = copy.result
            original.erase()
    invalidate_graphs(module)
    return True
