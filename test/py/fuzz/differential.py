"""Run one generated program with meshjit.jit and unsharded, and compare.

`check(prog)` compiles `prog` with `meshjit.jit` on its mesh, runs it on 8 CPU
devices and compares every output with `jax.jit` of the same function on one
device (constraints and nested meshjit.jit made identities): bitwise where the
output is exact, rtol/atol 1e-5 otherwise; each output must also carry the
requested out sharding. `compare_with_shardy(prog)` runs meshjit's
`propagation-pipeline` and Shardy's `sdy-propagation-pipeline` (the test oracle,
never product code) on the same sharded module, compares the shardings value by
value and the bytes meshjit's partitioner moves for each choice.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import meshjit
from meshjit.compiler.diagnostics import Diagnostics
from meshjit.compiler.graph import Opaque, read_graph
from meshjit.compiler.ir import make_context, parse_module, passmanager
from meshjit.compiler.pipeline import Instrumentation, parse_pipeline, run_pipeline
from meshjit.passes.partition import PartitionReport

from .programs import Program

RTOL = ATOL = 1e-5

# Open bugs, each pinned by an xfail(strict=True) test in test_regressions.py:
# the default profile leaves such programs out (so it stays green while the bug
# is open); the long profile runs them and counts their failures as known.
# Delete an entry when its regression test starts passing.
KNOWN_BUGS: dict[str, Callable[[Program], bool]] = {}


def known_bug(prog: Program) -> str | None:
    """The regression test of an open bug this program may hit, if any."""
    return next((name for name, hit in KNOWN_BUGS.items() if hit(prog)), None)


def place_args(prog: Program, mesh: Any) -> list[Any]:
    out: list[Any] = []
    for i, a in zip(prog.inputs, prog.args(), strict=True):
        if i.placed is None:
            out.append(a)
        else:
            sharding = prog.sharding(mesh, i.placed)
            if isinstance(sharding, meshjit.Sharding):
                sharding = sharding.to_jax()  # jax.device_put takes jax's classes
            out.append(jax.device_put(a, sharding))
    return out


def jitted(prog: Program, mesh: Any) -> Callable[..., Any]:
    """meshjit.jit (or pjit, called under `with mesh:`) of the program."""
    kwargs: dict[str, Any] = {"in_shardings": prog.in_shardings(mesh)}
    if prog.out_specs is not None:
        kwargs["out_shardings"] = prog.out_shardings(mesh)
    if prog.api == "kwargs":  # in_shardings by parameter name, keyword call
        names = [f"v{i.vid}" for i in prog.inputs]
        kwargs["in_shardings"] = dict(zip(names, kwargs["in_shardings"], strict=True))
        f = meshjit.jit(prog.build(mesh), **kwargs)

        def by_keyword(*args: Any) -> Any:
            return f(**dict(zip(names, args, strict=True)))

        by_keyword.lower = lambda *args: f.lower(  # type: ignore[attr-defined]
            **dict(zip(names, args, strict=True))
        )
        return by_keyword
    if prog.api != "pjit":
        return meshjit.jit(prog.build(mesh), **kwargs)
    f = meshjit.pjit(prog.build(mesh), **kwargs)

    def under_mesh(*args: Any) -> Any:
        with mesh:
            return f(*args)

    def lower(*args: Any) -> Any:
        with mesh:
            return f.lower(*args)

    under_mesh.lower = lower  # type: ignore[attr-defined]
    return under_mesh


def reference(prog: Program) -> list[np.ndarray[Any, Any]]:
    one = jax.devices()[0]
    args = [jax.device_put(a, one) for a in prog.args()]
    outs = jax.tree.leaves(jax.jit(prog.build(None))(*args))
    return [np.asarray(o) for o in outs]


def check(prog: Program) -> None:
    """Raises AssertionError (with the program) when meshjit differs."""
    mesh = prog.mesh()
    f = jitted(prog, mesh)
    got = jax.tree.leaves(f(*place_args(prog, mesh)))
    again = jax.tree.leaves(f(*place_args(prog, mesh)))  # from the cache
    for a, b in zip(got, again, strict=True):
        np.testing.assert_array_equal(
            np.asarray(a), np.asarray(b), err_msg=f"second call\n{prog.describe()}"
        )
    same_as_unsharded(prog, got, "")
    for k, g in enumerate(got):
        spec = None if prog.out_specs is None else prog.out_specs[k]
        if spec is not None:
            want_sharding = NamedSharding(prog.mesh_jax(), P(*spec))
            assert g.sharding.is_equivalent_to(want_sharding, g.ndim), (
                f"output {k} has {g.sharding}, asked {spec}\n{prog.describe()}"
            )


_UNIT = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


@contextmanager
def _memory_limit(text: str) -> Iterator[None]:
    old = os.environ.get("MESHJIT_MEMORY_LIMIT")
    os.environ["MESHJIT_MEMORY_LIMIT"] = text
    try:
        yield
    finally:
        if old is None:
            del os.environ["MESHJIT_MEMORY_LIMIT"]
        else:
            os.environ["MESHJIT_MEMORY_LIMIT"] = old


def check_memory_limited(prog: Program) -> float:
    """The program under a per-device memory limit just above what its values
    take as laid out (the partitioner's estimate, read from the error a
    1-byte limit gives): every gather of a whole dim that would raise the
    peak is refused and the pieces are exchanged instead. It must match the
    unsharded run. Returns the limit."""
    mesh = prog.mesh()
    with _memory_limit("1"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            jitted(prog, mesh).lower(*place_args(prog, mesh)).compile()
        except meshjit.ShardingError as err:
            found = re.search(
                r"take an estimated ([0-9.]+) (B|KiB|MiB|GiB) per device", str(err)
            )
            if found is None:
                raise
        else:
            raise AssertionError(f"a 1-byte limit was met\n{prog.describe()}")
    limit = float(found.group(1)) * _UNIT[found.group(2)] * 1.01 + 8
    with _memory_limit(f"{limit:.0f}"):
        check(prog)
    return limit


def check_auto(prog: Program) -> None:
    """The program with every argument and output AUTO (meshjit chooses the
    layouts by its integer program; `with_sharding_constraint`s inside stay
    as written): it runs, matches the unsharded run, and reports a
    sharding on the program's mesh for every argument."""
    mesh = prog.mesh()
    auto = meshjit.sharding.AUTO(mesh)
    f = meshjit.jit(prog.build(mesh), in_shardings=auto, out_shardings=auto)
    args = prog.args()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # host arguments: moved without a note
        if prog.api == "pjit":  # bare PartitionSpecs inside: the mesh context
            with mesh:
                compiled = f.lower(*args).compile()
        else:
            compiled = f.lower(*args).compile()
        got = jax.tree.leaves(compiled(*args))
    for s in jax.tree.leaves(compiled.input_shardings):
        assert s.mesh.shape == prog.mesh_jax().shape, prog.describe()
    same_as_unsharded(prog, got, " (all AUTO)")


