"""Differential test: meshjit's `annotate-sharding-rules` against Shardy's rules.

Traces a varied set of JAX programs and their gradients, annotates each module
with meshjit's pass and (test oracle only) Shardy's
`sdy-populate-op-sharding-rules`, and compares the rule text op by op.

This file also regenerates the coverage ledger:

    .venv/bin/python test/py/passes/test_annotate_sharding_rules.py --write-ledger
"""

from __future__ import annotations

import collections
import os
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

if __name__ == "__main__":  # the ledger script: same device setup as conftest.py
    os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
import pytest
from jax import lax
from jaxlib.mlir import ir, passmanager

from meshjit.compiler import bridge
from meshjit.compiler.diagnostics import Diagnostics
from meshjit.compiler.ir import make_context
from meshjit.passes.annotate_sharding_rules import RULE_ATTR, AnnotateShardingRulesPass

REPO = Path(__file__).resolve().parents[3]
LEDGER = REPO / "docs" / "op_coverage.md"
SHARDY_POPULATE = "builtin.module(func.func(sdy-populate-op-sharding-rules))"

# Every op kind where meshjit's rule text differs from Shardy's, and why
# meshjit's is right. docs/op_coverage.md lists these.
DIFFERENCES: dict[str, str] = {
    "chlo.*": (
        "Shardy has no rules for chlo ops: XLA legalizes chlo to StableHLO before "
        "Shardy propagates, so `sdy-populate-op-sharding-rules` leaves them bare. "
        "meshjit reads JAX's modules as they are, so it annotates them: elementwise "
        "chlo ops pointwise, `chlo.top_k` like Shardy's rule for the `mhlo.topk` "
        "custom call (batch dims pass through, the top-k dim blocked)."
    ),
    "stablehlo.convolution": (
        "Shardy marks the window-size part of a spatial dim a reduction. Windows "
        "that overlap block boundaries need a halo from the neighbouring device, so "
        "local partial sums are wrong (the validator shows it); meshjit marks it "
        "permutation. Where windows tile the input exactly (stride = window, no "
        "padding or dilation) meshjit instead uses exact factors: window index "
        "major and pass-through, offset minor and a reduction (Shardy orders them "
        "by size, which puts the offset major and gives wrong partial sums)."
    ),
    "stablehlo.custom_call": (
        'Shardy lets the matrix dims of `@Eigh` pass through (its comment: "even '
        'though that would require communication"); eigenvectors computed from a '
        "block of the matrix are wrong (the validator shows it), so meshjit marks "
        "them need-replication, as Shardy does for `@Qr`."
    ),
    "stablehlo.pad": (
        "Shardy marks a padded dim permutation only when its size changes; a shift "
        "(low=1, high=-1) keeps the size and would pass through, computing the "
        "wrong block. meshjit marks every dim with nonzero padding."
    ),
    "stablehlo.reduce_window": (
        "Shardy ignores base dilation when deciding whether a dim is windowed; a "
        "base-dilated dim computed blockwise is wrong, so meshjit marks it "
        "permutation."
    ),
    "stablehlo.triangular_solve": (
        "Shardy marks b's free dim (columns for a left-side solve, rows for a "
        "right-side one) need-replication; each column (row) is solved on its own, "
        "so meshjit lets it pass through (the validator confirms it)."
    ),
}


# Differences that appear from a jax release on (the Shardy in that jaxlib
# changed its rule); checked only on those releases.
DIFFERENCES_FROM: dict[tuple[int, ...], dict[str, str]] = {
    (0, 11): {
        "stablehlo.dynamic_update_slice": (
            "From jaxlib 0.11, Shardy marks the updated dim of the operand and of "
            "the update permutation (`permutation={i, j}`), where 0.10 let the "
            "operand's dim pass through and marked the update's need-replication. "
            "meshjit keeps the 0.10 rule: its partitioner updates a split operand "
            "in place on each device (a masked select of the replicated update), "
            "with no communication for the operand (the validator confirms the "
            "factors)."
        )
    },
}


