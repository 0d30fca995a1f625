"""Rules on hand-built OpInfos; expected texts are what Shardy (jaxlib 0.10.2)
prints for the same op, except where docs/op_coverage.md lists a difference."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from meshjit.dialects.rules import (
    FactorKind,
    OpInfo,
    RuleTable,
    ShardingRule,
    factor_name,
    make_op_info,
)
from meshjit.dialects.stablehlo_rules import RULES


def op(
    name: str,
    operands: list[tuple[int, ...]],
    results: list[tuple[int, ...]],
    combiner: str | None = None,
    constants: dict[int, int] | None = None,
    **attrs: object,
) -> OpInfo:
    info = make_op_info(name, operands, results, **attrs)
    return OpInfo(
        info.name,
        info.operand_shapes,
        info.result_shapes,
        info.operand_dtypes,
        info.result_dtypes,
        info.attrs,
        MappingProxyType(constants or {}),
        combiner,
    )


def ddn(
    lb: tuple[int, ...], rb: tuple[int, ...], lc: tuple[int, ...], rc: tuple[int, ...]
) -> object:
    return MappingProxyType(
        {
            "lhs_batching_dimensions": lb,
            "rhs_batching_dimensions": rb,
            "lhs_contracting_dimensions": lc,
            "rhs_contracting_dimensions": rc,
        }
    )


def gdn(**kw: object) -> object:
    base: dict[str, object] = {
        "offset_dims": (),
        "collapsed_slice_dims": (),
        "operand_batching_dims": (),
        "start_indices_batching_dims": (),
        "start_index_map": (),
        "index_vector_dim": 0,
    }
    return MappingProxyType({**base, **kw})


def sdn(**kw: object) -> object:
    base: dict[str, object] = {
        "update_window_dims": (),
        "inserted_window_dims": (),
        "input_batching_dims": (),
        "scatter_indices_batching_dims": (),
        "scatter_dims_to_operand_dims": (),
        "index_vector_dim": 0,
    }
    return MappingProxyType({**base, **kw})


NHWC = MappingProxyType(
    {
        "input_batch_dimension": 0,
        "input_feature_dimension": 3,
        "input_spatial_dimensions": (1, 2),
        "kernel_input_feature_dimension": 2,
        "kernel_output_feature_dimension": 3,
        "kernel_spatial_dimensions": (0, 1),
        "output_batch_dimension": 0,
        "output_feature_dimension": 3,
        "output_spatial_dimensions": (1, 2),
    }
)

S: tuple[int, ...] = ()

CASES = [
    (
        op("stablehlo.add", [(8, 6), (8, 6)], [(8, 6)]),
        "([i, j], [i, j])->([i, j]) {i=8, j=6}",
    ),
    (op("stablehlo.add", [S, S], [S]), "([], [])->([])"),
    (
        op("stablehlo.select", [S, (8, 6), (8, 6)], [(8, 6)]),
        "([], [i, j], [i, j])->([i, j]) {i=8, j=6}",
    ),
    (
        op("stablehlo.clamp", [S, (8, 6), S], [(8, 6)]),
        "([], [i, j], [])->([i, j]) {i=8, j=6}",
    ),
    (
        op("stablehlo.transpose", [(8, 6)], [(6, 8)], permutation=(1, 0)),
        "([j, i])->([i, j]) {i=6, j=8}",
    ),
    (
        op(
            "stablehlo.transpose",
            [(2, 4, 16, 8)],
            [(2, 8, 4, 16)],
            permutation=(0, 3, 1, 2),
        ),
        "([i, k, l, j])->([i, j, k, l]) {i=2, j=8, k=4, l=16}",
    ),
    (
        op(
            "stablehlo.dot_general",
            [(4, 16), (16, 32)],
            [(4, 32)],
            dot_dimension_numbers=ddn((), (), (1,), (0,)),
        ),
        "([i, k], [k, j])->([i, j]) {i=4, j=32, k=16} reduction={k}",
    ),
    (
        op(
            "stablehlo.dot_general",
            [(8, 6), (8, 6)],
            [(8,)],
            dot_dimension_numbers=ddn((0,), (0,), (1,), (1,)),
        ),
        "([i, j], [i, j])->([i]) {i=8, j=6} reduction={j}",
    ),
    (
        op("stablehlo.dot", [(8, 6), (6, 8)], [(8, 8)]),
        "([i, k], [k, j])->([i, j]) {i=8, j=8, k=6} reduction={k}",
    ),
    (
        op("stablehlo.broadcast_in_dim", [(32,)], [(1, 32)], broadcast_dimensions=(1,)),
        "([j])->([i, j]) {i=1, j=32}",
    ),
    (
        op(
            "stablehlo.broadcast_in_dim",
            [(1, 32)],
            [(4, 32)],
            broadcast_dimensions=(0, 1),
        ),
        "([i, k])->([j, k]) {i=1, j=4, k=32}",
    ),
    (
        op("stablehlo.broadcast_in_dim", [S], [(4, 32)], broadcast_dimensions=()),
        "([])->([i, j]) {i=4, j=32}",
    ),
    (
        op("stablehlo.reshape", [(16, 16)], [(4, 8, 8)]),
        "([ij, kl])->([i, jk, l]) {i=4, j=4, k=2, l=8}",
    ),
    (
        op("stablehlo.reshape", [(6, 4)], [(4, 6)]),
        "([ij, mn])->([ik, ln]) {i=2, j=3, k=2, l=3, m=2, n=2}",
    ),
    (
        op("stablehlo.reshape", [(6, 4)], [(3, 8)]),
        "([ij, k])->([i, jk]) {i=3, j=2, k=4}",
    ),
    (
        op("stablehlo.reshape", [(2, 4, 8)], [(2, 4, 8, 1)]),
        "([i, j, k])->([i, j, k, l]) {i=2, j=4, k=8, l=1}",
    ),
    (
        op("stablehlo.reduce", [(4, 8), S], [S], "stablehlo.add", dimensions=(0, 1)),
        "([i, j], [])->([]) {i=4, j=8} reduction={i, j}",
    ),
    (
        op("stablehlo.reduce", [(4, 8), S], [(8,)], "stablehlo.add", dimensions=(0,)),
        "([i, j], [])->([j]) {i=4, j=8} reduction={i}",
    ),
    (
        op("stablehlo.concatenate", [(8, 6), (8, 6)], [(8, 12)], dimension=1),
        "([i, j], [i, j])->([i, j]) {i=8, j=12} need_replication={j}",
    ),
    (
        op(
            "stablehlo.slice",
            [(8, 6)],
            [(6, 6)],
            start_indices=(2, 0),
            limit_indices=(8, 6),
            strides=(1, 1),
        ),
        "([i, j])->([i, j]) {i=8, j=6} permutation={i}",
    ),
    (
        op(
            "stablehlo.pad",
            [(8, 6), S],
            [(8, 8)],
            edge_padding_low=(0, 1),
            edge_padding_high=(0, 1),
            interior_padding=(0, 0),
        ),
        "([i, j], [])->([i, j]) {i=8, j=6} permutation={j}",
    ),
    # Differs from Shardy (no permutation there): a shift keeps the size.
    (
        op(
            "stablehlo.pad",
            [(8, 6), S],
            [(8, 6)],
            edge_padding_low=(1, 0),
            edge_padding_high=(-1, 0),
            interior_padding=(0, 0),
        ),
        "([i, j], [])->([i, j]) {i=8, j=6} permutation={i}",
    ),
    (
        op("stablehlo.reverse", [(8, 6)], [(8, 6)], dimensions=(1,)),
        "([i, j])->([i, j]) {i=8, j=6} permutation={j}",
    ),
    (
        op("stablehlo.dynamic_slice", [(8, 6), S, S], [(1, 2)], slice_sizes=(1, 2)),
        "([i, j], [], [])->([i, j]) {i=8, j=6} need_replication={i, j} "
        "blocked_propagation={i, j}",
    ),
    (
        op("stablehlo.dynamic_slice", [(8, 6), S, S], [(8, 6)], slice_sizes=(8, 6)),
        "([i, j], [], [])->([i, j]) {i=8, j=6}",
    ),
    (
        op("stablehlo.dynamic_update_slice", [(8, 6), (2, 6), S, S], [(8, 6)]),
        "([i, k], [j, k], [], [])->([i, k]) {i=8, j=2, k=6} need_replication={j}",
    ),
    (
        op(
            "stablehlo.dynamic_update_slice",
            [(8, 6), (2, 6), S, S],
            [(8, 6)],
            constants={2: 0, 3: 0},
        ),
        "([i, k], [j, k], [], [])->([i, k]) {i=8, j=2, k=6}",
    ),
    (
        op(
            "stablehlo.reduce_window",
            [(8, 6), S],
            [(8, 6)],
            "stablehlo.add",
            window_dimensions=(8, 1),
            padding=(7, 0, 0, 0),
        ),
        "([i, j], [])->([i, j]) {i=8, j=6} permutation={i}",
    ),
    (
        op(
            "stablehlo.reduce_window",
            [(8, 6), S],
            [(4, 6)],
            "stablehlo.add",
            window_dimensions=(1, 1),
            window_strides=(2, 1),
        ),
        "([i, j], [])->([i, j]) {i=4, j=6} permutation={i}",
    ),
    (
        op(
            "stablehlo.select_and_scatter",
            [(2, 16, 16, 8), (2, 8, 8, 8), S],
            [(2, 16, 16, 8)],
            window_dimensions=(1, 2, 2, 1),
            window_strides=(1, 2, 2, 1),
        ),
        "([i, k, m, n], [i, j, l, n], [])->([i, k, m, n]) "
        "{i=2, j=8, k=16, l=8, m=16, n=8} need_replication={j, l} permutation={k, m}",
    ),
    (
        op(
            "stablehlo.gather",
            [(50, 16), (4, 7, 1)],
            [(4, 7, 16)],
            dimension_numbers=gdn(
                offset_dims=(2,),
                collapsed_slice_dims=(0,),
                start_index_map=(0,),
                index_vector_dim=2,
            ),
            slice_sizes=(1, 16),
        ),
        "([l, k], [i, j, m])->([i, j, k]) {i=4, j=7, k=16, l=50, m=1} reduction={l} "
        "need_replication={m}",
    ),
    (
        op(
            "stablehlo.gather",
            [(50, 16), (4, 2)],
            [(4, 5, 4)],
            dimension_numbers=gdn(
                offset_dims=(1, 2), start_index_map=(0, 1), index_vector_dim=1
            ),
            slice_sizes=(5, 4),
        ),
        "([j, k], [i, l])->([i, j, k]) {i=4, j=50, k=16, l=2} "
        "need_replication={j, k, l} blocked_propagation={j, k}",
    ),
    (
        op(
            "stablehlo.gather",
            [(8, 10, 6), (8, 3, 1)],
            [(8, 3, 6)],
            dimension_numbers=gdn(
                offset_dims=(2,),
                collapsed_slice_dims=(1,),
                operand_batching_dims=(0,),
                start_indices_batching_dims=(0,),
                start_index_map=(1,),
                index_vector_dim=2,
            ),
            slice_sizes=(1, 1, 6),
        ),
        "([i, l, k], [i, j, m])->([i, j, k]) {i=8, j=3, k=6, l=10, m=1} reduction={l} "
        "need_replication={m}",
    ),
    (
        op(
            "stablehlo.scatter",
            [(50, 16), (4, 7, 1), (4, 7, 16)],
            [(50, 16)],
            "stablehlo.add",
            scatter_dimension_numbers=sdn(
                update_window_dims=(2,),
                inserted_window_dims=(0,),
                scatter_dims_to_operand_dims=(0,),
                index_vector_dim=2,
            ),
        ),
        "([l, k], [i, j, m], [i, j, k])->([l, k]) {i=4, j=7, k=16, l=50, m=1} "
        "reduction={i, j} need_replication={m}",
    ),
    (
        op(
            "stablehlo.scatter",
            [(50, 16), (4, 7, 1), (4, 7, 16)],
            [(50, 16)],
            None,
            scatter_dimension_numbers=sdn(
                update_window_dims=(2,),
                inserted_window_dims=(0,),
                scatter_dims_to_operand_dims=(0,),
                index_vector_dim=2,
            ),
        ),
        "([l, k], [i, j, m], [i, j, k])->([l, k]) {i=4, j=7, k=16, l=50, m=1} "
        "need_replication={i, j, m}",
    ),
    (
        op(
            "stablehlo.scatter",
            [(50, 16), (4, 2), (4, 5, 4)],
            [(50, 16)],
            "stablehlo.add",
            scatter_dimension_numbers=sdn(
                update_window_dims=(1, 2),
                scatter_dims_to_operand_dims=(0, 1),
                index_vector_dim=1,
            ),
        ),
        "([j, l], [i, n], [i, k, m])->([j, l]) {i=4, j=50, k=5, l=16, m=4, n=2} "
        "reduction={i} need_replication={j, k, l, m, n}",
    ),
    (
        op("stablehlo.sort", [(4, 10)], [(4, 10)], dimension=1),
        "([i, j])->([i, j]) {i=4, j=10} need_replication={j}",
    ),
    (
        op("stablehlo.sort", [(10,), (10,)], [(10,), (10,)], dimension=0),
        "([i], [i])->([i], [i]) {i=10} need_replication={i} blocked_propagation={i}",
    ),
    (
        op("stablehlo.fft", [(4, 10)], [(4, 10)], fft_type="FFT", fft_length=(4, 10)),
        "([i, j])->([i, j]) {i=4, j=10} need_replication={i, j}",
    ),
    (
        op("stablehlo.fft", [(4, 10)], [(4, 6)], fft_type="RFFT", fft_length=(10,)),
        "([i, j])->([i, j]) {i=4, j=10} need_replication={j} blocked_propagation={j}",
    ),
    (
        op("stablehlo.cholesky", [(3, 6, 6)], [(3, 6, 6)], lower=True),
        "([i, j, k])->([i, j, k]) {i=3, j=6, k=6} need_replication={j, k}",
    ),
    # Differs from Shardy: b's columns (k) pass through.
    (
        op(
            "stablehlo.triangular_solve",
            [(3, 4, 4), (3, 4, 5)],
            [(3, 4, 5)],
            left_side=True,
            transpose_a="NO_TRANSPOSE",
        ),
        "([i, j, l], [i, j, k])->([i, l, k]) {i=3, j=4, k=5, l=4} "
        "need_replication={j, l}",
    ),
    (
        op(
            "stablehlo.convolution",
            [(4, 8, 8, 6), (3, 3, 3, 6)],
            [(4, 8, 8, 6)],
            dimension_numbers=NHWC,
            padding=(1, 1, 1, 1),
            feature_group_count=2,
        ),
        "([i, j, k, lm], [o, p, m, ln])->([i, j, k, ln]) "
        "{i=4, j=8, k=8, l=2, m=3, n=3, o=1, p=1} reduction={m} permutation={j, k}",
    ),
    (
        op(
            "stablehlo.convolution",
            [(4, 8, 8, 6), (3, 3, 6, 4)],
            [(2, 8, 8, 4)],
            dimension_numbers=NHWC,
            padding=(1, 1, 1, 1),
            batch_group_count=2,
        ),
        "([ij, k, l, m], [o, p, m, in])->([j, k, l, in]) "
        "{i=2, j=2, k=8, l=8, m=6, n=2, o=1, p=1} reduction={m} permutation={k, l}",
    ),
    (
        op("stablehlo.bitcast_convert", [(8, 6)], [(8, 6, 2)]),
        "([i, j])->([i, j, k]) {i=8, j=6, k=2} need_replication={k}",
    ),
    (
        op("stablehlo.all_gather", [(8, 4)], [(8, 4)], all_gather_dim=0),
        "([j, i])->([k, i]) {i=4, j=8, k=8} need_replication={j, k}",
    ),
    (
        op(
            "stablehlo.all_to_all",
            [(8, 4)],
            [(8, 4)],
            split_dimension=0,
            concat_dimension=1,
        ),
        "([i, k])->([j, l]) {i=8, j=8, k=4, l=4} need_replication={i, j, k, l}",
    ),
    (
        op("stablehlo.rng_bit_generator", [(2,)], [(2,), (4, 5)]),
        "([i])->([i], [j, k]) {i=2, j=4, k=5} need_replication={i} "
        "blocked_propagation={i}",
    ),
    (
        # Differs from Shardy (matrix dims pass through there); see
        # test_shardys_eigh_rule_is_a_false_positive in test_rule_validator.py.
        op(
            "stablehlo.custom_call",
            [(2, 4, 4)],
            [(2, 4, 4), (2, 4)],
            call_target_name="Eigh",
        ),
        "([i, j, k])->([i, j, k], [i, k]) {i=2, j=4, k=4} need_replication={j, k}",
    ),
    (
        op("stablehlo.custom_call", [(6, 4)], [(6, 4), (4,)], call_target_name="Qr"),
        "([i, j])->([i, j], [k]) {i=6, j=4, k=4} need_replication={i, j, k}",
    ),
    (
        op("stablehlo.custom_call", [(4, 10)], [(4, 10)], call_target_name="mhlo.erf"),
        "([i, j])->([i, j]) {i=4, j=10}",
    ),
    (
        op(
            "chlo.scan",
            [(8, 4), (4,)],
            [(8, 4), (4,)],
            combiner="stablehlo.add",
            dimension=0,
            is_associative=True,
        ),
        "([i, j], [j])->([i, j], [j]) {i=8, j=4} permutation={i}",
    ),
    (
        op(
            "chlo.scan",
            [(8, 4), (8,)],
            [(8, 4), (8,)],
            combiner="stablehlo.maximum",
            dimension=1,
            is_associative=False,
        ),
        "([i, j], [i])->([i, j], [i]) {i=8, j=4} need_replication={j}",
    ),
    (
        op("chlo.top_k", [(4, 10)], [(4, 3), (4, 3)], k=3),
        "([i, j])->([i, j], [i, j]) {i=4, j=10} need_replication={j} "
        "blocked_propagation={j}",
    ),
]


@pytest.mark.parametrize(("info", "rule"), CASES, ids=[c[0].name for c in CASES])
def test_rule(info: OpInfo, rule: str) -> None:
    assert str(RULES.rule(info)) == rule


@pytest.mark.parametrize(("info", "rule"), CASES, ids=[c[0].name for c in CASES])
def test_parse_round_trips(info: OpInfo, rule: str) -> None:
    parsed = ShardingRule.parse(f"#sdy.op_sharding_rule<{rule}>")
    assert parsed == RULES.rule(info)
    assert str(parsed) == rule


def test_a_scan_body_other_than_one_combiner_has_no_rule() -> None:
    """cumlogsumexp's body (several ops) may mix a slice's elements."""
    info = op("chlo.scan", [(8, 4), (4,)], [(8, 4), (4,)], dimension=0)
    assert RULES.rule(info) is None
    assert not RULES.lookup(info).warning


@pytest.mark.parametrize(
    ("index", "name"), [(0, "i"), (1, "j"), (17, "z"), (18, "z_1"), (30, "z_13")]
)
def test_factor_names_follow_shardy(index: int, name: str) -> None:
    assert factor_name(index) == name


def test_compound_factor_names_past_z_parse_back() -> None:
    text = (
        "([z_1z_2])->([z_1, z_2]) "
        + "{"
        + ", ".join(f"{factor_name(f)}={2 if f >= 18 else 1}" for f in range(20))
        + "}"
    )
    rule = ShardingRule.parse(text)
    assert rule.operands == (((18, 19),),)
    assert str(rule) == text


def test_custom_flag_prints_last() -> None:
    rule = ShardingRule.parse("([i, j])->([k, l], []) {i=4, j=4, k=4, l=4}, custom")
    assert rule.custom
    assert str(rule) == "([i, j])->([k, l], []) {i=4, j=4, k=4, l=4}, custom"


def test_unknown_op_is_replicated_with_a_warning() -> None:
    found = RULES.lookup(op("stablehlo.foo", [(4, 2)], [(2,)]))
    assert (
        str(found.rule) == "([i, j])->([k]) {i=4, j=2, k=2} need_replication={i, j, k}"
    )
    assert found.warning == (
        "no sharding rule for 'stablehlo.foo'; its operands and results stay replicated"
    )
    assert found.warning_key == "stablehlo.foo"


def test_unknown_custom_call_target_is_replicated_with_a_warning() -> None:
    found = RULES.lookup(
        op("stablehlo.custom_call", [(4,)], [(4,)], call_target_name="foo")
    )
    assert found.rule is not None
    assert found.rule.kinds == (FactorKind.NEED_REPLICATION,) * 2
    assert "custom call @foo" in found.warning


@pytest.mark.parametrize(
    "name", ["stablehlo.constant", "stablehlo.iota", "stablehlo.while", "func.call"]
)
def test_ops_without_a_rule_say_why(name: str) -> None:
    found = RULES.lookup(op(name, [], [(4,)]))
    assert found.rule is None
    assert found.known
    assert found.reason


def test_duplicate_registration_is_rejected() -> None:
    table = RuleTable()
    table.pointwise("stablehlo.add")
    with pytest.raises(
        ValueError, match=r"duplicate sharding rule for 'stablehlo\.add'"
    ):
        table.pointwise("stablehlo.add")


def test_rule_rejects_out_of_range_factor() -> None:
    with pytest.raises(ValueError, match="factor 1 out of range"):
        ShardingRule((4,), (((1,),),), ())