def same_as_unsharded(prog: Program, got: list[Any], label: str) -> None:
    """Each output equals the unsharded run's: bitwise where exact."""
    want = reference(prog)
    values = prog.output_values()
    assert len(got) == len(want) == len(values), prog.describe()
    for k, (g, w, v) in enumerate(zip(got, want, values, strict=True)):
        where = f"output {k}{label} of\n{prog.describe()}"
        assert isinstance(g, jax.Array), where
        assert g.shape == w.shape, where
        assert g.dtype == w.dtype, where
        if v.exact:
            np.testing.assert_array_equal(np.asarray(g), w, err_msg=where)
        else:
            np.testing.assert_allclose(
                np.asarray(g), w, rtol=RTOL, atol=ATOL, err_msg=where
            )


# ----------------------------------------------------------------------------
# Propagation against Shardy's (test oracle)


def _shardy(text: str) -> Any:
    ctx = make_context()
    module = parse_module(text, ctx)
    with ctx:
        pm = passmanager.PassManager.parse("builtin.module(sdy-propagation-pipeline)")
        pm.run(module.operation)
    return module


def _meshjit(text: str) -> Any:
    ctx = make_context()
    module = parse_module(text, ctx)
    run_pipeline(parse_pipeline("propagation-pipeline", ctx), module, "-")
    return module


_SKIP_OPS = ("func.return", "stablehlo.return", "sdy.return", "stablehlo.constant")


def value_shardings(module: Any) -> dict[str, list[tuple[str, str]]]:
    """Per function: (what, sharding) for its args, results and op results.

    Keyed by function name, since Shardy may reorder functions.
    """
    graph = read_graph(module)
    out: dict[str, list[tuple[str, str]]] = {}
    for func in graph.funcs():
        block = func.regions[0][0]
        items: list[tuple[str, str]] = []
        for key, count in (("arg_attrs", len(block.args)), ("res_attrs", -1)):
            entries = func.attr(key)
            found = entries if isinstance(entries, tuple) else ()
            if count >= 0 and not found:
                found = ({},) * count
            for i, entry in enumerate(found):
                attr = entry.get("sdy.sharding") if hasattr(entry, "get") else None
                text = attr.text if isinstance(attr, Opaque) else ""
                items.append((f"{key}[{i}]", _norm(text)))
        for node in graph.walk(block):
            if node.op.startswith("sdy.") or node.op in _SKIP_OPS or not node.results:
                continue
            attr = node.attr("sdy.sharding")
            text = attr.text if isinstance(attr, Opaque) else ""
            items.append((f"{node.op} #{len(items)}", _norm(text)))
        out[str(func.attr("sym_name"))] = items
    return out


def _norm(text: str) -> str:
    """Sharding text; a sharding over no axes (replicated) reads as no sharding."""
    return text if '"' in text else ""


def _partition_bytes(module: Any) -> int:
    inst = Instrumentation(reports=frozenset({"collectives"}))
    diags = Diagnostics(source_name="-", requested=inst.reports)
    run_pipeline(parse_pipeline("partition", module.context), module, "-", inst, diags)
    report = diags.payloads.get("partition")
    assert isinstance(report, PartitionReport)
    return report.total_bytes


@dataclass(frozen=True)
class Agreement:
    values: int
    identical: int
    structure_differs: bool
    meshjit_bytes: int | None  # bytes meshjit's partitioner moves on each choice
    shardy_bytes: int | None


def compare_with_shardy(prog: Program) -> Agreement:
    mesh = prog.mesh()
    args = place_args(prog, mesh)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text = jitted(prog, mesh).lower(*args).as_text("sharded")
    ours, theirs = _meshjit(text), _shardy(text)
    a, b = value_shardings(ours), value_shardings(theirs)
    total = sum(len(v) for v in b.values())
    if a.keys() != b.keys() or any(
        [w for w, _ in a[f]] != [w for w, _ in b[f]] for f in a
    ):
        return Agreement(total, 0, True, None, None)
    same = sum(x == y for f in a for (_, x), (_, y) in zip(a[f], b[f], strict=True))
    if same == total:
        return Agreement(total, same, False, None, None)
    return Agreement(
        total, same, False, _partition_bytes(ours), _partition_bytes(theirs)
    )
