"""meshjit's propagation-pipeline against Shardy's sdy-propagation-pipeline.

Shardy's pipeline is the TEST ORACLE only (run here, never from product code).
Both run on the same modules: generated programs with random in/out shardings
and traced real models; the shardings of func arguments, func results and op
results are compared one by one. The goal is >= 99% identical values; each
known difference is pinned by a test below with its explanation.
"""

from __future__ import annotations

import difflib
import random
import re
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from meshjit.compiler import bridge
from meshjit.compiler.diagnostics import Diagnostics
from meshjit.compiler.graph import Opaque, read_graph
from meshjit.compiler.ir import make_context, parse_module, passmanager
from meshjit.compiler.pipeline import parse_pipeline, run_pipeline

# ---------------------------------------------------------------------------
# Running both pipelines and comparing


def run_shardy(text: str) -> str:
    ctx = make_context()
    module = parse_module(text, ctx)
    with ctx:
        pm = passmanager.PassManager.parse("builtin.module(sdy-propagation-pipeline)")
        pm.run(module.operation)
    return str(module)


def run_meshjit(text: str) -> str:
    ctx = make_context()
    module = parse_module(text, ctx)
    stages = parse_pipeline("propagation-pipeline", ctx)
    run_pipeline(stages, module, "-", diags=Diagnostics())
    return str(module)


_SKIP_OPS = ("func.return", "stablehlo.return", "sdy.return", "stablehlo.constant")


def value_shardings(text: str) -> list[tuple[str, str]]:
    """(what, sharding text) for func args/results and op results, in order.

    Ops Shardy may add or remove structurally (sdy.reshard from constraints,
    constants split and merged) are left out of the comparison.
    """
    ctx = make_context()
    graph = read_graph(parse_module(text, ctx))
    out: list[tuple[str, str]] = []
    for func in graph.funcs():
        name = func.attr("sym_name")
        for key in ("arg_attrs", "res_attrs"):
            entries = func.attr(key)
            block = func.regions[0][0]
            count = len(block.args) if key == "arg_attrs" else -1
            items = entries if isinstance(entries, tuple) else ()
            if count >= 0 and not items:
                items = ({},) * count
            for i, entry in enumerate(items):
                sharding = entry.get("sdy.sharding") if hasattr(entry, "get") else None
                text_ = sharding.text if isinstance(sharding, Opaque) else ""
                out.append((f"@{name} {key}[{i}]", text_))
        for node in graph.walk(func.regions[0][0]):
            if node.op == "sdy.manual_computation":
                for key in ("in_shardings", "out_shardings"):
                    attr = node.attr(key)
                    text_ = attr.text if isinstance(attr, Opaque) else ""
                    out.append((f"@{name} {node.op} {key} #{len(out)}", text_))
                continue
            if node.op.startswith("sdy.") or node.op in _SKIP_OPS:
                continue
            if not node.results:
                continue
            sharding = node.attr("sdy.sharding")
            text_ = sharding.text if isinstance(sharding, Opaque) else ""
            out.append((f"@{name} {node.op} #{len(out)}", text_))
    return out


@dataclass(frozen=True)
class Agreement:
    total: int
    identical: int
    differences: tuple[tuple[str, str, str], ...]  # (what, shardy, meshjit)

    @property
    def share(self) -> float:
        return self.identical / self.total if self.total else 1.0


# What Shardy's pipeline does differently by jax release (the Shardy inside
# each jaxlib), as seen on the same modules. The comparison allows these only
# on the releases that do them, so reference behaviour is never assumed from
# another version:
# - from 0.11: a @main result propagation left unsharded is written closed and
#   replicated (`[{}]`) where 0.10 leaves it bare; meshjit leaves it bare,
#   which its partitioner reads as replicated too;
# - from 0.11: identical constants and their identical broadcasts are merged
#   (CSE), so Shardy's module has fewer ops than the input.
SHARDY_WRITES_REPLICATED_RESULTS = bridge.JAX_VERSION >= (0, 11)
SHARDY_MERGES_DUPLICATES = bridge.JAX_VERSION >= (0, 11)


def _same(what: str, ours: str, theirs: str) -> bool:
    if ours == theirs:
        return True
    if SHARDY_WRITES_REPLICATED_RESULTS and not ours and " res_attrs[" in what:
        return (
            re.fullmatch(r"#sdy\.sharding<@\w+, \[(\{\}(, )?)*\]>", theirs) is not None
        )
    return False


