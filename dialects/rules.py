"""Op sharding rules: how an op's operand and result dims relate through factors.

A rule gives every dim of every operand and result a list of factor indices
(several for a dim that reshape splits or merges: a compound factor, major to
minor), a size per factor, and a kind per factor. It prints exactly as Shardy
prints `#sdy.op_sharding_rule<...>`:

    ([i, k], [k, j])->([i, j]) {i=8, j=32, k=16} reduction={k}

Pure Python: no MLIR, no jax. Rules are functions of an `OpInfo` (op name,
shapes, dtypes, attributes as plain values), collected in a `RuleTable`
(`meshjit.dialects.stablehlo_rules.RULES`).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TypeAlias, assert_never

Shape: TypeAlias = tuple[int, ...]
DimFactors: TypeAlias = tuple[int, ...]  # factor indices of one dim, major to minor
TensorFactors: TypeAlias = tuple[DimFactors, ...]  # one entry per dim

NULL_DIM = -1  # "this tensor has no dim for the factor" in `RuleBuilder.factor`


class FactorKind(enum.Enum):
    """What sharding a factor costs the partitioner.

    PASS_THROUGH: each device computes its block locally, no communication.
    REDUCTION: local partial results are combined with the op's reduction
        (all-reduce) afterwards.
    NEED_REPLICATION: the factor must be replicated (all-gathered) first.
    PERMUTATION: sharding is possible but data moves between devices
        (collective-permute, halo exchange) before or after the local op.
    BLOCKED: needs replication, and propagation must not carry a sharding
        across it (Shardy prints it in both `need_replication` and
        `blocked_propagation`).
    """

    PASS_THROUGH = "pass-through"
    REDUCTION = "reduction"
    NEED_REPLICATION = "need-replication"
    PERMUTATION = "permutation"
    BLOCKED = "blocked"


def factor_name(index: int) -> str:
    """Shardy's factor symbol: i, j, ..., z, then z_1, z_2, ..."""
    if index < 0:
        raise ValueError(f"factor index must be >= 0, got {index}")
    if index < 18:
        return chr(ord("i") + index)
    return f"z_{index - 17}"


_FACTOR_TOKEN = re.compile(r"z_(\d+)|([i-z])")


def _factor_index(token: str) -> int:
    if token.startswith("z_"):
        return 17 + int(token[2:])
    return ord(token) - ord("i")


