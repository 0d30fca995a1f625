"""The op sharding rule table: every StableHLO (and chlo, sdy, func) op JAX emits.

Entries are alphabetical by op name; ops that share a rule share one call.
Each rule function sees only an `OpInfo`. Where meshjit's rule differs from
Shardy's (its rule-populating pass in jaxlib 0.10.2) the function's
docstring says so and why; docs/op_coverage.md lists the differences.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import gcd, prod

from meshjit.dialects.rules import (
    NULL_DIM,
    FactorKind,
    NoRule,
    OpInfo,
    RuleBuilder,
    RuleTable,
    ShardingRule,
    Unknown,
    pointwise_rule,
)

PASS = FactorKind.PASS_THROUGH
REDUCTION = FactorKind.REDUCTION
NEED_REPLICATION = FactorKind.NEED_REPLICATION
PERMUTATION = FactorKind.PERMUTATION
BLOCKED = FactorKind.BLOCKED

RULES = RuleTable()

# Combiners for which partial results of a sharded reduction factor can be
# combined with an all-reduce (associative and commutative).
REDUCIBLE_COMBINERS = frozenset(
    {
        "stablehlo.add",
        "stablehlo.and",
        "stablehlo.maximum",
        "stablehlo.minimum",
        "stablehlo.multiply",
        "stablehlo.or",
        "stablehlo.xor",
    }
)

_DATA_FLOW = (
    "data-flow op: its operands flow into regions or a callee and out as results; "
    "propagation follows those edges instead of a factor rule"
)
_NO_OPERANDS = (
    "no tensor operands: there is nothing to propagate; the result is sharded directly"
)
_STRUCTURAL = "structural op or terminator: holds or ends a body, no tensor semantics"
_SHARDING_ANNOTATION = "sharding annotation: read by the import pass, not propagated"


def _null(n: int) -> list[int]:
    return [NULL_DIM] * n


def _dims(n: int, **at: int) -> list[int]:
    """`n` NULL_DIMs with some positions set: `_dims(3, i0=2)` -> [2, -1, -1]."""
    out = _null(n)
    for key, dim in at.items():
        out[int(key[1:])] = dim
    return out


def _window_is_trivial(op: OpInfo, dim: int) -> bool:
    """True if a windowed op reads exactly one element per output element along dim."""
    rank = len(op.operand_shapes[0])
    window = op.int_array("window_dimensions", [1] * rank)
    strides = op.int_array("window_strides", [1] * rank)
    base = op.int_array("base_dilations", [1] * rank)
    padding = op.int_array("padding", [0] * (2 * rank))
    return (
        window[dim] == 1
        and strides[dim] == 1
        and base[dim] == 1
        and padding[2 * dim] == 0
        and padding[2 * dim + 1] == 0
    )


def _special_dims_rule(op: OpInfo, special: Sequence[int]) -> ShardingRule:
    """Non-special dims shared by operand and result; each special dim gets one
    factor on the operand and another on the result, both needing replication."""
    operand = op.operand_shapes[0]
    result = op.result_shapes[0]
    b = RuleBuilder.for_op(op)
    b.pointwise(operand, lambda d: None if d in special else PASS)
    for d in sorted(set(special)):
        b.factor([d], [NULL_DIM], operand[d], NEED_REPLICATION)
        b.factor([NULL_DIM], [d], result[d], NEED_REPLICATION)
    return b.build()


# ---------------------------------------------------------------------------
# Elementwise ops: every operand (scalars aside) and result share each dim.

RULES.pointwise(
    "chlo.acos",
    "chlo.acosh",
    "chlo.asin",
    "chlo.asinh",
    "chlo.atan",
    "chlo.atanh",
    "chlo.bessel_i1e",
    "chlo.conj",
    "chlo.cosh",
    "chlo.digamma",
    "chlo.erf",
    "chlo.erf_inv",
    "chlo.erfc",
    "chlo.is_inf",
    "chlo.is_neg_inf",
    "chlo.is_pos_inf",
    "chlo.lgamma",
    "chlo.next_after",
    "chlo.polygamma",
    "chlo.sinh",
    "chlo.square",
    "chlo.tan",
    "chlo.zeta",
    "sdy.sharding_constraint",
    "stablehlo.abs",
    "stablehlo.add",
    "stablehlo.all_reduce",
    "stablehlo.and",
    "stablehlo.atan2",
    "stablehlo.cbrt",
    "stablehlo.ceil",
    "stablehlo.clamp",
    "stablehlo.collective_broadcast",
    "stablehlo.collective_permute",
    "stablehlo.compare",
    "stablehlo.complex",
    "stablehlo.convert",
    "stablehlo.cosine",
    "stablehlo.count_leading_zeros",
    "stablehlo.divide",
    "stablehlo.exponential",
    "stablehlo.exponential_minus_one",
    "stablehlo.floor",
    "stablehlo.imag",
    "stablehlo.is_finite",
    "stablehlo.log",
    "stablehlo.log_plus_one",
    "stablehlo.logistic",
    "stablehlo.maximum",
    "stablehlo.minimum",
    "stablehlo.multiply",
    "stablehlo.negate",
    "stablehlo.not",
    "stablehlo.or",
    "stablehlo.popcnt",
    "stablehlo.power",
    "stablehlo.real",
    "stablehlo.reduce_precision",
    "stablehlo.remainder",
    "stablehlo.round_nearest_afz",
    "stablehlo.round_nearest_even",
    "stablehlo.rsqrt",
    "stablehlo.select",
    "stablehlo.shift_left",
    "stablehlo.shift_right_arithmetic",
    "stablehlo.shift_right_logical",
    "stablehlo.sign",
    "stablehlo.sine",
    "stablehlo.sqrt",
    "stablehlo.subtract",
    "stablehlo.tan",
    "stablehlo.tanh",
    "stablehlo.xor",
)

# ---------------------------------------------------------------------------
# Ops without a factor rule, on purpose.

RULES.no_rule(
    _DATA_FLOW,
    "func.call",
    "sdy.data_flow_edge",
    "sdy.func_data_flow_edge",
    "sdy.manual_computation",
    "sdy.named_computation",
    "stablehlo.case",
    "stablehlo.optimization_barrier",
    "stablehlo.while",
)
RULES.no_rule(
    _NO_OPERANDS,
    "sdy.constant",
    "stablehlo.after_all",
    "stablehlo.constant",
    "stablehlo.create_token",
    "stablehlo.get_dimension_size",
    "stablehlo.iota",
    "stablehlo.partition_id",
    "stablehlo.replica_id",
)
RULES.no_rule(
    _STRUCTURAL,
    "func.func",
    "func.return",
    "sdy.mesh",
    "sdy.return",
    "stablehlo.return",
)
RULES.no_rule(
    _SHARDING_ANNOTATION,
    "sdy.all_reduce",
    "sdy.propagation_barrier",
    "sdy.reshard",
    "sdy.sharding_group",
)


# ---------------------------------------------------------------------------
# Everything else, alphabetical.


@RULES.op("chlo.scan")
def _scan(op: OpInfo) -> ShardingRule | NoRule:
    """jax 0.11's cumulative ops on GPUs: `outputs, carries = scan(inputs,
    inits)` along `dimension`, the body combining an input's slice with the
    carry. For the scan JAX emits (one input, one init, a body of one
    associative elementwise combiner returned as output and carry), the other
    dims pass through all four tensors; the scanned dim is a permutation (a
    block's scan needs the totals of the blocks before it) when the scan is
    marked associative, else it needs replication. Any other body may mix a
    slice's elements: no rule. (Shardy has no chlo rules: XLA legalizes chlo
    first.)"""
    if len(op.operand_shapes) != 2 or len(op.result_shapes) != 2:
        return NoRule("a chlo.scan of several inputs: not partitioned yet")
    if op.combiner not in REDUCIBLE_COMBINERS:
        return NoRule(
            "a chlo.scan whose body is not one associative elementwise combiner"
        )
    shape = op.operand_shapes[0]
    dim = op.int_attr("dimension")
    if dim < 0:
        dim += len(shape)
    scanned = PERMUTATION if op.bool_attr("is_associative") else NEED_REPLICATION
    b = RuleBuilder.for_op(op)
    kept = 0
    for d, size in enumerate(shape):
        if d == dim:
            b.factor([d, NULL_DIM], [d, NULL_DIM], size, scanned)
        else:
            b.factor([d, kept], [d, kept], size)
            kept += 1
    return b.build()


@RULES.op("chlo.top_k")
def _top_k(op: OpInfo) -> ShardingRule:
    """Batch dims pass through; the top-k dim needs the whole row.

    Shardy has no chlo rules (XLA legalizes chlo before Shardy runs); this is
    the rule Shardy gives the `mhlo.topk` custom call, except that the row is
    blocked even when k is the whole row (a top_k then sorts it: a block's
    top k is not the top k's block).
    """
    operand = op.operand_shapes[0]
    b = RuleBuilder.for_op(op)
    for d, size in enumerate(operand):
        b.same_dim(d, size, BLOCKED if d == len(operand) - 1 else PASS)
    return b.build()


def _dims_match_or_blocked(op: OpInfo) -> ShardingRule:
    operand = op.operand_shapes[0]
    result = op.result_shapes[0]
    b = RuleBuilder.for_op(op)
    for d, size in enumerate(operand):
        b.same_dim(d, size, PASS if size == result[d] else BLOCKED)
    return b.build()


@RULES.op("stablehlo.all_gather", "stablehlo.reduce_scatter")
def _all_gather(op: OpInfo) -> ShardingRule | Unknown:
    if len(op.operand_shapes) != 1:
        return Unknown(f"variadic '{op.name}'")
    attr = (
        "all_gather_dim" if op.name == "stablehlo.all_gather" else "scatter_dimension"
    )
    return _special_dims_rule(op, [op.int_attr(attr)])


@RULES.op("stablehlo.all_to_all")
def _all_to_all(op: OpInfo) -> ShardingRule | Unknown:
    if len(op.operand_shapes) != 1:
        return Unknown("variadic 'stablehlo.all_to_all'")
    special = [op.int_attr("split_dimension"), op.int_attr("concat_dimension")]
    return _special_dims_rule(op, special)


@RULES.op("stablehlo.bitcast_convert")
def _bitcast_convert(op: OpInfo) -> ShardingRule:
    """Shared dims pass through; the extra minor dim of the narrower type
    (i32 -> 2 x i16) must stay whole."""
    operand = op.operand_shapes[0]
    result = op.result_shapes[0]
    b = RuleBuilder.for_op(op)
    b.pointwise(operand if len(operand) <= len(result) else result)
    if len(operand) < len(result):
        b.factor([NULL_DIM], [len(result) - 1], result[-1], NEED_REPLICATION)
    elif len(operand) > len(result):
        b.factor([len(operand) - 1], [NULL_DIM], operand[-1], NEED_REPLICATION)
    return b.build()


@RULES.op("stablehlo.broadcast_in_dim")
def _broadcast_in_dim(op: OpInfo) -> ShardingRule:
    """Mapped dims pass through; an operand dim of size 1 expanded in place
    gets its own size-1 factor and the result dim a new one."""
    operand = op.operand_shapes[0]
    result = op.result_shapes[0]
    out_to_in = {out: i for i, out in enumerate(op.int_array("broadcast_dimensions"))}
    b = RuleBuilder.for_op(op)
    for out_dim, size in enumerate(result):
        in_dim = out_to_in.get(out_dim, NULL_DIM)
        if in_dim != NULL_DIM and operand[in_dim] == 1 and size != 1:
            b.factor([in_dim], [NULL_DIM], 1)
            in_dim = NULL_DIM
        b.factor([in_dim], [out_dim], size)
    return b.build()


@RULES.op("stablehlo.cholesky")
def _cholesky(op: OpInfo) -> ShardingRule:
    """Batch dims pass through; the two matrix dims need replication."""
    shape = op.operand_shapes[0]
    batch = len(shape) - 2
    return (
        RuleBuilder.for_op(op)
        .pointwise(shape, lambda d: PASS if d < batch else NEED_REPLICATION)
        .build()
    )


@RULES.op("stablehlo.concatenate")
def _concatenate(op: OpInfo) -> ShardingRule:
    """Other dims pass through; the concatenated dim needs replication."""
    dim = op.int_attr("dimension")
    return (
        RuleBuilder.for_op(op)
        .pointwise(
            op.result_shapes[0], lambda d: NEED_REPLICATION if d == dim else PASS
        )
        .build()
    )


@RULES.op("stablehlo.convolution")
def _convolution(op: OpInfo) -> ShardingRule:
    """Batch and output features pass through, input features are a reduction.

    Each spatial dim of the input splits into a number-of-windows factor
    (shared with the output) and a window-size factor (shared with the kernel),
    the larger one major, as Shardy does; both move data (permutation): windows
    overlap block boundaries, so a block needs its neighbours' halo. Shardy
    marks the window-size factor a reduction, but local partial sums over
    window blocks are wrong unless windows tile the input exactly; when they do
    (stride = window, no padding or dilation) meshjit uses exact factors: the
    window index passes through and the offset is a reduction. Batch and
    feature groups get their own factor, major in the dims they split.
    """
    dn = "dimension_numbers"
    lhs, rhs = op.operand_shapes[0], op.operand_shapes[1]
    out = op.result_shapes[0]
    in_batch = op.struct_int(dn, "input_batch_dimension")
    in_feat = op.struct_int(dn, "input_feature_dimension")
    k_in = op.struct_int(dn, "kernel_input_feature_dimension")
    k_out = op.struct_int(dn, "kernel_output_feature_dimension")
    out_batch = op.struct_int(dn, "output_batch_dimension")
    out_feat = op.struct_int(dn, "output_feature_dimension")
    batch_groups = op.int_attr("batch_group_count", 1)
    feature_groups = op.int_attr("feature_group_count", 1)
    b = RuleBuilder.for_op(op)
    if batch_groups > 1:
        b.factor([in_batch, k_out], [out_feat], batch_groups)
    b.factor([in_batch, NULL_DIM], [out_batch], out[out_batch])
    spatial = zip(
        op.struct_ints(dn, "input_spatial_dimensions"),
        op.struct_ints(dn, "kernel_spatial_dimensions"),
        op.struct_ints(dn, "output_spatial_dimensions"),
        strict=True,
    )
    rank = len(lhs) - 2
    strides = op.int_array("window_strides", [1] * rank)
    padding = op.int_array("padding", [0] * (2 * rank))
    lhs_dilation = op.int_array("lhs_dilation", [1] * rank)
    rhs_dilation = op.int_array("rhs_dilation", [1] * rank)
    for s, (lhs_dim, rhs_dim, out_dim) in enumerate(spatial):
        num_windows = out[out_dim]
        window = rhs[rhs_dim]
        tiled = (
            strides[s] == window
            and padding[2 * s] == padding[2 * s + 1] == 0
            and lhs_dilation[s] == rhs_dilation[s] == 1
            and num_windows * window == lhs[lhs_dim]
        )
        if tiled:
            # Windows tile the input exactly: window index major, offset minor.
            if num_windows > 1:
                b.factor([lhs_dim, NULL_DIM], [out_dim], num_windows)
            if window > 1:
                b.factor([lhs_dim, rhs_dim], [NULL_DIM], window, REDUCTION)
            continue
        remaining = lhs[lhs_dim]
        order = [False, True] if num_windows >= window else [True, False]
        for in_window in order:
            size = min(remaining, window if in_window else num_windows)
            if size <= 1:
                continue
            if in_window:
                b.factor([lhs_dim, rhs_dim], [NULL_DIM], size, PERMUTATION)
            else:
                b.factor([lhs_dim, NULL_DIM], [out_dim], size, PERMUTATION)
            remaining //= size
    if feature_groups > 1:
        b.factor([in_feat, k_out], [out_feat], feature_groups)
    b.factor([in_feat, k_in], [NULL_DIM], rhs[k_in], REDUCTION)
    b.factor(
        [NULL_DIM, k_out], [out_feat], out[out_feat] // (batch_groups * feature_groups)
    )
    return b.build()


# jax.debug.inspect_array_sharding's custom call: the sharding passes through
# it; the partitioner drops it (`partitioner.elementwise.custom_call`).
INSPECT_SHARDING = "InspectSharding"

# Custom calls that move a value between host and device memory: element-wise,
# and scheduled with the element-wise ops (Shardy's op priorities put them
# first, so both sides of a round trip keep the value's sharding).
HOST_OFFLOAD_TARGETS = frozenset({"MoveToDevice", "MoveToHost"})

_POINTWISE_TARGETS = frozenset(
    {
        "Cholesky",
        "CompactWyHelper",
        "InvertDiagBlocksLowerTriangular",
        "InvertDiagBlocksUpperTriangular",
        "LayoutConstraint",
        INSPECT_SHARDING,
        "X64Combine",
        "annotate_device_placement",
        "mhlo.erf",
    }
    | HOST_OFFLOAD_TARGETS
)
_ANNOTATION_TARGETS = frozenset(
    {"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape"}
)


@RULES.op("stablehlo.custom_call")
def _custom_call(op: OpInfo) -> ShardingRule | NoRule | Unknown:
    """Known targets by name; an unknown target stays replicated (one warning).

    Custom calls JAX emits with their own `sdy.sharding_rule` (LAPACK) keep it:
    the pass never replaces a rule already on an op. The matrix dims of @Eigh
    and @Qr (TPU's eigh and geqrf) need replication: every output element
    depends on the whole matrix. Shardy lets @Eigh's pass through ("even
    though that would require communication"), which computed blockwise gives
    wrong eigenvectors (the validator shows it); its @Qr rule is this one.
    """
    target = op.str_attr("call_target_name")
    if target in _ANNOTATION_TARGETS:
        return NoRule(_SHARDING_ANNOTATION)
    if target == "X64Combine" and "stablehlo.rng_bit_generator" in op.result_users:
        # An rng_bit_generator's initial state must be replicated and a ui64
        # value cannot be resharded: Shardy replicates the combine and
        # propagates nothing across it.
        return (
            RuleBuilder.for_op(op).same_dim(0, op.result_shapes[0][0], BLOCKED).build()
        )
    if target in _POINTWISE_TARGETS:
        return pointwise_rule(op)
    if target in ("ApproxTopK", "PartialReduce", "mhlo.topk"):
        return _dims_match_or_blocked(op)
    shape = op.operand_shapes[0] if op.operand_shapes else ()
    if len(shape) < 2 or len(op.result_shapes) != 2:
        return Unknown(f"custom call @{target}")
    d1, d2 = len(shape) - 2, len(shape) - 1
    b = RuleBuilder.for_op(op).pointwise(shape[:-2])
    if target == "Eigh":  # (eigenvectors, eigenvalues)
        b.factor([d1], [d1, NULL_DIM], shape[d1], NEED_REPLICATION)
        b.factor([d2], [d2, d1], shape[d2], NEED_REPLICATION)
        return b.build()
    if target in ("Qr", "QrDecompositionBlock"):  # (reflectors and r, taus)
        taus = op.result_shapes[1]
        b.factor([d1], [d1, NULL_DIM], shape[d1], NEED_REPLICATION)
        b.factor([d2], [d2, NULL_DIM], shape[d2], NEED_REPLICATION)
        b.factor([NULL_DIM], [NULL_DIM, d1], taus[d1], NEED_REPLICATION)
        return b.build()
    if target == "ProductOfElementaryHouseholderReflectors":
        b.factor([d1, NULL_DIM], [d1], shape[d1])
        b.factor([d2, NULL_DIM], [d2], shape[d2])
        return b.build()
    return Unknown(f"custom call @{target}")


@RULES.op("stablehlo.dot")
def _dot(op: OpInfo) -> ShardingRule:
    lhs, rhs = op.operand_shapes
    lhs_matrix = len(lhs) == 2
    rhs_matrix = len(rhs) == 2
    b = RuleBuilder.for_op(op)
    if lhs_matrix:
        b.factor([0, NULL_DIM], [0], lhs[0])
    if rhs_matrix:
        b.factor([NULL_DIM, 1], [1 if lhs_matrix else 0], rhs[1])
    b.factor([1 if lhs_matrix else 0, 0], [NULL_DIM], rhs[0], REDUCTION)
    return b.build()


@RULES.op("stablehlo.dot_general")
def _dot_general(op: OpInfo) -> ShardingRule:
    """Batch, then lhs and rhs free dims in order, then contracting (reduction)."""
    dn = "dot_dimension_numbers"
    lhs, rhs = op.operand_shapes
    lhs_batch = op.struct_ints(dn, "lhs_batching_dimensions")
    rhs_batch = op.struct_ints(dn, "rhs_batching_dimensions")
    lhs_contract = op.struct_ints(dn, "lhs_contracting_dimensions")
    rhs_contract = op.struct_ints(dn, "rhs_contracting_dimensions")
    b = RuleBuilder.for_op(op)
    out = 0
    for ld, rd in zip(lhs_batch, rhs_batch, strict=True):
        b.factor([ld, rd], [out], lhs[ld])
        out += 1
    for d, size in enumerate(lhs):
        if d not in lhs_batch and d not in lhs_contract:
            b.factor([d, NULL_DIM], [out], size)
            out += 1
    for d, size in enumerate(rhs):
        if d not in rhs_batch and d not in rhs_contract:
            b.factor([NULL_DIM, d], [out], size)
            out += 1
    for ld, rd in zip(lhs_contract, rhs_contract, strict=True):
        b.factor([ld, rd], [NULL_DIM], lhs[ld], REDUCTION)
    return b.build()


@RULES.op("stablehlo.dynamic_slice")
def _dynamic_slice(op: OpInfo) -> ShardingRule:
    """Unsliced dims pass through; a sliced dim must be whole (blocked)."""
    return _dims_match_or_blocked(op)


@RULES.op("stablehlo.dynamic_update_slice")
def _dynamic_update_slice(op: OpInfo) -> ShardingRule:
    """Dims the update covers whole pass through all three tensors.

    Where the update is smaller, the operand/result dim passes through (each
    device writes the part of the update inside its block) and the update's dim
    gets its own operand-only factor (gathered before the op); it is marked
    need-replication unless that dim's start index is a constant.
    """
    operand, update = op.operand_shapes[0], op.operand_shapes[1]
    n = len(op.operand_shapes)
    b = RuleBuilder.for_op(op)
    for d, size in enumerate(operand):
        if update[d] == size:
            b.same_dim(d, size)
            continue
        b.factor(_dims(n, i0=d), [d], size)
        kind = PASS if 2 + d in op.constant_operands else NEED_REPLICATION
        b.factor(_dims(n, i1=d), [NULL_DIM], update[d], kind)
    return b.build()


@RULES.op("stablehlo.fft")
def _fft(op: OpInfo) -> ShardingRule:
    """Batch dims pass through; transformed dims need replication, and a dim
    whose size the transform changes (RFFT, IRFFT) is blocked."""
    operand = op.operand_shapes[0]
    result = op.result_shapes[0]
    first_fft = len(operand) - len(op.int_array("fft_length"))

    def kind(d: int) -> FactorKind:
        if d < first_fft:
            return PASS
        return NEED_REPLICATION if operand[d] == result[d] else BLOCKED

    return RuleBuilder.for_op(op).pointwise(operand, kind).build()


@RULES.op("stablehlo.gather")
def _gather(op: OpInfo) -> ShardingRule:
    """Index batch dims pass through indices and result; whole offset dims pass
    through operand and result, sliced ones are blocked; collapsed operand dims
    are a reduction (each device gathers what it holds, masked, then sum); the
    index vector dim needs replication."""
    dn = "dimension_numbers"
    operand, indices = op.operand_shapes
    result = op.result_shapes[0]
    offset_dims = op.struct_ints(dn, "offset_dims")
    collapsed = op.struct_ints(dn, "collapsed_slice_dims")
    operand_batching = op.struct_ints(dn, "operand_batching_dims")
    indices_batching = op.struct_ints(dn, "start_indices_batching_dims")
    index_vector_dim = op.struct_int(dn, "index_vector_dim")
    b = RuleBuilder.for_op(op)
    in_dim = 0
    batch_pos = 0
    for out_dim, size in enumerate(result):
        if out_dim in offset_dims:
            while in_dim in collapsed or in_dim in operand_batching:
                in_dim += 1
            kind = PASS if operand[in_dim] == size else BLOCKED
            b.factor([in_dim, NULL_DIM], [out_dim], operand[in_dim], kind)
            in_dim += 1
            continue
        idx_dim = batch_pos if batch_pos < index_vector_dim else batch_pos + 1
        op_batch = NULL_DIM
        if idx_dim in indices_batching:
            op_batch = operand_batching[indices_batching.index(idx_dim)]
        b.factor([op_batch, idx_dim], [out_dim], size)
        batch_pos += 1
    for d in collapsed:
        b.factor([d, NULL_DIM], [NULL_DIM], operand[d], REDUCTION)
    if index_vector_dim < len(indices):
        b.factor(
            [NULL_DIM, index_vector_dim],
            [NULL_DIM],
            indices[index_vector_dim],
            NEED_REPLICATION,
        )
    return b.build()


@RULES.op("stablehlo.pad")
def _pad(op: OpInfo) -> ShardingRule:
    """Unpadded dims pass through; a padded dim moves data (permutation).

    Shardy marks a dim only when its size changes, so a shift (low=1,
    high=-1) passes through there, which computes the wrong block; meshjit
    marks every dim with nonzero low, high or interior padding.
    """
    operand = op.operand_shapes[0]
    low = op.int_array("edge_padding_low")
    high = op.int_array("edge_padding_high")
    interior = op.int_array("interior_padding")

    def kind(d: int) -> FactorKind:
        return PASS if low[d] == high[d] == interior[d] == 0 else PERMUTATION

    return RuleBuilder.for_op(op).pointwise(operand, kind).build()


@RULES.op("stablehlo.reduce")
def _reduce(op: OpInfo) -> ShardingRule:
    """Kept dims pass through; reduced dims are reduction factors."""
    shape = op.operand_shapes[0]
    reduced = op.int_array("dimensions")
    n_inputs = len(op.result_shapes)
    n_ops = len(op.operand_shapes)
    b = RuleBuilder.for_op(op)
    out = 0
    for d, size in enumerate(shape):
        operand_dims = [d] * n_inputs + [NULL_DIM] * (n_ops - n_inputs)
        if d in reduced:
            b.factor(operand_dims, [NULL_DIM] * n_inputs, size, REDUCTION)
        else:
            b.factor(operand_dims, [out] * n_inputs, size)
            out += 1
    return b.build()


@RULES.op("stablehlo.reduce_window")
def _reduce_window(op: OpInfo) -> ShardingRule:
    """One factor per dim, sized like the result; a windowed, strided, padded
    or base-dilated dim needs data from neighbours (permutation).

    Shardy ignores base dilation; a base-dilated dim computed blockwise gives
    the wrong result, so meshjit marks it permutation too.
    """

    def kind(d: int) -> FactorKind:
        return PASS if _window_is_trivial(op, d) else PERMUTATION

    return RuleBuilder.for_op(op).pointwise(op.result_shapes[0], kind).build()


@RULES.op("stablehlo.reshape")
def _reshape(op: OpInfo) -> ShardingRule | NoRule:
    """Split and merged dims become compound factors (greatest common divisors
    of the sizes consumed so far); size-1 dims get their own factor."""
    ins = op.operand_shapes[0]
    outs = op.result_shapes[0]
    if prod(ins) == 0:
        return NoRule("reshape of an empty tensor: nothing to shard")
    b = RuleBuilder.for_op(op)
    i = o = 0
    dims_in = dims_out = 1  # product of the dim sizes entered so far
    factors_in = factors_out = 1  # product of the factors assigned so far
    while i < len(ins) or o < len(outs):
        if i < len(ins) and ins[i] == 1:
            b.factor([i], [NULL_DIM], 1)
            i += 1
            continue
        if o < len(outs) and outs[o] == 1:
            b.factor([NULL_DIM], [o], 1)
            o += 1
            continue
        if i < len(ins) and dims_in == factors_in:
            dims_in *= ins[i]
        if o < len(outs) and dims_out == factors_out:
            dims_out *= outs[o]
        next_in = dims_in // factors_in
        next_out = dims_out // factors_out
        common = gcd(next_in, next_out)

        def catch_up(nxt: int, behind: int, ahead: int, common: int = common) -> int:
            # The side that is behind takes the factor that makes both sides'
            # products meet again, else the part of its dim beyond the gcd.
            if ahead % behind == 0 and nxt % (ahead // behind) == 0:
                return ahead // behind
            return nxt // common if nxt > common else nxt

        if factors_in == factors_out:
            if common > 1:
                b.factor([i], [o], common)
                factors_in *= common
                factors_out *= common
            else:
                b.factor([i], [NULL_DIM], next_in)
                factors_in *= next_in
                b.factor([NULL_DIM], [o], next_out)
                factors_out *= next_out
        elif factors_in < factors_out:
            size = catch_up(next_in, factors_in, factors_out)
            b.factor([i], [NULL_DIM], size)
            factors_in *= size
        else:
            size = catch_up(next_out, factors_out, factors_in)
            b.factor([NULL_DIM], [o], size)
            factors_out *= size
        if i < len(ins) and dims_in == factors_in:
            i += 1
        if o < len(outs) and dims_out == factors_out:
            o += 1
    return b.build()


@RULES.op("stablehlo.reverse")
def _reverse(op: OpInfo) -> ShardingRule:
    """Other dims pass through; a reversed dim swaps blocks (permutation)."""
    reversed_dims = op.int_array("dimensions")
    return (
        RuleBuilder.for_op(op)
        .pointwise(
            op.operand_shapes[0], lambda d: PERMUTATION if d in reversed_dims else PASS
        )
        .build()
    )


@RULES.op("stablehlo.rng_bit_generator")
def _rng_bit_generator(op: OpInfo) -> ShardingRule:
    """The state is blocked; the output dims are result-only factors.

    A result-only factor means each device keeps its block of the output;
    for these bits that block is cut from the whole output generated with the
    replicated state (`partitioner/rng.py`: XLA fuses the cut into the
    generator, which measured faster than generating the block alone).
    """
    state = op.operand_shapes[0]
    b = RuleBuilder.for_op(op)
    for d, size in enumerate(state):
        b.factor([d], [d, NULL_DIM], size, BLOCKED)
    for d, size in enumerate(op.result_shapes[1]):
        b.factor([NULL_DIM], [NULL_DIM, d], size)
    return b.build()


@RULES.op("stablehlo.scatter")
def _scatter(op: OpInfo) -> ShardingRule:
    """Inserted input dims and whole window dims pass through; index batch dims
    are a reduction when the combiner is associative and commutative (else they
    need replication); sliced windows and the index vector dim need
    replication."""
    dn = "scatter_dimension_numbers"
    n_inputs = len(op.result_shapes)
    inputs = op.operand_shapes[0]
    indices = op.operand_shapes[n_inputs]
    updates = op.operand_shapes[n_inputs + 1]
    window_dims = op.struct_ints(dn, "update_window_dims")
    inserted = op.struct_ints(dn, "inserted_window_dims")
    input_batching = op.struct_ints(dn, "input_batching_dims")
    indices_batching = op.struct_ints(dn, "scatter_indices_batching_dims")
    index_vector_dim = op.struct_int(dn, "index_vector_dim")
    batch_kind = REDUCTION if op.combiner in REDUCIBLE_COMBINERS else NEED_REPLICATION
    b = RuleBuilder.for_op(op)

    def add(
        input_dim: int, index_dim: int, update_dim: int, size: int, kind: FactorKind
    ) -> None:
        operand_dims = [input_dim] * n_inputs + [index_dim] + [update_dim] * n_inputs
        b.factor(operand_dims, [input_dim] * n_inputs, size, kind)

    in_dim = 0
    batch_pos = 0
    for up_dim, size in enumerate(updates):
        if up_dim in window_dims:
            while in_dim in inserted or in_dim in input_batching:
                in_dim += 1
            if inputs[in_dim] == size:
                add(in_dim, NULL_DIM, up_dim, size, PASS)
            else:
                add(in_dim, NULL_DIM, NULL_DIM, inputs[in_dim], NEED_REPLICATION)
                add(NULL_DIM, NULL_DIM, up_dim, size, NEED_REPLICATION)
            in_dim += 1
            continue
        idx_dim = batch_pos if batch_pos < index_vector_dim else batch_pos + 1
        if idx_dim in indices_batching:
            in_batch = input_batching[indices_batching.index(idx_dim)]
            add(in_batch, idx_dim, up_dim, size, PASS)
        else:
            add(NULL_DIM, idx_dim, up_dim, size, batch_kind)
        batch_pos += 1
    for d in inserted:
        add(d, NULL_DIM, NULL_DIM, inputs[d], PASS)
    if index_vector_dim < len(indices):
        add(
            NULL_DIM,
            index_vector_dim,
            NULL_DIM,
            indices[index_vector_dim],
            NEED_REPLICATION,
        )
    return b.build()


@RULES.op("stablehlo.select_and_scatter")
def _select_and_scatter(op: OpInfo) -> ShardingRule:
    """Unwindowed dims pass through; a windowed dim gets a source factor that
    needs replication and an operand/result factor that moves data."""
    operand, source = op.operand_shapes[0], op.operand_shapes[1]
    b = RuleBuilder.for_op(op)
    for d, size in enumerate(operand):
        if _window_is_trivial(op, d):
            b.same_dim(d, size)
            continue
        b.factor(_dims(3, i1=d), [NULL_DIM], source[d], NEED_REPLICATION)
        b.factor(_dims(3, i0=d), [d], size, PERMUTATION)
    return b.build()


@RULES.op("stablehlo.slice")
def _slice(op: OpInfo) -> ShardingRule:
    """Whole dims pass through; a sliced dim moves data (permutation)."""
    operand = op.operand_shapes[0]
    result = op.result_shapes[0]
    return (
        RuleBuilder.for_op(op)
        .pointwise(operand, lambda d: PASS if operand[d] == result[d] else PERMUTATION)
        .build()
    )


@RULES.op("stablehlo.sort")
def _sort(op: OpInfo) -> ShardingRule:
    """Other dims pass through; the sorted dim needs replication, and is
    blocked when no other dim could carry a sharding."""
    shape = op.operand_shapes[0]
    dim = op.int_attr("dimension", len(shape) - 1)
    if dim < 0:
        dim += len(shape)
    others = any(size > 1 for d, size in enumerate(shape) if d != dim)
    sort_kind = NEED_REPLICATION if others else BLOCKED
    return (
        RuleBuilder.for_op(op)
        .pointwise(shape, lambda d: sort_kind if d == dim else PASS)
        .build()
    )


@RULES.op("stablehlo.transpose")
def _transpose(op: OpInfo) -> ShardingRule:
    """Result dim d is operand dim permutation[d]; factors in result order."""
    operand = op.operand_shapes[0]
    b = RuleBuilder.for_op(op)
    for out_dim, in_dim in enumerate(op.int_array("permutation")):
        b.factor([in_dim], [out_dim], operand[in_dim])
    return b.build()


@RULES.op("stablehlo.triangular_solve")
def _triangular_solve(op: OpInfo) -> ShardingRule:
    """Batch dims pass through, and so do the columns (left side) or rows
    (right side) of b: each is solved on its own. The other matrix dims need
    replication. Shardy marks b's free dim need-replication too, which is
    correct but never lets it be sharded (the validator finds it blockwise).
    """
    a, rhs = op.operand_shapes
    d1, d2 = len(a) - 2, len(a) - 1
    transposed = op.str_attr("transpose_a", "NO_TRANSPOSE").upper() in (
        "TRANSPOSE",
        "ADJOINT",
    )
    b = RuleBuilder.for_op(op).pointwise(a[:-2])
    if op.bool_attr("left_side"):
        # op(a) @ x = b
        free, contract = (d2, d1) if transposed else (d1, d2)
        b.factor([free, d1], [NULL_DIM], a[free], NEED_REPLICATION)
        b.factor([NULL_DIM, d2], [d2], rhs[d2])
        b.factor([contract, NULL_DIM], [d1], a[contract], NEED_REPLICATION)
    else:
        # x @ op(a) = b
        free, contract = (d1, d2) if transposed else (d2, d1)
        b.factor([NULL_DIM, d1], [d1], rhs[d1])
        b.factor([free, d2], [NULL_DIM], a[free], NEED_REPLICATION)
        b.factor([contract, NULL_DIM], [d2], a[contract], NEED_REPLICATION)
    return b.build()