def _kinds(values: list[tuple[str, str]]) -> list[str]:
    return [w.split(" #")[0] for w, _ in values]


def compare(text: str) -> Agreement:
    ours = value_shardings(run_meshjit(text))
    theirs = value_shardings(run_shardy(text))
    if _kinds(ours) == _kinds(theirs):
        pairs = list(zip(ours, theirs, strict=True))
    elif SHARDY_MERGES_DUPLICATES:
        # Align the two op sequences; values of ops Shardy merged away have
        # no partner and are left out (at most 5% of them, or the modules
        # are too different to compare).
        matcher = difflib.SequenceMatcher(None, _kinds(ours), _kinds(theirs), False)
        pairs = [
            (ours[block.a + i], theirs[block.b + i])
            for block in matcher.get_matching_blocks()
            for i in range(block.size)
        ]
        if len(ours) - len(pairs) > 0.05 * len(ours) or len(pairs) < len(theirs):
            return Agreement(len(theirs), 0, (("structure", str(theirs), str(ours)),))
    else:
        # structure differs: count every value as different
        return Agreement(len(theirs), 0, (("structure", str(theirs), str(ours)),))
    diffs = tuple((w, t, o) for (w, o), (_, t) in pairs if not _same(w, o, t))
    return Agreement(len(pairs), len(pairs) - len(diffs), diffs)


# ---------------------------------------------------------------------------
# Generated programs

MESHES = (
    ('["x"=2, "y"=4]', ("x", "y"), {"x": 2, "y": 4}),
    ('["x"=2, "y"=2, "z"=2]', ("x", "y", "z"), {"x": 2, "y": 2, "z": 2}),
)


def _tensor(shape: tuple[int, ...]) -> str:
    return "tensor<" + "x".join(map(str, shape)) + "xf32>"


def _random_sharding(
    rng: random.Random,
    shape: tuple[int, ...],
    axes: tuple[str, ...],
    sizes: dict[str, int],
) -> str | None:
    if rng.random() < 0.4:
        return None
    free = list(axes)
    rng.shuffle(free)
    dims = []
    for d in shape:
        chosen: list[str] = []
        left = d
        while free and rng.random() < 0.45 and left % sizes[free[0]] == 0:
            a = free.pop(0)
            chosen.append(f'"{a}"')
            left //= sizes[a]
        open_ = rng.random() < 0.3
        items = chosen + (["?"] if open_ else [])
        dims.append("{" + ", ".join(items) + "}")
    return f"#sdy.sharding<@mesh, [{', '.join(dims)}]>"


