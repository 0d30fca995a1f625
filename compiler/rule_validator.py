"""Numerical validation of op sharding rules (DTensor's strategy-validation idea).

For a rule and small concrete inputs, shard one factor at a time over a few
devices and check what the rule claims:

- pass-through: device d sees only its block of every operand that has the
  factor (everything else is poisoned: NaN or random garbage); the op's result
  restricted to block d must equal the unsharded result there. A result
  without the factor must come out whole on every device.
- reduction: device d sees its block, the rest is the combiner's identity;
  combining the devices' results (sum, max, ...) must give the unsharded
  result.
- need-replication / blocked / permutation: the claim is that the factor can
  NOT be computed blockwise; if it can (pass-through or reduction check
  passes), that is reported as a false negative (a missed opportunity).

A false positive is a pass-through or reduction factor whose check fails:
the rule would let the partitioner produce a wrong answer.

"Device d sees only its block" is simulated by evaluating the op on
poisoned full-size inputs: this checks the data dependence the rule claims,
independently of how the partitioner later rewrites the op's attributes for
local shapes. A factor that appears only in results (broadcast, rng outputs)
is checked by evaluating the op with the smaller local result shape instead.

Evaluators run the ops with numpy and jax.lax on CPU. A collective is
evaluated for one device of a simulated replica group whose other members hold
elementwise functions of the same operand (see `_on_replica`). Custom calls are
evaluated per target; `NOT_EVALUABLE` lists what cannot be, and why.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from meshjit.dialects.rules import (
    FactorKind,
    OpInfo,
    RuleTable,
    ShardingRule,
    factor_name,
)

Array = np.ndarray
Evaluator = Callable[[OpInfo, Sequence[Array]], list[Array]]
InputMaker = Callable[[OpInfo, np.random.Generator], list[Array]]


class Outcome(enum.Enum):
    OK = "ok"
    FALSE_POSITIVE = "false positive"
    FALSE_NEGATIVE = "false negative"
    NOT_CHECKED = "not checked"


@dataclass(frozen=True, slots=True)
class FactorCheck:
    case: str
    op: str
    factor: str
    kind: FactorKind
    outcome: Outcome
    detail: str = ""

    def __str__(self) -> str:
        text = f"{self.case}: factor {self.factor} ({self.kind.value})"
        text += f": {self.outcome.value}"
        return f"{text}: {self.detail}" if self.detail else text


@dataclass(frozen=True, slots=True)
class Case:
    """One op with concrete shapes and attributes, and how to make its inputs."""

    name: str
    info: OpInfo
    inputs: InputMaker | None = None  # default: by dtype


@dataclass(slots=True)
class Report:
    checks: list[FactorCheck] = field(default_factory=list)

    def of(self, outcome: Outcome) -> list[FactorCheck]:
        return [c for c in self.checks if c.outcome is outcome]

    @property
    def false_positives(self) -> list[FactorCheck]:
        return self.of(Outcome.FALSE_POSITIVE)

    @property
    def false_negatives(self) -> list[FactorCheck]:
        return self.of(Outcome.FALSE_NEGATIVE)

    def summary(self) -> str:
        counts = {o: len(self.of(o)) for o in Outcome}
        return ", ".join(f"{n} {o.value}" for o, n in counts.items())


# ---------------------------------------------------------------------------
# Which elements of a tensor belong to a device when one factor is sharded.


def _digit_ranges(rule: ShardingRule, dim_factors: Sequence[int]) -> list[int]:
    """Strides of each factor of one dim (major to minor)."""
    strides = []
    stride = 1
    for f in reversed(dim_factors):
        strides.append(stride)
        stride *= rule.sizes[f]
    return list(reversed(strides))


def _tiles(rule: ShardingRule, dim_factors: Sequence[int], size: int) -> bool:
    product = 1
    for f in dim_factors:
        product *= rule.sizes[f]
    return product == size


def _local_mask(
    rule: ShardingRule,
    tensor: Sequence[Sequence[int]],
    shape: Sequence[int],
    factor: int,
    device: int,
    n: int,
) -> Array:
    """Boolean mask of the elements device `device` holds (factor split n ways)."""
    mask = np.ones(tuple(shape), dtype=bool)
    block = rule.sizes[factor] // n
    for d, dim_factors in enumerate(tensor):
        if factor not in dim_factors:
            continue
        strides = _digit_ranges(rule, dim_factors)
        stride = strides[list(dim_factors).index(factor)]
        idx = np.arange(shape[d])
        digit = (idx // stride) % rule.sizes[factor]
        keep = (digit >= device * block) & (digit < (device + 1) * block)
        view = [1] * len(shape)
        view[d] = shape[d]
        mask &= keep.reshape(view)
    return mask


def _has(tensor: Sequence[Sequence[int]], factor: int) -> bool:
    return any(factor in dim for dim in tensor)


# ---------------------------------------------------------------------------
# Poison and identities.


def _lowest(dt: np.dtype[np.generic]) -> object:
    if np.issubdtype(dt, np.floating):
        return -np.inf
    return np.iinfo(dt).min  # type: ignore[type-var]


def _highest(dt: np.dtype[np.generic]) -> object:
    if np.issubdtype(dt, np.floating):
        return np.inf
    return np.iinfo(dt).max  # type: ignore[type-var]


_IDENTITY: Mapping[str, Callable[[np.dtype[np.generic]], object]] = MappingProxyType(
    {
        "stablehlo.add": lambda dt: 0,
        "stablehlo.multiply": lambda dt: 1,
        "stablehlo.maximum": _lowest,
        "stablehlo.minimum": _highest,
        "stablehlo.or": lambda dt: False,
        "stablehlo.and": lambda dt: True,
        "stablehlo.xor": lambda dt: 0,
    }
)
_COMBINE: Mapping[str, Callable[[Array, Array], Array]] = MappingProxyType(
    {
        "stablehlo.add": np.add,
        "stablehlo.multiply": np.multiply,
        "stablehlo.maximum": np.maximum,
        "stablehlo.minimum": np.minimum,
        "stablehlo.or": np.logical_or,
        "stablehlo.and": np.logical_and,
        "stablehlo.xor": np.bitwise_xor,
    }
)
_ADD_REDUCED = frozenset(
    {
        "stablehlo.convolution",
        "stablehlo.dot",
        "stablehlo.dot_general",
        "stablehlo.gather",
    }
)


def _reducer(info: OpInfo) -> str | None:
    if info.name in _ADD_REDUCED:
        return "stablehlo.add"
    return info.combiner


def _poison(x: Array, rng: np.random.Generator, flip: bool) -> Array:
    """Values unlike `x` everywhere (not NaN: some kernels multiply blocks by 0)."""
    if np.issubdtype(x.dtype, np.floating) or np.issubdtype(
        x.dtype, np.complexfloating
    ):
        scale = -5.0 if flip else 7.0
        return (x + scale * (1 + rng.uniform(0, 1, x.shape))).astype(x.dtype)
    if x.dtype == np.bool_:
        return ~x if flip else rng.integers(0, 2, x.shape).astype(bool)
    return (x + rng.integers(1, 3, x.shape)).astype(x.dtype)


def _close(a: Array, b: Array) -> bool:
    if a.shape != b.shape:
        return False
    if np.issubdtype(a.dtype, np.inexact) or np.issubdtype(b.dtype, np.inexact):
        return bool(np.allclose(a, b, rtol=2e-3, atol=2e-3, equal_nan=True))
    return bool(np.array_equal(a, b))


# ---------------------------------------------------------------------------
# The checks.


def _check_pass_through(
    info: OpInfo,
    rule: ShardingRule,
    evaluate: Evaluator,
    inputs: list[Array],
    expected: list[Array],
    factor: int,
    n: int,
    rng: np.random.Generator,
) -> str | None:
    """None if the factor computes blockwise; else what went wrong."""
    for flip in (True, False):
        for device in range(n):
            local_in = []
            for x, tensor, shape in zip(
                inputs, rule.operands, info.operand_shapes, strict=True
            ):
                if not _has(tensor, factor):
                    local_in.append(x)
                    continue
                mask = _local_mask(rule, tensor, shape, factor, device, n)
                local_in.append(np.where(mask, x, _poison(x, rng, flip)))
            try:
                got = evaluate(info, local_in)
            except Exception as err:  # an op that rejects poisoned indices
                return f"evaluation failed on device {device}: {err}"
            for r, (g, e, tensor, shape) in enumerate(
                zip(got, expected, rule.results, info.result_shapes, strict=True)
            ):
                mask = _local_mask(rule, tensor, shape, factor, device, n)
                if not _close(g[mask], e[mask]):
                    return f"result {r} on device {device} differs from unsharded"
    return None


def _check_reduction(
    info: OpInfo,
    rule: ShardingRule,
    evaluate: Evaluator,
    inputs: list[Array],
    expected: list[Array],
    factor: int,
    n: int,
) -> str | None:
    reducer = _reducer(info)
    if reducer is None or reducer not in _COMBINE:
        return "combiner unknown"
    if any(_has(t, factor) for t in rule.results):
        return "a result has the reduction factor"
    partials: list[list[Array]] = []
    for device in range(n):
        local_in = []
        for i, (x, tensor, shape) in enumerate(
            zip(inputs, rule.operands, info.operand_shapes, strict=True)
        ):
            identity = _IDENTITY[reducer](x.dtype)
            if _has(tensor, factor):
                mask = _local_mask(rule, tensor, shape, factor, device, n)
                local_in.append(np.where(mask, x, np.asarray(identity, dtype=x.dtype)))
            elif device > 0 and _is_accumulator(info, i):
                local_in.append(np.full_like(x, identity))
            else:
                local_in.append(x)
        partials.append(evaluate(info, local_in))
    for r, e in enumerate(expected):
        total = partials[0][r]
        for p in partials[1:]:
            total = _COMBINE[reducer](total, p[r])
        if not _close(np.asarray(total), e):
            return f"combined result {r} differs from the unsharded result"
    return None


def _is_accumulator(info: OpInfo, operand: int) -> bool:
    """Operands added into the result once (reduce inits, scatter inputs)."""
    n_res = len(info.result_shapes)
    if info.name == "stablehlo.reduce":
        return operand >= n_res
    if info.name == "stablehlo.scatter":
        return operand < n_res
    return False


def _split_count(size: int) -> int:
    for n in (2, 3, 5):
        if size % n == 0:
            return n
    return 0


def validate_case(
    case: Case, table: RuleTable, evaluators: Mapping[str, Evaluator], seed: int = 0
) -> list[FactorCheck]:
    """Checks every factor of the case's rule; see the module docstring."""
    info = case.info
    rule = table.rule(info)
    if rule is None:
        return []
    evaluate = evaluators.get(info.name)
    if evaluate is None:
        return [
            FactorCheck(
                case.name,
                info.name,
                factor_name(f),
                rule.kind(f),
                Outcome.NOT_CHECKED,
                "no evaluator for this op",
            )
            for f in range(rule.num_factors)
        ]
    rng = np.random.default_rng(seed)
    inputs = (case.inputs or default_inputs)(info, rng)
    expected = evaluate(info, inputs)
    checks = []
    for f in range(rule.num_factors):
        kind = rule.kind(f)

        def out(
            outcome: Outcome, detail: str = "", f: int = f, kind: FactorKind = kind
        ) -> FactorCheck:
            return FactorCheck(
                case.name, info.name, factor_name(f), kind, outcome, detail
            )

        n = _split_count(rule.sizes[f])
        if n == 0:
            checks.append(
                out(Outcome.NOT_CHECKED, f"size {rule.sizes[f]} cannot be split")
            )
            continue
        tensors = [
            *zip(rule.operands, info.operand_shapes, strict=True),
            *zip(rule.results, info.result_shapes, strict=True),
        ]
        if any(
            f in dim and not _tiles(rule, dim, shape[d])
            for tensor, shape in tensors
            for d, dim in enumerate(tensor)
        ):
            checks.append(out(Outcome.NOT_CHECKED, "factor sizes do not tile a dim"))
            continue
        in_operands = any(_has(t, f) for t in rule.operands)
        in_results = any(_has(t, f) for t in rule.results)
        if not in_operands and kind is not FactorKind.REDUCTION:
            # Each device keeps its block of a result computed from operands
            # that do not have the factor: correct whatever the op.
            checks.append(out(Outcome.OK, "result-only factor"))
            continue
        if not in_results and kind in (
            FactorKind.PASS_THROUGH,
            FactorKind.NEED_REPLICATION,
            FactorKind.BLOCKED,
        ):
            # The op needs such an operand dim whole: a sharded operand is
            # gathered first (Shardy's convention for operand-only factors).
            checks.append(out(Outcome.OK, "operand-only factor"))
            continue
        passes = _check_pass_through(info, rule, evaluate, inputs, expected, f, n, rng)
        if kind is FactorKind.PASS_THROUGH:
            checks.append(
                out(Outcome.FALSE_POSITIVE, passes) if passes else out(Outcome.OK)
            )
            continue
        reduces: str | None = "a result has the factor"
        if not in_results:
            reduces = _check_reduction(info, rule, evaluate, inputs, expected, f, n)
        if kind is FactorKind.REDUCTION:
            if reduces == "combiner unknown":
                checks.append(out(Outcome.NOT_CHECKED, "combiner unknown"))
            elif reduces:
                checks.append(out(Outcome.FALSE_POSITIVE, reduces))
            else:
                checks.append(out(Outcome.OK))
            continue
        if passes is None:
            checks.append(
                out(Outcome.FALSE_NEGATIVE, "computes blockwise (pass-through)")
            )
        elif reduces is None:
            checks.append(
                out(Outcome.FALSE_NEGATIVE, "partial results combine (reduction)")
            )
        else:
            checks.append(out(Outcome.OK, "not computable blockwise"))
    return checks