@dataclass(frozen=True, slots=True)
class ShardingRule:
    """Factor sizes, per-dim factor lists of operands and results, factor kinds."""

    sizes: tuple[int, ...]
    operands: tuple[TensorFactors, ...]
    results: tuple[TensorFactors, ...]
    kinds: tuple[FactorKind, ...] = ()  # one per factor; empty: all pass-through
    custom: bool = False  # Shardy's `custom` flag (a rule written by the producer)

    def __post_init__(self) -> None:
        n = len(self.sizes)
        if self.kinds and len(self.kinds) != n:
            raise ValueError(f"rule has {n} factors but {len(self.kinds)} kinds")
        for tensor in (*self.operands, *self.results):
            for dim in tensor:
                for f in dim:
                    if not 0 <= f < n:
                        raise ValueError(f"factor {f} out of range (rule has {n})")

    @property
    def num_factors(self) -> int:
        return len(self.sizes)

    def kind(self, factor: int) -> FactorKind:
        return self.kinds[factor] if self.kinds else FactorKind.PASS_THROUGH

    def factors_of_kind(self, kind: FactorKind) -> tuple[int, ...]:
        return tuple(f for f in range(self.num_factors) if self.kind(f) is kind)

    def __str__(self) -> str:
        def tensor(t: TensorFactors) -> str:
            dims = ("".join(factor_name(f) for f in d) for d in t)
            return "[" + ", ".join(dims) + "]"

        text = "({})->({})".format(
            ", ".join(tensor(t) for t in self.operands),
            ", ".join(tensor(t) for t in self.results),
        )
        if self.sizes:
            sizes = ", ".join(f"{factor_name(f)}={s}" for f, s in enumerate(self.sizes))
            text += " {" + sizes + "}"
        lists: dict[str, list[int]] = {
            "reduction": [],
            "need_replication": [],
            "permutation": [],
            "blocked_propagation": [],
        }
        for f in range(self.num_factors):
            kind = self.kind(f)
            if kind is FactorKind.PASS_THROUGH:
                continue
            if kind is FactorKind.REDUCTION:
                lists["reduction"].append(f)
            elif kind is FactorKind.NEED_REPLICATION:
                lists["need_replication"].append(f)
            elif kind is FactorKind.PERMUTATION:
                lists["permutation"].append(f)
            elif kind is FactorKind.BLOCKED:
                lists["need_replication"].append(f)
                lists["blocked_propagation"].append(f)
            else:
                assert_never(kind)
        for label, factors in lists.items():
            if factors:
                text += f" {label}=" + "{" + ", ".join(map(factor_name, factors)) + "}"
        if self.custom:
            text += ", custom"
        return text

    def attr_text(self) -> str:
        """The MLIR attribute: `#sdy.op_sharding_rule<...>`."""
        return f"#sdy.op_sharding_rule<{self}>"

    @classmethod
    def parse(cls, text: str) -> ShardingRule:
        """Reads Shardy's printed form (with or without `#sdy.op_sharding_rule<>`)."""
        body = text.strip()
        if body.startswith("#sdy.op_sharding_rule<") and body.endswith(">"):
            body = body[len("#sdy.op_sharding_rule<") : -1]
        m = re.fullmatch(
            r"\((?P<ops>.*?)\)\s*->\s*\((?P<res>.*?)\)(?P<rest>.*)", body, re.S
        )
        if m is None:
            raise ValueError(f"not an op sharding rule: {text!r}")
        operands = _parse_tensors(m.group("ops"))
        results = _parse_tensors(m.group("res"))
        rest = m.group("rest").strip()
        custom = False
        if rest.endswith(", custom") or rest == "custom":
            custom = True
            rest = rest.removesuffix("custom").rstrip().removesuffix(",").strip()
        sizes: dict[int, int] = {}
        size_match = re.match(r"\{([^}]*)\}", rest)
        if size_match is not None and "=" in size_match.group(1):
            for item in size_match.group(1).split(","):
                name, value = item.split("=")
                sizes[_factor_index(name.strip())] = int(value)
            rest = rest[size_match.end() :].strip()
        lists: dict[str, set[int]] = {}
        for label, names in re.findall(r"(\w+)=\{([^}]*)\}", rest):
            lists[label] = {_factor_index(n.strip()) for n in names.split(",") if n}
        n = len(sizes)
        kinds: list[FactorKind] = []
        for f in range(n):
            if f in lists.get("blocked_propagation", set()):
                kinds.append(FactorKind.BLOCKED)
            elif f in lists.get("reduction", set()):
                kinds.append(FactorKind.REDUCTION)
            elif f in lists.get("need_replication", set()):
                kinds.append(FactorKind.NEED_REPLICATION)
            elif f in lists.get("permutation", set()):
                kinds.append(FactorKind.PERMUTATION)
            else:
                kinds.append(FactorKind.PASS_THROUGH)
        all_pass = all(k is FactorKind.PASS_THROUGH for k in kinds)
        return cls(
            tuple(sizes[f] for f in range(n)),
            operands,
            results,
            () if all_pass else tuple(kinds),
            custom,
        )


def _parse_tensors(text: str) -> tuple[TensorFactors, ...]:
    tensors: list[TensorFactors] = []
    for inner in re.findall(r"\[([^\]]*)\]", text):
        dims: list[DimFactors] = []
        for dim in inner.split(","):
            dim = dim.strip()
            if not dim:
                continue
            dims.append(
                tuple(
                    _factor_index(tok.group(0)) for tok in _FACTOR_TOKEN.finditer(dim)
                )
            )
        tensors.append(tuple(dims))
    return tuple(tensors)