class _Gen:
    """A random straight-line program; every value is used (no dead code)."""

    def __init__(self, seed: int, n_ops: int) -> None:
        self.rng = random.Random(seed)
        self.mesh_text, self.axes, self.sizes = self.rng.choice(MESHES)
        self.lines: list[str] = []
        self.values: list[tuple[str, tuple[int, ...]]] = []
        self.unused: set[str] = set()
        self.n = 0
        self.n_ops = n_ops

    def fresh(self, shape: tuple[int, ...]) -> str:
        name = f"%v{self.n}"
        self.n += 1
        self.values.append((name, shape))
        self.unused.add(name)
        return name

    def pick(self, shape: tuple[int, ...] | None = None) -> tuple[str, tuple[int, ...]]:
        cands = [v for v in self.values if shape is None or v[1] == shape]
        # prefer unused values so that nothing is dead
        unused = [v for v in cands if v[0] in self.unused]
        v = (
            self.rng.choice(unused)
            if unused and self.rng.random() < 0.7
            else self.rng.choice(cands)
        )
        self.unused.discard(v[0])
        return v

    def emit(self) -> None:
        rng = self.rng
        name, shape = self.pick()
        kind = rng.choice(
            [
                "ew",
                "ew",
                "unary",
                "transpose",
                "dot",
                "reduce",
                "bcast",
                "reshape",
                "constraint",
            ]
        )
        if kind == "ew":
            other = self.pick(shape)
            op = rng.choice(["add", "multiply", "subtract", "maximum"])
            out = self.fresh(shape)
            self.lines.append(
                f"  {out} = stablehlo.{op} {name}, {other[0]} : {_tensor(shape)}"
            )
        elif kind == "unary":
            op = rng.choice(["negate", "exponential", "tanh"])
            out = self.fresh(shape)
            self.lines.append(f"  {out} = stablehlo.{op} {name} : {_tensor(shape)}")
        elif kind == "transpose" and len(shape) == 2:
            new = (shape[1], shape[0])
            out = self.fresh(new)
            self.lines.append(
                f"  {out} = stablehlo.transpose {name}, dims = [1, 0] : "
                f"({_tensor(shape)}) -> {_tensor(new)}"
            )
        elif kind == "dot" and len(shape) == 2:
            n = rng.choice([8, 16, 32])
            rhs_shape = (shape[1], n)
            rhs = [v for v in self.values if v[1] == rhs_shape]
            if rhs and rng.random() < 0.5:
                rhs_name = rng.choice(rhs)[0]
                self.unused.discard(rhs_name)
            else:
                rhs_name = self.param(rhs_shape)
            new = (shape[0], n)
            out = self.fresh(new)
            self.lines.append(
                f"  {out} = stablehlo.dot_general {name}, {rhs_name}, "
                "contracting_dims = [1] x [0] : "
                f"({_tensor(shape)}, {_tensor(rhs_shape)}) -> {_tensor(new)}"
            )
        elif kind == "reduce" and len(shape) == 2:
            dim = rng.randrange(2)
            new = (shape[1 - dim],)
            init = f"%c{self.n}"
            self.n += 1
            out = self.fresh(new)
            self.lines.append(f"  {init} = stablehlo.constant dense<0.0> : tensor<f32>")
            self.lines.append(
                f"  {out} = stablehlo.reduce({name} init: {init}) applies "
                f"stablehlo.add across dimensions = [{dim}] : "
                f"({_tensor(shape)}, tensor<f32>) -> {_tensor(new)}"
            )
        elif kind == "bcast" and len(shape) == 1:
            extra = rng.choice([8, 16])
            where = rng.randrange(2)
            new = (extra, shape[0]) if where == 0 else (shape[0], extra)
            dims = "[1]" if where == 0 else "[0]"
            out = self.fresh(new)
            self.lines.append(
                f"  {out} = stablehlo.broadcast_in_dim {name}, dims = {dims} : "
                f"({_tensor(shape)}) -> {_tensor(new)}"
            )
        elif kind == "reshape" and len(shape) == 2:
            new = (shape[0] * shape[1],)
            out = self.fresh(new)
            self.lines.append(
                f"  {out} = stablehlo.reshape {name} : "
                f"({_tensor(shape)}) -> {_tensor(new)}"
            )
        elif kind == "reshape" and len(shape) == 1 and shape[0] >= 16:
            new = (shape[0] // 8, 8)
            out = self.fresh(new)
            self.lines.append(
                f"  {out} = stablehlo.reshape {name} : "
                f"({_tensor(shape)}) -> {_tensor(new)}"
            )
        elif kind == "constraint":
            sh = _random_sharding(rng, shape, self.axes, self.sizes)
            if sh is None:
                self.unused.add(name)
                return
            out = self.fresh(shape)
            body = sh[len("#sdy.sharding") :]
            self.lines.append(
                f"  {out} = sdy.sharding_constraint {name} {body} : {_tensor(shape)}"
            )
        else:
            self.unused.add(name)

    def param(self, shape: tuple[int, ...]) -> str:
        name = f"%arg{len(self.params)}"
        self.params.append((name, shape))
        return name

    def program(self) -> str:
        rng = self.rng
        self.params: list[tuple[str, tuple[int, ...]]] = []
        for _ in range(rng.randint(1, 3)):
            shape = (rng.choice([8, 16, 32]), rng.choice([8, 16, 32]))
            name = self.param(shape)
            self.values.append((name, shape))
            self.unused.add(name)
        for _ in range(self.n_ops):
            self.emit()
        results = [v for v in self.values if v[0] in self.unused]
        args = []
        for name, shape in self.params:
            sh = _random_sharding(rng, shape, self.axes, self.sizes)
            attr = f" {{sdy.sharding = {sh}}}" if sh else ""
            args.append(f"{name}: {_tensor(shape)}{attr}")
        res_types = []
        for _, shape in results:
            sh = _random_sharding(rng, shape, self.axes, self.sizes)
            attr = f" {{sdy.sharding = {sh}}}" if sh else ""
            res_types.append(f"{_tensor(shape)}{attr}")
        lines = [f"sdy.mesh @mesh = <{self.mesh_text}>"]
        lines.append(
            f"func.func @main({', '.join(args)}) -> ({', '.join(res_types)}) {{"
        )
        lines.extend(self.lines)
        ret_names = ", ".join(n for n, _ in results)
        ret_types = ", ".join(_tensor(s) for _, s in results)
        lines.append(f"  return {ret_names} : {ret_types}")
        lines.append("}")
        return "\n".join(lines) + "\n"


def generated(seed: int, n_ops: int = 12) -> str:
    return _Gen(seed, n_ops).program()


def _run_profile(
    seeds: range, n_ops: int
) -> tuple[int, int, list[tuple[int, Agreement]]]:
    total = identical = 0
    failures = []
    for seed in seeds:
        agreement = compare(generated(seed, n_ops))
        total += agreement.total
        identical += agreement.identical
        if agreement.differences:
            failures.append((seed, agreement))
    return total, identical, failures


def _report(total: int, identical: int, failures: list[tuple[int, Agreement]]) -> str:
    lines = [f"identical {identical}/{total} = {identical / max(total, 1):.4f}"]
    for seed, a in failures[:10]:
        lines.append(f"seed {seed}:")
        lines.extend(
            f"  {w}\n    shardy:  {t}\n    meshjit: {o}"
            for w, t, o in a.differences[:4]
        )
    return "\n".join(lines)


# The goal is >= 0.99 of values identical. What made meshjit differ before,
# found by running Shardy's passes one at a time on the differing programs:
# - Shardy's op-priority schedule has five stages, the first only for
#   pass-through ops none of whose non-scalar operands has another use
#   (`subtract %c, %c` waits for stage 1), and broadcast forward comes last;
# - MLIR visits a value's uses newest first, so users are pushed onto the
#   worklist in reverse program order;
# - apply-sharding-constraints gives the input a constraint's sharding when
#   the constraint is closed (however many uses the input has) and no other
#   constraint asks for something else, and rewires uses after a chain of
#   constraints to the chain's end.
# Both profiles now agree on every value. The extra long profile (larger
# programs) still differs on one program, pinned in KNOWN_DIFFERENCES with
# what each side costs in resharding bytes under meshjit's partitioner.
GOAL = 0.99
FAST_SEEDS, FAST_OPS = range(80), 12
LONG_SEEDS, LONG_OPS = range(1000, 1600), 25
LARGE_SEEDS, LARGE_OPS = range(2000, 2300), 40


# Seed 22: propagation agrees, but Shardy's export (insert-explicit-reshards)
# then rewrites the dot_general's result to its rhs's sharding [{}, {"x"}] and
# reshards after it; meshjit keeps [{}, {"y"}] and its partitioner reshards
# the rhs instead. Bytes under meshjit's partitioner: Shardy 2080, meshjit 1312.
FAST_KNOWN = {22: (2080, 1312)}


def test_generated_programs_fast_profile() -> None:
    total, identical, failures = _run_profile(FAST_SEEDS, FAST_OPS)
    assert identical / total >= GOAL, _report(total, identical, failures)
    assert {seed for seed, _ in failures} == set(FAST_KNOWN), _report(
        total, identical, failures
    )


@pytest.mark.slow
def test_seed_2033_differs_only_by_shardys_explicit_reshard() -> None:
    text = generated(2033, LARGE_OPS)
    (what, theirs, ours), *rest = compare(text).differences
    assert not rest
    assert "dot_general" in what
    assert '[{"y"}, {"x"}]' in theirs
    assert '[{"y"}, {"z"}]' in ours
    assert 'sdy.reshard %10 <@mesh, [{"y"}, {"z"}]>' in run_shardy(text)


def test_seed_22_differs_only_by_shardys_explicit_reshard() -> None:
    text = generated(22, FAST_OPS)
    (what, theirs, ours), *rest = compare(text).differences
    assert not rest
    assert "dot_general" in what
    assert '[{}, {"x"}]' in theirs
    assert '[{}, {"y"}]' in ours
    # Shardy's propagation chose meshjit's sharding: its export reshards the
    # dot's result to it right after the dot.
    assert 'sdy.reshard %7 <@mesh, [{}, {"y"}]>' in run_shardy(text)


@pytest.mark.slow
def test_generated_programs_long_profile() -> None:
    total, identical, failures = _run_profile(LONG_SEEDS, LONG_OPS)
    assert identical / total >= GOAL, _report(total, identical, failures)
    assert not failures, _report(total, identical, failures)


# seed -> (why, resharding bytes with Shardy's shardings, with meshjit's).
# Propagation agrees on seed 2033; Shardy's export (insert-explicit-reshards)
# then computes a dot_general in its rhs's sharding [{"y"}, {"x"}] and
# reshards the result to the propagated [{"y"}, {"z"}], as on seed 22.
# (Seed 2017 differed until apply-sharding-constraints rewired only from the
# head of a constraint chain, as Shardy does.)
KNOWN_DIFFERENCES = {
    2033: ("Shardy's explicit reshard after a dot_general", 1880, 1232),
}


@pytest.mark.slow
def test_generated_programs_large_profile() -> None:
    total, identical, failures = _run_profile(LARGE_SEEDS, LARGE_OPS)
    assert identical / total >= GOAL, _report(total, identical, failures)
    assert {seed for seed, _ in failures} == set(KNOWN_DIFFERENCES), _report(
        total, identical, failures
    )


@pytest.mark.parametrize(
    ("seed", "n_ops"), [(seed, 30) for seed in range(0, 80, 4)] + [(1459, LONG_OPS)]
)
def test_unrecorded_propagation_matches_recorded(seed: int, n_ops: int) -> None:
    """Without provenance, identity rules take a shortcut and rule outcomes are
    reused; same answer. Seed 1459 has `maximum %v6, %v6` and
    `maximum %v3, %v0` with equal shardings: an outcome must not be reused
    between ops whose operands alias differently."""
    from meshjit.passes.propagation.build import build_problem
    from meshjit.passes.propagation.core import propagate

    graph = read_graph(parse_module(generated(seed, n_ops), make_context()))
    problem = build_problem(graph, Diagnostics()).problem
    recorded, _ = propagate(problem, record=True)
    fast, _ = propagate(problem, record=False)
    assert fast == recorded


def resharding_bytes(text: str) -> int:
    """Bytes meshjit's partitioner moves to honour the module's shardings."""
    import jax

    from meshjit.compiler.spmd import compile_module

    return int(compile_module(text, jax.devices(), "partition").report.total_bytes)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("seed", "n_ops", "shardy", "meshjit"),
    [(22, FAST_OPS, *FAST_KNOWN[22])]
    + [(seed, LARGE_OPS, s, m) for seed, (_, s, m) in KNOWN_DIFFERENCES.items()],
)
def test_known_difference_costs(
    seed: int, n_ops: int, shardy: int, meshjit: int
) -> None:
    """The pinned differences still differ, and cost what the tables say."""
    text = generated(seed, n_ops)
    assert compare(text).differences
    assert resharding_bytes(run_shardy(text)) == shardy
    assert resharding_bytes(run_meshjit(text)) == meshjit