def differences() -> dict[str, str]:
    """DIFFERENCES plus those of the installed jax's Shardy."""
    out = dict(DIFFERENCES)
    for since, entries in DIFFERENCES_FROM.items():
        if since <= bridge.JAX_VERSION:
            out.update(entries)
    return out


def ledger_jax() -> str:
    """The jax release docs/op_coverage.md was generated with."""
    found = re.search(r"what jaxlib (\S+)'s", LEDGER.read_text())
    return found.group(1) if found else "?"


def _difference_key(op: str) -> str:
    return "chlo.*" if op.startswith("chlo.") else op


# ---------------------------------------------------------------------------
# The programs.


def mlp(params: list[tuple[jax.Array, jax.Array]], x: jax.Array) -> jax.Array:
    for w, b in params:
        x = jax.nn.gelu(x @ w + b)
    return jnp.mean(x**2)


def attention(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(q.shape[-1])
    mask = jnp.tril(jnp.ones((q.shape[1], k.shape[1]), bool))
    p = jax.nn.softmax(jnp.where(mask, s, -1e9), axis=-1)
    return jnp.sum(jnp.einsum("bhqk,bkhd->bqhd", p, v))


def convnet(w1: jax.Array, w2: jax.Array, x: jax.Array) -> jax.Array:
    dn = ("NHWC", "HWIO", "NHWC")
    y = lax.conv_general_dilated(x, w1, (1, 1), "SAME", dimension_numbers=dn)
    y = jax.nn.relu(y)
    y = lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    y = lax.conv_general_dilated(
        y, w2, (2, 2), "VALID", feature_group_count=2, dimension_numbers=dn
    )
    return jnp.sum(jnp.mean(y, axis=(1, 2)))


def layer_norm(x: jax.Array, g: jax.Array, b: jax.Array) -> jax.Array:
    m = jnp.mean(x, -1, keepdims=True)
    v = jnp.var(x, -1, keepdims=True)
    return jnp.sum((x - m) * lax.rsqrt(v + 1e-5) * g + b)


def embedding(table: jax.Array, ids: jax.Array) -> jax.Array:
    return jnp.sum(jnp.take(table, ids, axis=0) ** 2)


def scatter_add(x: jax.Array, idx: jax.Array, upd: jax.Array) -> jax.Array:
    return jnp.sum(x.at[idx].add(upd) ** 2)


def sort_top_k(x: jax.Array) -> jax.Array:
    values, _ = lax.top_k(x, 3)
    s = jnp.sort(x, axis=-1)
    order = jnp.argsort(x[0]).astype(jnp.float32)
    return jnp.sum(values) + jnp.sum(s[:, :2]) + jnp.sum(order)


def cumulative(x: jax.Array) -> jax.Array:
    return jnp.sum(jnp.cumsum(x, axis=0) * jnp.cumprod(x, axis=1)) + jnp.sum(
        lax.cummax(x, axis=0)
    )


def while_loop(x: jax.Array) -> jax.Array:
    y = lax.fori_loop(0, 3, lambda i, y: jnp.tanh(y @ y.T @ y), x)
    n = lax.while_loop(
        lambda c: c[0] < 10, lambda c: (c[0] + 1, c[1] * 0.5), (0, jnp.sum(x))
    )[1]
    return jnp.sum(y) + lax.stop_gradient(n)


def slicing(x: jax.Array, y: jax.Array) -> jax.Array:
    z = jnp.concatenate([x, y], axis=0)
    z = jnp.flip(jnp.pad(z, ((1, 2), (0, 0)))[1:5, ::2], 0)
    d = lax.dynamic_slice(x, (1, 0), (2, 4))
    c = jnp.clip(lax.dynamic_update_slice(x, d * 2, (0, 0)), -1.0, 1.0)
    c = lax.cond(jnp.sum(x) > 0, lambda a: a * 2, lambda a: a - 1, c)
    e = jnp.exp(c) + jnp.log1p(jnp.abs(c)) + jnp.sin(c) * jnp.cos(c)
    r = jnp.max(e, axis=1) + jnp.argmax(e, axis=1).astype(jnp.float32)
    return jnp.sum(z) + jnp.sum(r) + jnp.sum(jnp.tril(x @ y.T))


def linalg(a: jax.Array, b: jax.Array) -> jax.Array:
    spd = a @ a.T + 4 * jnp.eye(a.shape[0])
    lower = jnp.linalg.cholesky(spd)
    s = jax.scipy.linalg.solve_triangular(lower, b, lower=True)
    return jnp.sum(s) + jnp.sum(jnp.abs(jnp.fft.rfft(b, axis=-1)))


def random_normal(x: jax.Array) -> jax.Array:
    k = jax.random.key(0)
    n = jax.random.normal(k, x.shape)
    u = jax.random.uniform(jax.random.fold_in(k, 1), x.shape)
    return jnp.sum(x * n) + jnp.sum(u * x)


def _s(*shape: int, dtype: object = jnp.float32) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(shape, dtype)  # type: ignore[no-untyped-call]


PROGRAMS: dict[str, tuple[Callable[..., jax.Array], tuple[object, ...]]] = {
    "mlp": (mlp, ([(_s(16, 32), _s(32)), (_s(32, 8), _s(8))], _s(4, 16))),
    "attention": (attention, (_s(2, 8, 4, 16), _s(2, 8, 4, 16), _s(2, 8, 4, 16))),
    "convnet": (convnet, (_s(3, 3, 4, 8), _s(3, 3, 4, 6), _s(2, 16, 16, 4))),
    "layer_norm": (layer_norm, (_s(4, 8, 32), _s(32), _s(32))),
    "embedding": (embedding, (_s(50, 16), _s(4, 7, dtype=jnp.int32))),
    "scatter_add": (scatter_add, (_s(10, 4), _s(6, dtype=jnp.int32), _s(6, 4))),
    "sort_top_k": (sort_top_k, (_s(4, 10),)),
    "cumulative": (cumulative, (_s(8, 6),)),
    "while_loop": (while_loop, (_s(4, 4),)),
    "slicing": (slicing, (_s(4, 4), _s(4, 4))),
    "linalg": (linalg, (_s(4, 4), _s(4, 6))),
    "random_normal": (random_normal, (_s(4, 8),)),
}


def lowered(name: str) -> str:
    base = name.removesuffix("_grad")
    fn, args = PROGRAMS[base]
    if name == base:
        return str(jax.jit(fn).lower(*args).as_text())
    float_args = tuple(
        i
        for i, a in enumerate(args)
        if all(leaf.dtype == jnp.float32 for leaf in jax.tree.leaves(a))
    )
    grad = jax.grad(fn, argnums=float_args)
    return str(jax.jit(grad).lower(*args).as_text())


CORPUS = [n for base in PROGRAMS for n in (base, f"{base}_grad")]


# ---------------------------------------------------------------------------
# Comparison.


@dataclass(frozen=True, slots=True)
class OpComparison:
    program: str
    op: str
    shardy: str | None
    meshjit: str | None
    text: str

    @property
    def same(self) -> bool:
        return self.shardy == self.meshjit


def _ops(block: ir.Block) -> Iterator[ir.Operation]:
    for op in block.operations:
        operation = op.operation
        yield operation
        for region in operation.regions:
            for b in region.blocks:
                yield from _ops(b)


def _rule(op: ir.Operation) -> str | None:
    return str(op.attributes[RULE_ATTR]) if RULE_ATTR in op.attributes else None


# From jaxlib 0.12, Shardy marks a reshape's size-1 factors need-replication
# (0.10 and 0.11 leave them plain). No axis can shard a dim of size 1, so the
# two rules mean the same; on those releases both rules are compared with the
# marks on size-1 factors taken off.
SHARDY_MARKS_SIZE1_FACTORS = bridge.JAX_VERSION >= (0, 12)


def _without_size1_marks(rule: str | None) -> str | None:
    if rule is None or not SHARDY_MARKS_SIZE1_FACTORS:
        return rule
    sizes = dict(re.findall(r"\b([a-z]+)=(\d+)\b", rule))

    def drop(found: re.Match[str]) -> str:
        kept = [f for f in found.group(2).split(", ") if sizes.get(f) != "1"]
        return f" {found.group(1)}={{{', '.join(kept)}}}" if kept else ""

    return re.sub(r" (need_replication)=\{([a-z, ]+)\}", drop, rule)


def compare(program: str, text: str) -> tuple[list[OpComparison], Diagnostics]:
    ctx = make_context()
    with ctx:
        theirs = ir.Module.parse(text)
        ours = ir.Module.parse(text)
        passmanager.PassManager.parse(SHARDY_POPULATE).run(theirs.operation)
    diags = Diagnostics()
    AnnotateShardingRulesPass().run(ours, diags)
    out = []
    for a, b in zip(_ops(theirs.body), _ops(ours.body), strict=True):
        head = str(b).split("\n", 1)[0][:200]
        out.append(
            OpComparison(
                program,
                a.name,
                _without_size1_marks(_rule(a)),
                _without_size1_marks(_rule(b)),
                head,
            )
        )
    return out, diags


def compare_corpus() -> list[OpComparison]:
    results: list[OpComparison] = []
    for name in CORPUS:
        results.extend(compare(name, lowered(name))[0])
    return results


@pytest.fixture(scope="module")
def corpus() -> list[OpComparison]:
    return compare_corpus()


@pytest.mark.parametrize("program", CORPUS)
def test_every_op_kind_is_known(program: str) -> None:
    _, diags = compare(program, lowered(program))
    assert [str(d) for d in diags.items] == []


def test_agreement_with_shardy(corpus: list[OpComparison]) -> None:
    same = sum(c.same for c in corpus)
    assert len(corpus) > 2000
    assert same / len(corpus) >= 0.98, f"{same} of {len(corpus)} ops agree"


def test_every_difference_is_documented(corpus: list[OpComparison]) -> None:
    undocumented = sorted(
        {
            c.op
            for c in corpus
            if not c.same and _difference_key(c.op) not in differences()
        }
    )
    assert undocumented == [], [
        (c.program, c.shardy, c.meshjit, c.text) for c in corpus if c.op in undocumented
    ][:5]


def test_ledger_is_up_to_date(corpus: list[OpComparison]) -> None:
    if ledger_jax() != jax.__version__:
        pytest.skip(
            f"docs/op_coverage.md compares with jaxlib {ledger_jax()}'s Shardy "
            f"(the CI version); this run has jax {jax.__version__}"
        )
    assert LEDGER.read_text() == ledger_text(corpus), (
        "docs/op_coverage.md is stale; regenerate it with "
        "`.venv/bin/python test/py/passes/test_annotate_sharding_rules.py "
        "--write-ledger`"
    )


# ---------------------------------------------------------------------------
# The ledger.


def ledger_text(corpus: list[OpComparison]) -> str:
    from meshjit.compiler.rule_validator import (
        NOT_EVALUABLE,
        Outcome,
        evaluators,
        standard_cases,
        validate,
    )
    from meshjit.dialects.rules import NoRule
    from meshjit.dialects.stablehlo_rules import RULES
    from meshjit.passes.partition import partition_support

    report = validate(standard_cases(), RULES, evaluators())
    by_op: dict[str, list[OpComparison]] = collections.defaultdict(list)
    for c in corpus:
        by_op[c.op].append(c)
    checks: dict[str, list[Outcome]] = collections.defaultdict(list)
    cases: dict[str, set[str]] = collections.defaultdict(set)
    for check in report.checks:
        checks[check.op].append(check.outcome)
        cases[check.op].add(check.case)

    lines = [
        "# Op sharding rule coverage",
        "",
        "Generated by `.venv/bin/python test/py/passes/test_annotate_sharding_rules.py "
        "--write-ledger`;",
        "`test_ledger_is_up_to_date` fails when it is stale. Do not edit by hand.",
        "",
        "- *has rule*: what `meshjit.dialects.stablehlo_rules.RULES` gives the op.",
        "- *agrees with Shardy*: ops of that kind in the differential corpus (JAX "
        "programs and their gradients, "
        "`test/py/passes/test_annotate_sharding_rules.py`) whose "
        f"`sdy.sharding_rule` equals what jaxlib {jax.__version__}'s "
        "`sdy-populate-op-sharding-rules` writes.",
        "- *validated numerically*: `meshjit.compiler.rule_validator` on "
        "`standard_cases()`: factors checked / false positives / false negatives "
        "(collectives run on one device of a simulated replica group).",
        "- *partitioned*: how `passes/partitioner/` runs the op on local blocks "
        "(`partition_support`); *replicated* means its operands are gathered "
        "and it runs whole, correct but not parallel (the partitioner says so "
        "in a remark where that gathers a split operand or computes a split "
        "result whole).",
        "",
    ]
    total = len(corpus)
    same = sum(c.same for c in corpus)
    lines += [
        f"Corpus: {total} ops, {same} identical to Shardy ({100 * same / total:.2f}%), "
        f"{total - same} different (all listed below).",
        f"Validator: {report.summary()}.",
        "",
        "| op | has rule | agrees with Shardy | validated numerically | partitioned |",
        "|---|---|---|---|---|",
    ]
    names = sorted(set(RULES.names()) | set(by_op))
    for name in names:
        entry = RULES.entry(name)
        if entry is None:
            has = "no (unknown: replicated, warns)"
        elif isinstance(entry, NoRule):
            has = "no rule by design"
        else:
            has = "yes"
        seen = by_op.get(name, [])
        agree = f"{sum(c.same for c in seen)}/{len(seen)}" if seen else "not in corpus"
        outcomes = checks.get(name, [])
        if outcomes:
            checked = sum(o is not Outcome.NOT_CHECKED for o in outcomes)
            fp = sum(o is Outcome.FALSE_POSITIVE for o in outcomes)
            fn = sum(o is Outcome.FALSE_NEGATIVE for o in outcomes)
            valid = f"{len(cases[name])} cases, {checked}/{len(outcomes)} factors"
            valid += f", {fp} FP, {fn} FN"
        elif name in NOT_EVALUABLE:
            valid = f"n/a: {NOT_EVALUABLE[name]}"
        else:
            valid = "n/a" if has != "yes" else "no"
        part = partition_support(name)
        lines.append(f"| `{name}` | {has} | {agree} | {valid} | {part} |")

    lines += ["", "## Rules not validated numerically", ""]
    for what, reason in sorted(NOT_EVALUABLE.items()):
        lines.append(f"- `{what}`: {reason}.")

    lines += ["", "## Ops without a rule by design", ""]
    for name in names:
        entry = RULES.entry(name)
        if isinstance(entry, NoRule):
            lines.append(f"- `{name}`: {entry.reason}.")

    lines += ["", "## Differences from Shardy", ""]
    diff_ops: dict[str, list[OpComparison]] = collections.defaultdict(list)
    for c in corpus:
        if not c.same:
            diff_ops[_difference_key(c.op)].append(c)
    documented = differences()
    for key in sorted(documented):
        seen = diff_ops.get(key, [])
        lines.append(f"### `{key}` ({len(seen)} ops in the corpus)")
        lines.append("")
        lines.append(documented[key])
        for c in seen[:2]:
            lines += [
                "",
                f"- `{c.program}`: `{c.text[:120]}`",
                f"  - Shardy:  `{c.shardy}`",
                f"  - meshjit: `{c.meshjit}`",
            ]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    if sys.argv[1:] != ["--write-ledger"]:
        sys.exit("usage: test_annotate_sharding_rules.py --write-ledger")
    LEDGER.parent.mkdir(parents=True, exist_ok=True)
    LEDGER.write_text(ledger_text(compare_corpus()))
    print(f"wrote {LEDGER}")