class RuleBuilder:
    """Builds a `ShardingRule` one factor at a time, in Shardy's factor order.

    `factor(operand_dims, result_dims, size, kind)` adds a factor and maps it to
    the given dim of each operand/result (`NULL_DIM`: not mapped). `build()`
    gives each dim still without a factor its own size-1 factor (operands
    first), so that every dim has at least one factor.
    """

    def __init__(self, operand_ranks: Sequence[int], result_ranks: Sequence[int]):
        self._operands: list[list[list[int]]] = [
            [[] for _ in range(r)] for r in operand_ranks
        ]
        self._results: list[list[list[int]]] = [
            [[] for _ in range(r)] for r in result_ranks
        ]
        self._sizes: list[int] = []
        self._kinds: list[FactorKind] = []

    @classmethod
    def for_op(cls, op: OpInfo) -> RuleBuilder:
        return cls(
            [len(s) for s in op.operand_shapes], [len(s) for s in op.result_shapes]
        )

    def factor(
        self,
        operand_dims: Sequence[int],
        result_dims: Sequence[int],
        size: int,
        kind: FactorKind = FactorKind.PASS_THROUGH,
    ) -> RuleBuilder:
        f = len(self._sizes)
        for tensors, dims in (
            (self._operands, operand_dims),
            (self._results, result_dims),
        ):
            if len(dims) != len(tensors):
                raise ValueError(f"expected {len(tensors)} dims, got {len(dims)}")
            for t, d in zip(tensors, dims, strict=True):
                if d != NULL_DIM:
                    t[d].append(f)
        self._sizes.append(size)
        self._kinds.append(kind)
        return self

    def same_dim(
        self, dim: int, size: int, kind: FactorKind = FactorKind.PASS_THROUGH
    ) -> RuleBuilder:
        """A factor on dim `dim` of every operand and result of rank > 0."""
        f = len(self._sizes)
        for t in (*self._operands, *self._results):
            if t:
                t[dim].append(f)
        self._sizes.append(size)
        self._kinds.append(kind)
        return self

    def pointwise(
        self,
        shape: Sequence[int],
        kind_of: Callable[[int], FactorKind | None] = lambda _d: (
            FactorKind.PASS_THROUGH
        ),
    ) -> RuleBuilder:
        """`same_dim` for each dim of `shape`; `kind_of(dim) is None` skips the dim."""
        for d, size in enumerate(shape):
            kind = kind_of(d)
            if kind is not None:
                self.same_dim(d, size, kind)
        return self

    def build(self, custom: bool = False) -> ShardingRule:
        sizes = list(self._sizes)
        kinds = list(self._kinds)

        def freeze(tensors: list[list[list[int]]]) -> tuple[TensorFactors, ...]:
            out: list[TensorFactors] = []
            for t in tensors:
                dims: list[DimFactors] = []
                for d in t:
                    if not d:
                        d = [len(sizes)]
                        sizes.append(1)
                        kinds.append(FactorKind.PASS_THROUGH)
                    dims.append(tuple(d))
                out.append(tuple(dims))
            return tuple(out)

        operands = freeze(self._operands)
        results = freeze(self._results)
        all_pass = all(k is FactorKind.PASS_THROUGH for k in kinds)
        return ShardingRule(
            tuple(sizes), operands, results, () if all_pass else tuple(kinds), custom
        )