# ---------------------------------------------------------------------------
# Traced real models


def _trace(build: Callable[[], str]) -> str:
    return build()


def _megatron_block() -> str:
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    devices = jax.devices()[:8]
    mesh = Mesh(__import__("numpy").array(devices).reshape(2, 4), ("data", "model"))

    def block(
        x: jax.Array, w1: jax.Array, w2: jax.Array, wq: jax.Array, wo: jax.Array
    ) -> jax.Array:
        q = x @ wq
        att = jax.nn.softmax(q @ jnp.swapaxes(x, -1, -2) / 8.0, axis=-1)
        h = x + (att @ x) @ wo
        return h + jax.nn.gelu(h @ w1) @ w2

    s = lambda *spec: NamedSharding(mesh, P(*spec))  # noqa: E731
    f = jax.jit(
        block,
        in_shardings=(
            s("data", None, None),
            s(None, "model"),
            s("model", None),
            s(None, "model"),
            s("model", None),
        ),
        out_shardings=s("data", None, None),
    )
    x = jax.ShapeDtypeStruct((8, 16, 64), jnp.float32)
    w1 = jax.ShapeDtypeStruct((64, 256), jnp.float32)
    w2 = jax.ShapeDtypeStruct((256, 64), jnp.float32)
    wq = jax.ShapeDtypeStruct((64, 64), jnp.float32)
    wo = jax.ShapeDtypeStruct((64, 64), jnp.float32)
    return str(f.lower(x, w1, w2, wq, wo).as_text())