def validate(
    cases: Sequence[Case], table: RuleTable, evaluators: Mapping[str, Evaluator]
) -> Report:
    report = Report()
    with np.errstate(all="ignore"):
        for i, case in enumerate(cases):
            report.checks.extend(validate_case(case, table, evaluators, seed=i))
    return report


# ---------------------------------------------------------------------------
# Inputs and evaluators.

_NP_DTYPES = MappingProxyType(
    {
        "f32": np.float32,
        "f64": np.float64,
        "f16": np.float16,
        "i1": np.bool_,
        "i32": np.int32,
        "i64": np.int64,
        "ui32": np.uint32,
        "ui64": np.uint64,
        "complex<f32>": np.complex64,
    }
)


def np_dtype(name: str) -> type[np.generic]:
    return _NP_DTYPES[name]


def default_inputs(info: OpInfo, rng: np.random.Generator) -> list[Array]:
    out = []
    for shape, dt in zip(info.operand_shapes, info.operand_dtypes, strict=True):
        t = np_dtype(dt)
        if t is np.bool_:
            out.append(rng.integers(0, 2, shape).astype(bool))
        elif np.issubdtype(t, np.integer):
            out.append(rng.integers(0, 4, shape).astype(t))
        elif np.issubdtype(t, np.complexfloating):
            out.append(
                (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(t)
            )
        else:
            out.append(rng.uniform(0.5, 2.0, shape).astype(t))
    return out


def _np_out(*xs: object) -> list[Array]:
    return [np.asarray(x) for x in xs]


def _unary(fn: Callable[[Array], object]) -> Evaluator:
    return lambda info, xs: _np_out(fn(xs[0]))


def _binary(fn: Callable[[Array, Array], object]) -> Evaluator:
    return lambda info, xs: _np_out(fn(xs[0], xs[1]))


def _evaluators() -> dict[str, Evaluator]:
    import jax
    import jax.numpy as jnp
    from jax import lax

    ev: dict[str, Evaluator] = {}
    unary_fns: dict[str, Callable[[Array], Array]] = {
        "abs": np.abs,
        "cbrt": np.cbrt,
        "ceil": np.ceil,
        "cosine": np.cos,
        "exponential": np.exp,
        "exponential_minus_one": np.expm1,
        "floor": np.floor,
        "log": np.log,
        "log_plus_one": np.log1p,
        "negate": np.negative,
        "rsqrt": lambda x: 1 / np.sqrt(x),
        "sign": np.sign,
        "sine": np.sin,
        "sqrt": np.sqrt,
        "tan": np.tan,
        "tanh": np.tanh,
        "logistic": lambda x: 1 / (1 + np.exp(-x)),
        "is_finite": np.isfinite,
        "round_nearest_even": np.rint,
        "real": np.real,
        "imag": np.imag,
        "not": np.logical_not,
    }
    for name, fn in unary_fns.items():
        ev[f"stablehlo.{name}"] = _unary(fn)
    binary_fns: dict[str, Callable[[Array, Array], Array]] = {
        "add": np.add,
        "subtract": np.subtract,
        "multiply": np.multiply,
        "divide": np.divide,
        "maximum": np.maximum,
        "minimum": np.minimum,
        "power": np.power,
        "remainder": np.fmod,
        "atan2": np.arctan2,
        "and": np.logical_and,
        "or": np.logical_or,
        "xor": np.logical_xor,
        "complex": lambda a, b: a + 1j * b,
    }
    for name, fn2 in binary_fns.items():
        ev[f"stablehlo.{name}"] = _binary(fn2)
    ev["stablehlo.compare"] = _binary(np.less)
    ev["stablehlo.convert"] = lambda info, xs: _np_out(
        xs[0].astype(np_dtype(info.result_dtypes[0]))
    )
    ev["stablehlo.select"] = lambda info, xs: _np_out(np.where(xs[0], xs[1], xs[2]))
    ev["stablehlo.clamp"] = lambda info, xs: _np_out(np.clip(xs[1], xs[0], xs[2]))
    ev["chlo.erf"] = _unary(lambda x: np.asarray(jax.scipy.special.erf(x)))
    ev["chlo.square"] = _unary(np.square)
    ev["sdy.sharding_constraint"] = _unary(lambda x: x)

    def bitcast(info: OpInfo, xs: Sequence[Array]) -> list[Array]:
        out_t = np_dtype(info.result_dtypes[0])
        return _np_out(xs[0].view(out_t).reshape(info.result_shapes[0]))

    ev["stablehlo.bitcast_convert"] = bitcast
    ev["stablehlo.broadcast_in_dim"] = lambda info, xs: _np_out(
        lax.broadcast_in_dim(
            xs[0], info.result_shapes[0], info.int_array("broadcast_dimensions")
        )
    )
    ev["stablehlo.reshape"] = lambda info, xs: _np_out(
        xs[0].reshape(info.result_shapes[0])
    )
    ev["stablehlo.transpose"] = lambda info, xs: _np_out(
        np.transpose(xs[0], info.int_array("permutation"))
    )
    ev["stablehlo.reverse"] = lambda info, xs: _np_out(
        np.flip(xs[0], info.int_array("dimensions"))
    )

    def dot_general(info: OpInfo, xs: Sequence[Array]) -> list[Array]:
        dn = "dot_dimension_numbers"
        dims = (
            (
                info.struct_ints(dn, "lhs_contracting_dimensions"),
                info.struct_ints(dn, "rhs_contracting_dimensions"),
            ),
            (
                info.struct_ints(dn, "lhs_batching_dimensions"),
                info.struct_ints(dn, "rhs_batching_dimensions"),
            ),
        )
        return _np_out(
            lax.dot_general(xs[0], xs[1], dims, precision=lax.Precision.HIGHEST)
        )

    ev["stablehlo.dot_general"] = dot_general
    ev["stablehlo.dot"] = lambda info, xs: _np_out(np.dot(xs[0], xs[1]))

    def reduce(info: OpInfo, xs: Sequence[Array]) -> list[Array]:
        dims = info.int_array("dimensions")
        fns: dict[str, Callable[..., Array]] = {
            "stablehlo.add": np.sum,
            "stablehlo.maximum": np.max,
            "stablehlo.minimum": np.min,
            "stablehlo.multiply": np.prod,
        }
        n = len(info.result_shapes)
        fn = fns[info.combiner or ""]
        combine = _COMBINE[info.combiner or ""]
        return [
            np.asarray(combine(fn(xs[i], axis=dims), xs[n + i])).astype(xs[i].dtype)
            for i in range(n)
        ]

    ev["stablehlo.reduce"] = reduce

    def reduce_window(info: OpInfo, xs: Sequence[Array]) -> list[Array]:
        rank = len(info.operand_shapes[0])
        pad = info.int_array("padding", [0] * (2 * rank))
        comp = {"stablehlo.add": lax.add, "stablehlo.maximum": lax.max}[
            info.combiner or ""
        ]
        out = lax.reduce_window(
            xs[0],
            xs[1][()],
            comp,
            info.int_array("window_dimensions"),
            info.int_array("window_strides", [1] * rank),
            [(pad[2 * d], pad[2 * d + 1]) for d in range(rank)],
            base_dilation=info.int_array("base_dilations", [1] * rank),
            window_dilation=info.int_array("window_dilations", [1] * rank),
        )
        return _np_out(out)

    ev["stablehlo.reduce_window"] = reduce_window
    ev["stablehlo.concatenate"] = lambda info, xs: _np_out(
        np.concatenate(xs, axis=info.int_attr("dimension"))
    )
    ev["stablehlo.pad"] = lambda info, xs: _np_out(
        lax.pad(
            xs[0],
            xs[1][()],
            list(
                zip(
                    info.int_array("edge_padding_low"),
                    info.int_array("edge_padding_high"),
                    info.int_array("interior_padding"),
                    strict=True,
                )
            ),
        )
    )

    def dynamic_slice(info: OpInfo, xs: Sequence[Array]) -> list[Array]:
        return _np_out(
            lax.dynamic_slice(
                xs[0], [x[()] for x in xs[1:]], info.int_array("slice_sizes")
            )
        )

    ev["stablehlo.dynamic_slice"] = dynamic_slice
    ev["stablehlo.slice"] = lambda info, xs: _np_out(
        xs[0][
            tuple(
                slice(a, b, c)
                for a, b, c in zip(
                    info.int_array("start_indices"),
                    info.int_array("limit_indices"),
                    info.int_array("strides"),
                    strict=True,
                )
            )
        ]
    )
    ev["stablehlo.dynamic_update_slice"] = lambda info, xs: _np_out(
        lax.dynamic_update_slice(xs[0], xs[1], [x[()] for x in xs[2:]])
    )

    def gather(info: OpInfo, xs: Sequence[Array]) -> list[Array]:
        dn = "dimension_numbers"
        nums = lax.GatherDimensionNumbers(
            offset_dims=info.struct_ints(dn, "offset_dims"),
            collapsed_slice_dims=info.struct_ints(dn, "collapsed_slice_dims"),
            start_index_map=info.struct_ints(dn, "start_index_map"),
            operand_batching_dims=info.struct_ints(dn, "operand_batching_dims"),
            start_indices_batching_dims=info.struct_ints(
                dn, "start_indices_batching_dims"
            ),
        )
        ivd = info.struct_int(dn, "index_vector_dim")
        idx = jnp.moveaxis(xs[1], ivd, -1) if ivd < xs[1].ndim else xs[1][..., None]
        return _np_out(
            lax.gather(
                xs[0],
                idx,
                nums,
                info.int_array("slice_sizes"),
                mode=lax.GatherScatterMode.CLIP,
            )
        )

    ev["stablehlo.gather"] = gather

    def scatter(info: OpInfo, xs: Sequence[Array]) -> list[Array]:
        dn = "scatter_dimension_numbers"
        nums = lax.ScatterDimensionNumbers(
            update_window_dims=info.struct_ints(dn, "update_window_dims"),
            inserted_window_dims=info.struct_ints(dn, "inserted_window_dims"),
            scatter_dims_to_operand_dims=info.struct_ints(
                dn, "scattered_dims_to_operand_dims"
            ),
            operand_batching_dims=info.struct_ints(dn, "input_batching_dims"),
            scatter_indices_batching_dims=info.struct_ints(
                dn, "scatter_indices_batching_dims"
            ),
        )
        ivd = info.struct_int(dn, "index_vector_dim")
        idx = jnp.moveaxis(xs[1], ivd, -1) if ivd < xs[1].ndim else xs[1][..., None]
        fn = {
            "stablehlo.add": lax.scatter_add,
            "stablehlo.maximum": lax.scatter_max,
            None: lax.scatter,
        }[info.combiner]
        return _np_out(
            fn(xs[0], idx, xs[2], nums, mode=lax.GatherScatterMode.FILL_OR_DROP)
        )

    ev["stablehlo.scatter"] = scatter

    def sort(info: OpInfo, xs: Sequence[Array]) -> list[Array]:
        dim = info.int_attr("dimension")
        order = np.argsort(xs[0], axis=dim, kind="stable")
        return [np.take_along_axis(x, order, axis=dim) for x in xs]

    ev["stablehlo.sort"] = sort

    def top_k(info: OpInfo, xs: Sequence[Array]) -> list[Array]:
        values, indices = lax.top_k(xs[0], info.int_attr("k"))
        return _np_out(values, indices)

    ev["chlo.top_k"] = top_k

    def scan(info: OpInfo, xs: Sequence[Array]) -> list[Array]:
        """outputs[i] = init (+) x[0] (+) ... (+) x[i] along `dimension`
        (from the end when reversed); the carry is the last output."""
        dim = info.int_attr("dimension")
        reverse = info.bool_attr("is_reverse")
        combine = _COMBINE[info.combiner or ""]
        x = np.flip(xs[0], dim) if reverse else xs[0]
        acc = np.expand_dims(xs[1], dim)
        outs = []
        for k in range(x.shape[dim]):
            acc = combine(acc, np.take(x, [k], axis=dim))
            outs.append(acc)
        out = np.concatenate(outs, axis=dim)
        out = np.flip(out, dim) if reverse else out
        return [out.astype(xs[0].dtype), np.squeeze(acc, dim).astype(xs[0].dtype)]

    ev["chlo.scan"] = scan

    def convolution(info: OpInfo, xs: Sequence[Array]) -> list[Array]:
        dn = "dimension_numbers"
        rank = len(info.operand_shapes[0])
        s = rank - 2
        lhs_spec = (
            info.struct_int(dn, "input_batch_dimension"),
            info.struct_int(dn, "input_feature_dimension"),
            *info.struct_ints(dn, "input_spatial_dimensions"),
        )
        rhs_spec = (
            info.struct_int(dn, "kernel_output_feature_dimension"),
            info.struct_int(dn, "kernel_input_feature_dimension"),
            *info.struct_ints(dn, "kernel_spatial_dimensions"),
        )
        out_spec = (
            info.struct_int(dn, "output_batch_dimension"),
            info.struct_int(dn, "output_feature_dimension"),
            *info.struct_ints(dn, "output_spatial_dimensions"),
        )
        pad = info.int_array("padding", [0] * (2 * s))
        out = lax.conv_general_dilated(
            jnp.asarray(xs[0]),
            jnp.asarray(xs[1]),
            info.int_array("window_strides", [1] * s),
            [(pad[2 * d], pad[2 * d + 1]) for d in range(s)],
            lhs_dilation=info.int_array("lhs_dilation", [1] * s),
            rhs_dilation=info.int_array("rhs_dilation", [1] * s),
            dimension_numbers=lax.ConvDimensionNumbers(lhs_spec, rhs_spec, out_spec),
            feature_group_count=info.int_attr("feature_group_count", 1),
            batch_group_count=info.int_attr("batch_group_count", 1),
            precision=lax.Precision.HIGHEST,
        )
        return _np_out(out)

    ev["stablehlo.convolution"] = convolution

    def fft(info: OpInfo, xs: Sequence[Array]) -> list[Array]:
        kind = info.str_attr("fft_type").upper()
        lengths = info.int_array("fft_length")
        axes = tuple(range(xs[0].ndim - len(lengths), xs[0].ndim))
        fns: dict[str, Callable[..., Array]] = {
            "FFT": np.fft.fftn,
            "IFFT": np.fft.ifftn,
            "RFFT": np.fft.rfftn,
            "IRFFT": np.fft.irfftn,
        }
        return _np_out(fns[kind](xs[0], s=lengths, axes=axes))

    ev["stablehlo.fft"] = fft
    ev["stablehlo.cholesky"] = lambda info, xs: _np_out(jnp.linalg.cholesky(xs[0]))

    def triangular_solve(info: OpInfo, xs: Sequence[Array]) -> list[Array]:
        trans = {"NO_TRANSPOSE": 0, "TRANSPOSE": 1, "ADJOINT": 2}[
            info.str_attr("transpose_a", "NO_TRANSPOSE").upper()
        ]
        return _np_out(
            lax.linalg.triangular_solve(
                xs[0],
                xs[1],
                left_side=info.bool_attr("left_side"),
                lower=info.bool_attr("lower"),
                transpose_a=trans > 0,
                conjugate_a=trans == 2,
                unit_diagonal=info.bool_attr("unit_diagonal"),
            )
        )

    ev["stablehlo.triangular_solve"] = triangular_solve

    def rng_bit_generator(info: OpInfo, xs: Sequence[Array]) -> list[Array]:
        state, bits = lax.rng_bit_generator(
            xs[0],
            info.result_shapes[1],
            dtype=np_dtype(info.result_dtypes[1]),
            algorithm=lax.RandomAlgorithm.RNG_DEFAULT,
        )
        return _np_out(state, bits)

    ev["stablehlo.rng_bit_generator"] = rng_bit_generator
    ev.update(_more_elementwise())
    ev.update(_collectives())
    ev["stablehlo.custom_call"] = _custom_call
    ev["stablehlo.select_and_scatter"] = _select_and_scatter
    return ev


def _more_elementwise() -> dict[str, Evaluator]:
    """chlo's math functions and StableHLO's bit, rounding and complex ops."""
    import jax
    from jax import lax

    special = jax.scipy.special

    def polygamma(n: Array, x: Array) -> Array:
        """chlo's order n is a float: NaN unless a whole number."""
        whole = np.floor(n)
        value = np.asarray(special.polygamma(whole.astype(np.int32), x))
        return np.where(whole == n, value, np.nan).astype(x.dtype)

    unary: dict[str, Callable[[Array], object]] = {
        "chlo.acos": np.arccos,
        "chlo.acosh": np.arccosh,
        "chlo.asin": np.arcsin,
        "chlo.asinh": np.arcsinh,
        "chlo.atan": np.arctan,
        "chlo.atanh": np.arctanh,
        "chlo.bessel_i1e": special.i1e,
        "chlo.conj": np.conj,
        "chlo.cosh": np.cosh,
        "chlo.digamma": special.digamma,
        "chlo.erf_inv": special.erfinv,
        "chlo.erfc": special.erfc,
        "chlo.is_inf": np.isinf,
        "chlo.is_neg_inf": np.isneginf,
        "chlo.is_pos_inf": np.isposinf,
        "chlo.lgamma": lax.lgamma,
        "chlo.sinh": np.sinh,
        "chlo.tan": np.tan,
        "stablehlo.count_leading_zeros": lax.clz,
        "stablehlo.popcnt": lax.population_count,
        "stablehlo.round_nearest_afz": lambda x: lax.round(
            x, lax.RoundingMethod.AWAY_FROM_ZERO
        ),
    }
    binary: dict[str, Callable[[Array, Array], object]] = {
        "chlo.next_after": np.nextafter,
        "chlo.polygamma": polygamma,
        "chlo.zeta": special.zeta,  # Hurwitz zeta (s, q)
        "stablehlo.shift_left": lax.shift_left,
        "stablehlo.shift_right_arithmetic": lax.shift_right_arithmetic,
        "stablehlo.shift_right_logical": lax.shift_right_logical,
    }
    ev = {name: _unary(fn) for name, fn in unary.items()}
    ev.update({name: _binary(fn) for name, fn in binary.items()})
    ev["stablehlo.reduce_precision"] = lambda info, xs: _np_out(
        lax.reduce_precision(
            xs[0],
            exponent_bits=info.int_attr("exponent_bits"),
            mantissa_bits=info.int_attr("mantissa_bits"),
        )
    )
    return ev


# Collectives act on the operands of a group of replicas. The validator looks
# at one device, replica 0, holding the case's operand x; replica r of the
# simulated group holds `_on_replica(x, r)`, an elementwise, injective function
# of x. So "device d holds only its block of x" fixes the same block of every
# replica's operand, which is what sharding a dim over a mesh axis the
# collective does not communicate over means (the other replicas differ from
# the checked device only in that axis).


def _on_replica(x: Array, replica: int) -> Array:
    if x.dtype == np.bool_:
        return x if replica % 2 == 0 else ~x
    return (x * (replica + 1) + replica).astype(x.dtype)


def _int_rows(info: OpInfo, name: str) -> list[tuple[int, ...]]:
    """A 2-D integer attribute (replica groups, source-target pairs) as rows."""
    value = info.attr(name)
    if isinstance(value, tuple | list):
        return [tuple(int(v) for v in row) for row in value]
    flat = info.int_array(name)
    shape = getattr(value, "shape", (1, len(flat)))
    cols = int(shape[-1])
    return [flat[i : i + cols] for i in range(0, len(flat), cols)]


def _group_of_device(info: OpInfo) -> tuple[int, ...]:
    for group in _int_rows(info, "replica_groups"):
        if 0 in group:
            return group
    raise ValueError(f"replica 0 is in no replica group of '{info.name}'")


def _combine_group(info: OpInfo, x: Array, group: Sequence[int]) -> Array:
    combine = _COMBINE[info.combiner or "stablehlo.add"]
    total = _on_replica(x, group[0])
    for r in group[1:]:
        total = np.asarray(combine(total, _on_replica(x, r))).astype(x.dtype)
    return total


def _collectives() -> dict[str, Evaluator]:
    def all_reduce(info: OpInfo, xs: Sequence[Array]) -> list[Array]:
        group = _group_of_device(info)
        return [_combine_group(info, x, group) for x in xs]

    def all_gather(info: OpInfo, xs: Sequence[Array]) -> list[Array]:
        group = _group_of_device(info)
        dim = info.int_attr("all_gather_dim")
        return [
            np.concatenate([_on_replica(x, r) for r in group], axis=dim) for x in xs
        ]

    def reduce_scatter(info: OpInfo, xs: Sequence[Array]) -> list[Array]:
        group = _group_of_device(info)
        total = _combine_group(info, xs[0], group)
        chunks = np.split(total, len(group), axis=info.int_attr("scatter_dimension"))
        return [chunks[group.index(0)]]

    def all_to_all(info: OpInfo, xs: Sequence[Array]) -> list[Array]:
        group = _group_of_device(info)
        split = info.int_attr("split_dimension")
        received = [
            np.split(_on_replica(xs[0], r), len(group), axis=split)[group.index(0)]
            for r in group
        ]
        return [np.concatenate(received, axis=info.int_attr("concat_dimension"))]

    def collective_permute(info: OpInfo, xs: Sequence[Array]) -> list[Array]:
        sources = [s for s, t in _int_rows(info, "source_target_pairs") if t == 0]
        if not sources:
            return [np.zeros_like(xs[0])]
        return [_on_replica(xs[0], sources[0])]

    def collective_broadcast(info: OpInfo, xs: Sequence[Array]) -> list[Array]:
        return [_on_replica(xs[0], _group_of_device(info)[0])]

    return {
        "stablehlo.all_gather": all_gather,
        "stablehlo.all_reduce": all_reduce,
        "stablehlo.all_to_all": all_to_all,
        "stablehlo.collective_broadcast": collective_broadcast,
        "stablehlo.collective_permute": collective_permute,
        "stablehlo.reduce_scatter": reduce_scatter,
    }


# Custom call targets the validator can evaluate on CPU.
_IDENTITY_TARGETS = frozenset(
    {"LayoutConstraint", "MoveToDevice", "MoveToHost", "annotate_device_placement"}
)

_TPU_BLOCK_PRIMITIVE = (
    "TPU-internal block primitive of XLA's linear algebra expanders: no CPU "
    "implementation or public semantics to evaluate"
)
_TPU_APPROX_TOP_K = (
    "TPU's approximate top-k: its result depends on the TPU algorithm and "
    "recall target, and it has no CPU implementation to evaluate"
)

# Rules the validator cannot check, and why (the ledger lists them).
NOT_EVALUABLE: Mapping[str, str] = MappingProxyType(
    {
        "stablehlo.custom_call @ApproxTopK": _TPU_APPROX_TOP_K,
        "stablehlo.custom_call @Cholesky": _TPU_BLOCK_PRIMITIVE,
        "stablehlo.custom_call @CompactWyHelper": _TPU_BLOCK_PRIMITIVE,
        "stablehlo.custom_call @InvertDiagBlocksLowerTriangular": (
            _TPU_BLOCK_PRIMITIVE
        ),
        "stablehlo.custom_call @InvertDiagBlocksUpperTriangular": (
            _TPU_BLOCK_PRIMITIVE
        ),
        "stablehlo.custom_call @PartialReduce": _TPU_APPROX_TOP_K,
        "stablehlo.custom_call @QrDecompositionBlock": _TPU_BLOCK_PRIMITIVE,
    }
)


def _custom_call(info: OpInfo, xs: Sequence[Array]) -> list[Array]:
    import jax
    import jax.numpy as jnp
    from jax import lax

    target = info.str_attr("call_target_name")
    if target in _IDENTITY_TARGETS:
        return _np_out(xs[0])
    if target == "mhlo.erf":
        return _np_out(jax.scipy.special.erf(xs[0]))
    if target == "X64Combine":  # (low half, high half) -> 64 bits
        low, high = (x.astype(np.uint64) for x in xs)
        return _np_out(low | (high << np.uint64(32)))
    if target == "mhlo.topk":
        values, indices = lax.top_k(xs[0], info.result_shapes[0][-1])
        return _np_out(values, indices)
    if target == "Eigh":  # (eigenvectors, eigenvalues)
        vectors, values = lax.linalg.eigh(jnp.asarray(xs[0]))
        return _np_out(vectors, values)
    if target == "Qr":  # Householder form: (reflectors and R, taus), like geqrf
        transposed, taus = np.linalg.qr(xs[0], mode="raw")
        reflectors = np.swapaxes(transposed, -1, -2).astype(xs[0].dtype)
        return _np_out(reflectors, taus.astype(xs[0].dtype))
    raise ValueError(f"no evaluator for custom call @{target}")


def _select_and_scatter(info: OpInfo, xs: Sequence[Array]) -> list[Array]:
    """JAX's max-pooling gradient: select GE, scatter add (what JAX emits)."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    operand, source, init = xs
    rank = operand.ndim
    pad = info.int_array("padding", [0] * (2 * rank))

    def pool(x: jax.Array) -> jax.Array:
        pooled: jax.Array = lax.reduce_window(
            x,
            -np.inf,
            lax.max,
            info.int_array("window_dimensions"),
            info.int_array("window_strides", [1] * rank),
            [(pad[2 * d], pad[2 * d + 1]) for d in range(rank)],
        )
        return pooled

    _, pullback = jax.vjp(pool, jnp.asarray(operand))
    (scattered,) = pullback(jnp.asarray(source))
    return _np_out(np.asarray(scattered) + init)


_EVALUATORS: dict[str, Evaluator] | None = None


def evaluators() -> Mapping[str, Evaluator]:
    """Op name -> evaluator (built once; imports jax)."""
    global _EVALUATORS
    if _EVALUATORS is None:
        _EVALUATORS = _evaluators()
    return _EVALUATORS


# ---------------------------------------------------------------------------
# The standard cases: every rule function of the table on small shapes.


def _op(
    name: str,
    operands: Sequence[tuple[Sequence[int], str]],
    results: Sequence[tuple[Sequence[int], str]],
    combiner: str | None = None,
    **attrs: object,
) -> OpInfo:
    return OpInfo(
        name,
        tuple(tuple(s) for s, _ in operands),
        tuple(tuple(s) for s, _ in results),
        tuple(d for _, d in operands),
        tuple(d for _, d in results),
        MappingProxyType(dict(attrs)),
        combiner=combiner,
    )


def _indices(bound: int, operand: int = 1) -> InputMaker:
    """Default inputs, with operand `operand` integer indices in [0, bound)."""

    def make(info: OpInfo, rng: np.random.Generator) -> list[Array]:
        xs = default_inputs(info, rng)
        xs[operand] = rng.integers(0, bound, info.operand_shapes[operand]).astype(
            np_dtype(info.operand_dtypes[operand])
        )
        return xs

    return make


def _spd(info: OpInfo, rng: np.random.Generator) -> list[Array]:
    shape = info.operand_shapes[0]
    a = rng.standard_normal(shape).astype(np.float32)
    eye = np.eye(shape[-1], dtype=np.float32)
    return [a @ np.swapaxes(a, -1, -2) + shape[-1] * eye]


def _triangular(info: OpInfo, rng: np.random.Generator) -> list[Array]:
    a = np.tril(rng.standard_normal(info.operand_shapes[0])).astype(np.float32)
    n = info.operand_shapes[0][-1]
    a = a + 4 * np.eye(n, dtype=np.float32)
    return [a, rng.standard_normal(info.operand_shapes[1]).astype(np.float32)]


def _distinct(info: OpInfo, rng: np.random.Generator) -> list[Array]:
    size = int(np.prod(info.operand_shapes[0]))
    x = rng.permutation(size).astype(np.float32).reshape(info.operand_shapes[0])
    return [x, *default_inputs(info, rng)[1:]]


def _scalar_index(value: int) -> Callable[[InputMaker | None], InputMaker]:
    def wrap(base: InputMaker | None) -> InputMaker:
        def make(info: OpInfo, rng: np.random.Generator) -> list[Array]:
            xs = (base or default_inputs)(info, rng)
            return [x if x.ndim else np.asarray(value, dtype=x.dtype) for x in xs]

        return make

    return wrap


F = "f32"
I32 = "i32"


def _gdn(**kw: object) -> Mapping[str, object]:
    base: dict[str, object] = {
        "offset_dims": (),
        "collapsed_slice_dims": (),
        "operand_batching_dims": (),
        "start_indices_batching_dims": (),
        "start_index_map": (),
        "index_vector_dim": 0,
    }
    base.update(kw)
    return MappingProxyType(base)


def _sdn(**kw: object) -> Mapping[str, object]:
    base: dict[str, object] = {
        "update_window_dims": (),
        "inserted_window_dims": (),
        "input_batching_dims": (),
        "scatter_indices_batching_dims": (),
        "scattered_dims_to_operand_dims": (),
        "index_vector_dim": 0,
    }
    base.update(kw)
    return MappingProxyType(base)


def _cdn(lhs: str, rhs: str, out: str) -> Mapping[str, object]:
    """Conv dimension numbers from layout strings like 'b01f', '01io', 'b01f'."""
    return MappingProxyType(
        {
            "input_batch_dimension": lhs.index("b"),
            "input_feature_dimension": lhs.index("f"),
            "input_spatial_dimensions": tuple(lhs.index(c) for c in "01" if c in lhs),
            "kernel_input_feature_dimension": rhs.index("i"),
            "kernel_output_feature_dimension": rhs.index("o"),
            "kernel_spatial_dimensions": tuple(rhs.index(c) for c in "01" if c in rhs),
            "output_batch_dimension": out.index("b"),
            "output_feature_dimension": out.index("f"),
            "output_spatial_dimensions": tuple(out.index(c) for c in "01" if c in out),
        }
    )


def _ddn(
    lb: Sequence[int], rb: Sequence[int], lc: Sequence[int], rc: Sequence[int]
) -> Mapping[str, object]:
    return MappingProxyType(
        {
            "lhs_batching_dimensions": tuple(lb),
            "rhs_batching_dimensions": tuple(rb),
            "lhs_contracting_dimensions": tuple(lc),
            "rhs_contracting_dimensions": tuple(rc),
        }
    )


UNARY = (
    "abs",
    "cbrt",
    "ceil",
    "cosine",
    "exponential",
    "exponential_minus_one",
    "floor",
    "log",
    "log_plus_one",
    "logistic",
    "negate",
    "round_nearest_even",
    "rsqrt",
    "sign",
    "sine",
    "sqrt",
    "tan",
    "tanh",
)
BINARY = (
    "add",
    "atan2",
    "divide",
    "maximum",
    "minimum",
    "multiply",
    "power",
    "remainder",
    "subtract",
)


def standard_cases() -> list[Case]:
    """One or more small cases per rule in the table (the validator's workload)."""
    cases: list[Case] = []

    def add(name: str, info: OpInfo, inputs: InputMaker | None = None) -> None:
        cases.append(Case(name, info, inputs))

    x = ((4, 6), F)
    for u in UNARY:
        add(u, _op(f"stablehlo.{u}", [x], [x]))
    for b in BINARY:
        add(b, _op(f"stablehlo.{b}", [x, x], [x]))
    for b in ("and", "or", "xor", "not"):
        add(
            b,
            _op(
                f"stablehlo.{b}",
                [((4, 6), "i1")] * (1 if b == "not" else 2),
                [((4, 6), "i1")],
            ),
        )
    add(
        "compare",
        _op("stablehlo.compare", [x, x], [((4, 6), "i1")], comparison_direction="LT"),
    )
    add("complex", _op("stablehlo.complex", [x, x], [((4, 6), "complex<f32>")]))
    add("real", _op("stablehlo.real", [((4, 6), "complex<f32>")], [x]))
    add("convert", _op("stablehlo.convert", [x], [((4, 6), I32)]))
    add("is_finite", _op("stablehlo.is_finite", [x], [((4, 6), "i1")]))
    add("select scalar pred", _op("stablehlo.select", [((), "i1"), x, x], [x]))
    add("select", _op("stablehlo.select", [((4, 6), "i1"), x, x], [x]))
    add("clamp scalar bounds", _op("stablehlo.clamp", [((), F), x, ((), F)], [x]))
    add("chlo.erf", _op("chlo.erf", [x], [x]))
    add("chlo.square", _op("chlo.square", [x], [x]))
    add("sharding_constraint", _op("sdy.sharding_constraint", [x], [x]))
    add(
        "bitcast_convert widen",
        _op("stablehlo.bitcast_convert", [((4, 6, 2), "f16")], [x]),
    )
    add(
        "bitcast_convert narrow",
        _op("stablehlo.bitcast_convert", [x], [((4, 6, 2), "f16")]),
    )
    add(
        "broadcast_in_dim",
        _op(
            "stablehlo.broadcast_in_dim",
            [((6,), F)],
            [((4, 6), F)],
            broadcast_dimensions=(1,),
        ),
    )
    add(
        "broadcast_in_dim expand 1",
        _op(
            "stablehlo.broadcast_in_dim",
            [((1, 6), F)],
            [((4, 6), F)],
            broadcast_dimensions=(0, 1),
        ),
    )
    add("reshape merge", _op("stablehlo.reshape", [((4, 6), F)], [((24,), F)]))
    add("reshape split", _op("stablehlo.reshape", [((24,), F)], [((2, 4, 3), F)]))
    add("reshape regroup", _op("stablehlo.reshape", [((4, 6), F)], [((2, 12), F)]))
    add("reshape coprime", _op("stablehlo.reshape", [((6, 4), F)], [((4, 6), F)]))
    add(
        "reshape unit dims",
        _op("stablehlo.reshape", [((4, 1, 6), F)], [((1, 4, 6), F)]),
    )
    add(
        "transpose",
        _op(
            "stablehlo.transpose",
            [((2, 4, 6), F)],
            [((6, 2, 4), F)],
            permutation=(2, 0, 1),
        ),
    )
    add("reverse", _op("stablehlo.reverse", [x], [x], dimensions=(1,)))
    add(
        "dot_general matmul",
        _op(
            "stablehlo.dot_general",
            [((4, 6), F), ((6, 8), F)],
            [((4, 8), F)],
            dot_dimension_numbers=_ddn((), (), (1,), (0,)),
        ),
    )
    add(
        "dot_general batched",
        _op(
            "stablehlo.dot_general",
            [((2, 4, 6), F), ((2, 8, 6), F)],
            [((2, 4, 8), F)],
            dot_dimension_numbers=_ddn((0,), (0,), (2,), (2,)),
        ),
    )
    add("dot", _op("stablehlo.dot", [((4, 6), F), ((6, 8), F)], [((4, 8), F)]))
    add(
        "reduce sum",
        _op(
            "stablehlo.reduce",
            [((4, 6, 2), F), ((), F)],
            [((6,), F)],
            "stablehlo.add",
            dimensions=(0, 2),
        ),
    )
    add(
        "reduce max",
        _op(
            "stablehlo.reduce",
            [((4, 6), F), ((), F)],
            [((4,), F)],
            "stablehlo.maximum",
            dimensions=(1,),
        ),
    )
    add(
        "reduce_window pool",
        _op(
            "stablehlo.reduce_window",
            [((2, 8, 6), F), ((), F)],
            [((2, 4, 6), F)],
            "stablehlo.maximum",
            window_dimensions=(1, 2, 1),
            window_strides=(1, 2, 1),
        ),
        _reduce_window_inputs(-np.inf),
    )
    add(
        "reduce_window cumsum",
        _op(
            "stablehlo.reduce_window",
            [((8, 6), F), ((), F)],
            [((8, 6), F)],
            "stablehlo.add",
            window_dimensions=(8, 1),
            padding=(7, 0, 0, 0),
        ),
        _reduce_window_inputs(0.0),
    )
    add(
        "reduce_window base dilation",
        _op(
            "stablehlo.reduce_window",
            [((4, 6), F), ((), F)],
            [((7, 6), F)],
            "stablehlo.add",
            window_dimensions=(1, 1),
            base_dilations=(2, 1),
        ),
        _reduce_window_inputs(0.0),
    )
    add(
        "concatenate",
        _op(
            "stablehlo.concatenate",
            [((4, 6), F), ((4, 2), F)],
            [((4, 8), F)],
            dimension=1,
        ),
    )
    add(
        "pad",
        _op(
            "stablehlo.pad",
            [((4, 6), F), ((), F)],
            [((4, 8), F)],
            edge_padding_low=(0, 1),
            edge_padding_high=(0, 1),
            interior_padding=(0, 0),
        ),
    )
    add(
        "pad shift",
        _op(
            "stablehlo.pad",
            [((4, 6), F), ((), F)],
            [((4, 6), F)],
            edge_padding_low=(0, 1),
            edge_padding_high=(0, -1),
            interior_padding=(0, 0),
        ),
    )
    add(
        "pad interior",
        _op(
            "stablehlo.pad",
            [((4, 6), F), ((), F)],
            [((7, 6), F)],
            edge_padding_low=(0, 0),
            edge_padding_high=(0, 0),
            interior_padding=(1, 0),
        ),
    )
    add(
        "slice",
        _op(
            "stablehlo.slice",
            [x],
            [((2, 6), F)],
            start_indices=(1, 0),
            limit_indices=(3, 6),
            strides=(1, 1),
        ),
    )
    add(
        "dynamic_slice",
        _op(
            "stablehlo.dynamic_slice",
            [x, ((), I32), ((), I32)],
            [((2, 6), F)],
            slice_sizes=(2, 6),
        ),
        _scalar_index(1)(None),
    )
    add(
        "dynamic_update_slice",
        _op(
            "stablehlo.dynamic_update_slice",
            [x, ((2, 6), F), ((), I32), ((), I32)],
            [x],
        ),
        _scalar_index(1)(None),
    )
    add(
        "gather embedding",
        _op(
            "stablehlo.gather",
            [((10, 6), F), ((4, 3, 1), I32)],
            [((4, 3, 6), F)],
            dimension_numbers=_gdn(
                offset_dims=(2,),
                collapsed_slice_dims=(0,),
                start_index_map=(0,),
                index_vector_dim=2,
            ),
            slice_sizes=(1, 6),
        ),
        _indices(10),
    )
    add(
        "gather batched",
        _op(
            "stablehlo.gather",
            [((4, 10, 6), F), ((4, 3, 1), I32)],
            [((4, 3, 6), F)],
            dimension_numbers=_gdn(
                offset_dims=(2,),
                collapsed_slice_dims=(1,),
                operand_batching_dims=(0,),
                start_indices_batching_dims=(0,),
                start_index_map=(1,),
                index_vector_dim=2,
            ),
            slice_sizes=(1, 1, 6),
        ),
        _indices(10),
    )
    add(
        "gather sliced window",
        _op(
            "stablehlo.gather",
            [((10, 6), F), ((4, 2), I32)],
            [((4, 2, 6), F)],
            dimension_numbers=_gdn(
                offset_dims=(1, 2), start_index_map=(0, 1), index_vector_dim=1
            ),
            slice_sizes=(2, 6),
        ),
        _indices(8),
    )
    add(
        "scatter add",
        _op(
            "stablehlo.scatter",
            [((10, 6), F), ((4, 1), I32), ((4, 6), F)],
            [((10, 6), F)],
            "stablehlo.add",
            scatter_dimension_numbers=_sdn(
                update_window_dims=(1,),
                inserted_window_dims=(0,),
                scattered_dims_to_operand_dims=(0,),
                index_vector_dim=1,
            ),
        ),
        _indices(10),
    )
    add(
        "scatter replace",
        _op(
            "stablehlo.scatter",
            [((10, 6), F), ((4, 1), I32), ((4, 6), F)],
            [((10, 6), F)],
            None,
            scatter_dimension_numbers=_sdn(
                update_window_dims=(1,),
                inserted_window_dims=(0,),
                scattered_dims_to_operand_dims=(0,),
                index_vector_dim=1,
            ),
        ),
        _indices(10),
    )
    add(
        "scatter batched",
        _op(
            "stablehlo.scatter",
            [((4, 10), F), ((4, 2, 1), I32), ((4, 2), F)],
            [((4, 10), F)],
            "stablehlo.add",
            scatter_dimension_numbers=_sdn(
                inserted_window_dims=(1,),
                input_batching_dims=(0,),
                scatter_indices_batching_dims=(0,),
                scattered_dims_to_operand_dims=(1,),
                index_vector_dim=2,
            ),
        ),
        _indices(10),
    )
    add("sort", _op("stablehlo.sort", [x], [x], dimension=1), _distinct)
    add(
        "sort 1-d",
        _op("stablehlo.sort", [((6,), F)], [((6,), F)], dimension=0),
        _distinct,
    )
    add(
        "chlo.top_k",
        _op("chlo.top_k", [x], [((4, 2), F), ((4, 2), I32)], k=2),
        _distinct,
    )
    for reverse in (False, True):
        add(
            "chlo.scan" + (" reversed" if reverse else ""),
            _op(
                "chlo.scan",
                [x, ((6,), F)],
                [x, ((6,), F)],
                "stablehlo.add",
                dimension=0,
                is_associative=True,
                is_reverse=reverse,
            ),
        )
    add(
        "convolution",
        _op(
            "stablehlo.convolution",
            [((2, 8, 8, 4), F), ((3, 3, 4, 6), F)],
            [((2, 8, 8, 6), F)],
            dimension_numbers=_cdn("b01f", "01io", "b01f"),
            padding=(1, 1, 1, 1),
        ),
    )
    add(
        "convolution feature groups",
        _op(
            "stablehlo.convolution",
            [((2, 6, 6, 4), F), ((3, 3, 2, 6), F)],
            [((2, 4, 4, 6), F)],
            dimension_numbers=_cdn("b01f", "01io", "b01f"),
            feature_group_count=2,
        ),
    )
    add(
        "convolution batch groups",
        _op(
            "stablehlo.convolution",
            [((4, 6, 6, 3), F), ((3, 3, 3, 4), F)],
            [((2, 4, 4, 4), F)],
            dimension_numbers=_cdn("b01f", "01io", "b01f"),
            batch_group_count=2,
        ),
    )
    add(
        "convolution window split",
        _op(
            "stablehlo.convolution",
            [((2, 8, 8, 4), F), ((4, 4, 4, 6), F)],
            [((2, 2, 2, 6), F)],
            dimension_numbers=_cdn("b01f", "01io", "b01f"),
            window_strides=(4, 4),
        ),
    )
    add(
        "fft",
        _op(
            "stablehlo.fft",
            [((4, 6), "complex<f32>")],
            [((4, 6), "complex<f32>")],
            fft_type="FFT",
            fft_length=(6,),
        ),
    )
    add(
        "rfft",
        _op(
            "stablehlo.fft",
            [x],
            [((4, 4), "complex<f32>")],
            fft_type="RFFT",
            fft_length=(6,),
        ),
    )
    add(
        "cholesky",
        _op("stablehlo.cholesky", [((2, 4, 4), F)], [((2, 4, 4), F)], lower=True),
        _spd,
    )
    add(
        "triangular_solve left",
        _op(
            "stablehlo.triangular_solve",
            [((2, 4, 4), F), ((2, 4, 6), F)],
            [((2, 4, 6), F)],
            left_side=True,
            lower=True,
            transpose_a="NO_TRANSPOSE",
        ),
        _triangular,
    )
    add(
        "triangular_solve right",
        _op(
            "stablehlo.triangular_solve",
            [((2, 4, 4), F), ((2, 6, 4), F)],
            [((2, 6, 4), F)],
            left_side=False,
            lower=True,
            transpose_a="TRANSPOSE",
        ),
        _triangular,
    )
    add(
        "rng_bit_generator",
        _op(
            "stablehlo.rng_bit_generator",
            [((4,), "ui32")],
            [((4,), "ui32"), ((4, 6), "ui32")],
            rng_algorithm="DEFAULT",
        ),
    )
    _add_more_elementwise(add)
    _add_collectives(add)
    _add_custom_calls(add)
    _add_select_and_scatter(add)
    return cases


Adder = Callable[[str, OpInfo, InputMaker | None], None]

# chlo's unary math ops and the inputs (a range inside their domain) to check them on.
CHLO_UNARY: Mapping[str, tuple[float, float]] = MappingProxyType(
    {
        "acos": (-0.9, 0.9),
        "acosh": (1.1, 3.0),
        "asin": (-0.9, 0.9),
        "asinh": (-2.0, 2.0),
        "atan": (-2.0, 2.0),
        "atanh": (-0.9, 0.9),
        "bessel_i1e": (-3.0, 3.0),
        "cosh": (-2.0, 2.0),
        "digamma": (0.5, 3.0),
        "erf_inv": (-0.9, 0.9),
        "erfc": (-2.0, 2.0),
        "lgamma": (0.5, 4.0),
        "sinh": (-2.0, 2.0),
        "tan": (-1.0, 1.0),
    }
)


def _add_more_elementwise(add: Adder) -> None:
    x = ((4, 6), F)
    c64 = ((4, 6), "complex<f32>")
    pred = ((4, 6), "i1")
    i32 = ((4, 6), I32)
    for u, (low, high) in CHLO_UNARY.items():
        add(f"chlo.{u}", _op(f"chlo.{u}", [x], [x]), _uniform(low, high))
    for u in ("is_inf", "is_neg_inf", "is_pos_inf"):
        add(f"chlo.{u}", _op(f"chlo.{u}", [x], [pred]), _with_infs)
    add("chlo.conj", _op("chlo.conj", [c64], [c64]), None)
    add("chlo.next_after", _op("chlo.next_after", [x, x], [x]), None)
    add("chlo.polygamma", _op("chlo.polygamma", [x, x], [x]), _polygamma_inputs)
    add("chlo.zeta", _op("chlo.zeta", [x, x], [x]), _zeta_inputs)
    add("imag", _op("stablehlo.imag", [c64], [x]), None)
    for u in ("popcnt", "count_leading_zeros"):
        add(u, _op(f"stablehlo.{u}", [i32], [i32]), _wide_ints)
    for b in ("shift_left", "shift_right_arithmetic", "shift_right_logical"):
        add(b, _op(f"stablehlo.{b}", [i32, i32], [i32]), _wide_ints)
    add("round_nearest_afz", _op("stablehlo.round_nearest_afz", [x], [x]), _halves)
    add(
        "reduce_precision",
        _op("stablehlo.reduce_precision", [x], [x], exponent_bits=5, mantissa_bits=2),
        _uniform(-50.0, 50.0),
    )


def _add_collectives(add: Adder) -> None:
    x = ((4, 6), F)
    x3 = ((4, 6, 6), F)
    add(
        "all_reduce",
        _op(
            "stablehlo.all_reduce",
            [x],
            [x],
            "stablehlo.add",
            replica_groups=((0, 1), (2, 3)),
        ),
        None,
    )
    add(
        "collective_permute",
        _op(
            "stablehlo.collective_permute",
            [x],
            [x],
            source_target_pairs=((0, 1), (1, 2), (2, 0)),
        ),
        None,
    )
    add(
        "collective_broadcast",
        _op("stablehlo.collective_broadcast", [x], [x], replica_groups=((1, 0),)),
        None,
    )
    add(
        "all_gather",
        _op(
            "stablehlo.all_gather",
            [((4, 3, 6), F)],
            [x3],
            all_gather_dim=1,
            replica_groups=((0, 1),),
        ),
        None,
    )
    add(
        "reduce_scatter",
        _op(
            "stablehlo.reduce_scatter",
            [x3],
            [((4, 3, 6), F)],
            "stablehlo.add",
            scatter_dimension=1,
            replica_groups=((1, 0),),
        ),
        None,
    )
    add(
        "all_to_all",
        _op(
            "stablehlo.all_to_all",
            [x3],
            [((4, 3, 12), F)],
            split_dimension=1,
            concat_dimension=2,
            split_count=2,
            replica_groups=((0, 1),),
        ),
        None,
    )
    add(
        "all_to_all same dim",
        _op(
            "stablehlo.all_to_all",
            [x],
            [x],
            split_dimension=1,
            concat_dimension=1,
            split_count=2,
            replica_groups=((0, 1),),
        ),
        None,
    )


def _add_custom_calls(add: Adder) -> None:
    x = ((4, 6), F)

    def call(
        target: str,
        operands: Sequence[tuple[Sequence[int], str]],
        results: Sequence[tuple[Sequence[int], str]],
    ) -> OpInfo:
        return _op("stablehlo.custom_call", operands, results, call_target_name=target)

    for target in ("mhlo.erf", *sorted(_IDENTITY_TARGETS)):
        add(f"custom_call @{target}", call(target, [x], [x]), None)
    add(
        "custom_call @X64Combine",
        call("X64Combine", [((4, 6), "ui32")] * 2, [((4, 6), "ui64")]),
        None,
    )
    add(
        "custom_call @mhlo.topk",
        call("mhlo.topk", [x], [((4, 2), F), ((4, 2), I32)]),
        _distinct,
    )
    matrices = ((2, 4, 4), F)
    add(
        "custom_call @Eigh",
        call("Eigh", [matrices], [matrices, ((2, 4), F)]),
        _symmetric,
    )
    add("custom_call @Qr", call("Qr", [matrices], [matrices, ((2, 4), F)]), None)


def _add_select_and_scatter(add: Adder) -> None:
    add(
        "select_and_scatter pool",
        _op(
            "stablehlo.select_and_scatter",
            [((2, 8, 6), F), ((2, 4, 6), F), ((), F)],
            [((2, 8, 6), F)],
            window_dimensions=(1, 2, 1),
            window_strides=(1, 2, 1),
        ),
        _distinct,
    )
    add(
        "select_and_scatter overlapping",
        _op(
            "stablehlo.select_and_scatter",
            [((8, 6), F), ((6, 6), F), ((), F)],
            [((8, 6), F)],
            window_dimensions=(3, 1),
        ),
        _distinct,
    )


def _uniform(low: float, high: float) -> InputMaker:
    """Every operand uniform in [low, high): inside the op's domain."""

    def make(info: OpInfo, rng: np.random.Generator) -> list[Array]:
        return [
            rng.uniform(low, high, shape).astype(np_dtype(dt))
            for shape, dt in zip(info.operand_shapes, info.operand_dtypes, strict=True)
        ]

    return make


def _with_infs(info: OpInfo, rng: np.random.Generator) -> list[Array]:
    shape = info.operand_shapes[0]
    x = rng.uniform(-2.0, 2.0, shape)
    kind = rng.integers(0, 3, shape)
    x = np.where(kind == 0, np.inf, np.where(kind == 1, -np.inf, x))
    return [x.astype(np.float32)]


def _wide_ints(info: OpInfo, rng: np.random.Generator) -> list[Array]:
    """Operand 0 over the whole i32 range; shift amounts in [0, 34) (some too big)."""
    xs = [rng.integers(-(2**31), 2**31, info.operand_shapes[0]).astype(np.int32)]
    return xs + [
        rng.integers(0, 34, shape).astype(np.int32) for shape in info.operand_shapes[1:]
    ]


def _halves(info: OpInfo, rng: np.random.Generator) -> list[Array]:
    """Multiples of 0.5, where rounding modes differ."""
    return [(rng.integers(-8, 9, info.operand_shapes[0]) / 2).astype(np.float32)]


def _polygamma_inputs(info: OpInfo, rng: np.random.Generator) -> list[Array]:
    n = rng.integers(0, 3, info.operand_shapes[0]).astype(np.float32)
    return [n, rng.uniform(0.5, 2.0, info.operand_shapes[1]).astype(np.float32)]


def _zeta_inputs(info: OpInfo, rng: np.random.Generator) -> list[Array]:
    s = rng.uniform(1.5, 4.0, info.operand_shapes[0]).astype(np.float32)
    return [s, rng.uniform(0.5, 2.0, info.operand_shapes[1]).astype(np.float32)]


def _symmetric(info: OpInfo, rng: np.random.Generator) -> list[Array]:
    a = rng.standard_normal(info.operand_shapes[0])
    return [((a + np.swapaxes(a, -1, -2)) / 2).astype(np.float32)]


def _reduce_window_inputs(init: float) -> InputMaker:
    def make(info: OpInfo, rng: np.random.Generator) -> list[Array]:
        xs = default_inputs(info, rng)
        xs[1] = np.asarray(init, dtype=np.float32)
        return xs

    return make