@dataclass(frozen=True, slots=True)
class OpInfo:
    """What a rule may look at: the op's name, shapes, dtypes and attributes.

    `attrs` hold plain Python values (ints, tuples, mappings for dimension
    numbers, strings for enums). `constant_operands` maps an operand index to
    its value when the operand is a scalar splat constant. `combiner` names the
    single binary op of the op's first region when the region is exactly
    `op(arg0, arg1)` returned (e.g. "stablehlo.add" for a sum), else None.
    """

    name: str
    operand_shapes: tuple[Shape, ...]
    result_shapes: tuple[Shape, ...]
    operand_dtypes: tuple[str, ...] = ()
    result_dtypes: tuple[str, ...] = ()
    attrs: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))
    constant_operands: Mapping[int, int | float | bool] = field(
        default_factory=lambda: MappingProxyType({})
    )
    combiner: str | None = None
    # The ops that use its results, for the few rules that depend on them
    # (custom calls only: Shardy's rule for @X64Combine feeding an
    # rng_bit_generator); empty otherwise.
    result_users: frozenset[str] = frozenset()

    def attr(self, name: str) -> object:
        return self.attrs.get(name)

    def int_array(
        self, name: str, default: Sequence[int] | None = None
    ) -> tuple[int, ...]:
        """An integer-array attribute (dense array, array of ints, or splat)."""
        value = self.attrs.get(name)
        if value is None:
            if default is not None:
                return tuple(default)
            raise KeyError(f"'{self.name}' has no attribute '{name}'")
        return _ints(value, f"attribute '{name}' of '{self.name}'")

    def int_attr(self, name: str, default: int | None = None) -> int:
        value = self.attrs.get(name)
        if value is None:
            if default is not None:
                return default
            raise KeyError(f"'{self.name}' has no attribute '{name}'")
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"attribute '{name}' of '{self.name}' is not an integer")
        return value

    def str_attr(self, name: str, default: str = "") -> str:
        value = self.attrs.get(name)
        if value is None:
            return default
        if isinstance(value, str):
            return value
        return str(getattr(value, "name", getattr(value, "text", value)))

    def bool_attr(self, name: str, default: bool = False) -> bool:
        value = self.attrs.get(name)
        return default if value is None else bool(value)

    def struct(self, name: str) -> Mapping[str, object]:
        """A struct attribute (dimension numbers) as a mapping of its fields."""
        value = self.attrs.get(name)
        if not isinstance(value, Mapping):
            raise KeyError(f"'{self.name}' has no struct attribute '{name}'")
        return value

    def struct_ints(self, name: str, key: str) -> tuple[int, ...]:
        value = self.struct(name).get(key, ())
        return _ints(value, f"'{key}' of '{name}' on '{self.name}'")

    def struct_int(self, name: str, key: str) -> int:
        value = self.struct(name).get(key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise KeyError(f"'{key}' of '{name}' on '{self.name}' is not an integer")
        return value


def _ints(value: object, what: str) -> tuple[int, ...]:
    if isinstance(value, bool):
        raise TypeError(f"{what} is not an integer array")
    if isinstance(value, int):
        return (value,)
    if isinstance(value, tuple | list):
        out: list[int] = []
        for v in value:
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"{what} is not an integer array")
            out.append(v)
        return tuple(out)
    values = getattr(value, "values", None)  # a dense integer attribute
    if isinstance(values, tuple):
        return _ints(values, what)
    splat = getattr(value, "splat", None)
    shape = getattr(value, "shape", None)
    if (
        isinstance(splat, int)
        and not isinstance(splat, bool)
        and isinstance(shape, tuple)
    ):
        count = 1
        for s in shape:
            count *= int(s)
        return (splat,) * count
    raise TypeError(f"{what} is not an integer array")