def _fsdp_step() -> str:
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(__import__("numpy").array(jax.devices()[:8]), ("fsdp",))

    def loss(params: dict[str, jax.Array], x: jax.Array, y: jax.Array) -> jax.Array:
        h = jnp.tanh(x @ params["w1"])
        return jnp.mean((h @ params["w2"] - y) ** 2)

    def step(
        params: dict[str, jax.Array], x: jax.Array, y: jax.Array
    ) -> dict[str, jax.Array]:
        grads = jax.grad(loss)(params, x, y)
        return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)

    ps = {
        "w1": NamedSharding(mesh, P("fsdp", None)),
        "w2": NamedSharding(mesh, P("fsdp", None)),
    }
    xs = NamedSharding(mesh, P("fsdp", None))
    f = jax.jit(step, in_shardings=(ps, xs, xs), out_shardings=ps)
    params = {
        "w1": jax.ShapeDtypeStruct((64, 128), jnp.float32),
        "w2": jax.ShapeDtypeStruct((128, 32), jnp.float32),
    }
    x = jax.ShapeDtypeStruct((32, 64), jnp.float32)
    y = jax.ShapeDtypeStruct((32, 32), jnp.float32)
    return str(f.lower(params, x, y).as_text())


def _conv_net() -> str:
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(
        __import__("numpy").array(jax.devices()[:8]).reshape(4, 2), ("batch", "feat")
    )

    def net(x: jax.Array, k1: jax.Array, k2: jax.Array) -> jax.Array:
        h = jax.lax.conv_general_dilated(
            x, k1, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
        )
        h = jax.nn.relu(h)
        h = jax.lax.conv_general_dilated(
            h, k2, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
        )
        return jnp.mean(h, axis=(1, 2))

    f = jax.jit(
        net,
        in_shardings=(
            NamedSharding(mesh, P("batch")),
            NamedSharding(mesh, P(None, None, None, "feat")),
            NamedSharding(mesh, P()),
        ),
        out_shardings=NamedSharding(mesh, P("batch", None)),
    )
    x = jax.ShapeDtypeStruct((8, 16, 16, 4), jnp.float32)
    k1 = jax.ShapeDtypeStruct((3, 3, 4, 8), jnp.float32)
    k2 = jax.ShapeDtypeStruct((3, 3, 8, 8), jnp.float32)
    return str(f.lower(x, k1, k2).as_text())


