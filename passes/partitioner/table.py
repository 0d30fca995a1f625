"""The handler table: which handler runs each op. Like the rule table it is
alphabetical, one entry per op; an op not listed goes to the default, which
runs elementwise ops locally and anything else replicated, with a remark."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from meshjit.passes.partitioner import (
    contraction,
    control_flow,
    elementwise,
    gather_scatter,
    movement,
    reductions,
    rng,
    sorting,
    windows,
)
from meshjit.passes.partitioner.context import Handler

HANDLERS: Mapping[str, Handler] = MappingProxyType(
    {
        "chlo.scan": windows.chlo_scan,
        "chlo.top_k": reductions.top_k,
        "func.call": control_flow.call,
        "sdy.constant": elementwise.constant,
        "sdy.data_flow_edge": elementwise.identity,
        "sdy.func_data_flow_edge": elementwise.identity,
        "sdy.manual_computation": control_flow.manual_computation,
        "sdy.propagation_barrier": elementwise.identity,
        "sdy.reshard": elementwise.identity,
        "sdy.all_reduce": elementwise.all_reduce,
        "sdy.sharding_constraint": elementwise.identity,
        "sdy.sharding_group": elementwise.sharding_group,
        "stablehlo.all_gather": elementwise.user_collective,
        "stablehlo.all_reduce": elementwise.user_collective,
        "stablehlo.all_to_all": elementwise.user_collective,
        "stablehlo.case": control_flow.case,
        "stablehlo.collective_broadcast": elementwise.user_collective,
        "stablehlo.collective_permute": elementwise.user_collective,
        "stablehlo.concatenate": movement.concatenate,
        "stablehlo.constant": elementwise.constant,
        "stablehlo.custom_call": elementwise.custom_call,
        "stablehlo.convolution": contraction.convolution,
        "stablehlo.dot": contraction.dot_general,
        "stablehlo.dot_general": contraction.dot_general,
        "stablehlo.dynamic_slice": movement.dynamic_slice,
        "stablehlo.dynamic_update_slice": movement.dynamic_update_slice,
        "stablehlo.gather": gather_scatter.gather,
        "stablehlo.iota": elementwise.iota,
        "stablehlo.optimization_barrier": control_flow.optimization_barrier,
        "stablehlo.pad": windows.pad,
        "stablehlo.reduce": reductions.reduce,
        "stablehlo.reduce_scatter": elementwise.user_collective,
        "stablehlo.reduce_window": windows.reduce_window,
        "stablehlo.reverse": movement.reverse,
        "stablehlo.rng_bit_generator": rng.rng_bit_generator,
        "stablehlo.scatter": gather_scatter.scatter,
        "stablehlo.select_and_scatter": windows.select_and_scatter,
        "stablehlo.slice": movement.slice_,
        "stablehlo.sort": sorting.sort,
        "stablehlo.while": control_flow.while_,
    }
)
DEFAULT: Handler = elementwise.by_rule