@dataclass(frozen=True, slots=True)
class NoRule:
    """An op meshjit knows and deliberately gives no factor rule (and why)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Unknown:
    """A variant of a known op the table cannot reason about (a custom call target)."""

    what: str  # "custom call @foo"


RuleFn: TypeAlias = Callable[[OpInfo], "ShardingRule | NoRule | Unknown"]


@dataclass(frozen=True, slots=True)
class Lookup:
    """The answer of `RuleTable.lookup`.

    `rule` is None only for ops with a `NoRule` entry. An op (or custom call
    target) the table does not know gets `replicate_everything` and a `warning`
    to report once per `warning_key`.
    """

    rule: ShardingRule | None
    reason: str = ""  # why there is no rule
    warning: str = ""
    warning_key: str = ""

    @property
    def known(self) -> bool:
        return not self.warning


def replicate_everything(op: OpInfo) -> ShardingRule:
    """Every dim of every tensor its own factor, each needing replication."""
    builder = RuleBuilder.for_op(op)
    n_ops = len(op.operand_shapes)
    n_res = len(op.result_shapes)
    for i, shape in enumerate((*op.operand_shapes, *op.result_shapes)):
        for d, size in enumerate(shape):
            operand_dims = [NULL_DIM] * n_ops
            result_dims = [NULL_DIM] * n_res
            if i < n_ops:
                operand_dims[i] = d
            else:
                result_dims[i - n_ops] = d
            builder.factor(operand_dims, result_dims, size, FactorKind.NEED_REPLICATION)
    return builder.build()


def pointwise_rule(op: OpInfo) -> ShardingRule:
    """Every operand and result of rank > 0 shares one factor per dim."""
    shape = op.result_shapes[0] if op.result_shapes else op.operand_shapes[0]
    return RuleBuilder.for_op(op).pointwise(shape).build()


class RuleTable:
    """Op name -> rule function; unknown ops get a replicate-everything rule."""

    def __init__(self) -> None:
        self._rules: dict[str, RuleFn | NoRule] = {}

    def _add(self, name: str, entry: RuleFn | NoRule) -> None:
        if name in self._rules:
            raise ValueError(f"duplicate sharding rule for '{name}'")
        self._rules[name] = entry

    def pointwise(self, *names: str) -> None:
        """Registers ops whose operands and results share every dim."""
        for name in names:
            self._add(name, pointwise_rule)

    def same(self, fn: RuleFn, *names: str) -> None:
        """Registers several ops that share one rule function."""
        for name in names:
            self._add(name, fn)

    def no_rule(self, reason: str, *names: str) -> None:
        """Registers ops that get no factor rule on purpose (data flow, no operands)."""
        for name in names:
            self._add(name, NoRule(reason))

    def op(self, *names: str) -> Callable[[RuleFn], RuleFn]:
        """Decorator: `@RULES.op("stablehlo.transpose")`."""

        def register(fn: RuleFn) -> RuleFn:
            for name in names:
                self._add(name, fn)
            return fn

        return register

    def __contains__(self, name: object) -> bool:
        return name in self._rules

    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self._rules))

    def entry(self, name: str) -> RuleFn | NoRule | None:
        return self._rules.get(name)

    def lookup(self, op: OpInfo) -> Lookup:
        """The rule for `op`; an unknown op is replicated and gets a warning."""
        entry = self._rules.get(op.name)
        if entry is None:
            return Lookup(
                replicate_everything(op),
                warning=unknown_op_warning(f"'{op.name}'"),
                warning_key=op.name,
            )
        if isinstance(entry, NoRule):
            return Lookup(None, reason=entry.reason)
        answer = entry(op)
        if isinstance(answer, NoRule):
            return Lookup(None, reason=answer.reason)
        if isinstance(answer, Unknown):
            return Lookup(
                replicate_everything(op),
                warning=unknown_op_warning(answer.what),
                warning_key=f"{op.name}:{answer.what}",
            )
        return Lookup(answer)

    def rule(self, op: OpInfo) -> ShardingRule | None:
        """Shorthand for `lookup(op).rule`."""
        return self.lookup(op).rule


def unknown_op_warning(what: str) -> str:
    """`what` is `'stablehlo.fft'` (quoted op name) or `custom call @foo`."""
    return f"no sharding rule for {what}; its operands and results stay replicated"


def make_op_info(
    name: str,
    operand_shapes: Iterable[Sequence[int]],
    result_shapes: Iterable[Sequence[int]],
    **attrs: object,
) -> OpInfo:
    """A hand-built OpInfo (tests, the validator); dtypes default to f32."""
    ops = tuple(tuple(s) for s in operand_shapes)
    res = tuple(tuple(s) for s in result_shapes)
    return OpInfo(
        name,
        ops,
        res,
        ("f32",) * len(ops),
        ("f32",) * len(res),
        MappingProxyType(dict(attrs)),
    )