def _shard_map_mlp() -> str:
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(
        __import__("numpy").array(jax.devices()[:8]).reshape(2, 4), ("data", "model")
    )

    def body(h: jax.Array) -> jax.Array:
        return jnp.tanh(h) * 2.0

    def net(x: jax.Array, w: jax.Array) -> jax.Array:
        h = x @ w
        y = jax.shard_map(
            body,
            mesh=mesh,
            in_specs=P("data", None),
            out_specs=P("data", None),
            axis_names={"data"},
        )(h)
        return y + 1.0

    f = jax.jit(
        net,
        in_shardings=(
            NamedSharding(mesh, P("data", None)),
            NamedSharding(mesh, P(None, "model")),
        ),
    )
    x = jax.ShapeDtypeStruct((16, 32), jnp.float32)
    w = jax.ShapeDtypeStruct((32, 64), jnp.float32)
    return str(f.lower(x, w).as_text())


MODELS = {
    "shard_map_mlp": _shard_map_mlp,
    "megatron_block": _megatron_block,
    "fsdp_step": _fsdp_step,
    "conv_net": _conv_net,
}


@pytest.mark.devices(8)
@pytest.mark.parametrize("model", sorted(MODELS))
def test_traced_model(model: str) -> None:
    agreement = compare(MODELS[model]())
    assert agreement.share >= 0.99, (
        agreement.total,
        agreement.identical,
        agreement.differences[:6],
    )
