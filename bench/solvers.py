"""The auto-sharding solver choice, measured: HiGHS (scipy, what meshjit
uses) against OR-Tools CP-SAT (what XLA's auto-sharding uses) on the same
problems.

`python -m bench.solvers --cpsat-python PATH [--out FILE]`: builds the
auto-shard problem of each bench model on the meshes (8,) and (2, 4),
solves it with meshjit's HiGHS model here, writes it as JSON and solves it
with CP-SAT in the interpreter PATH (an environment with `pip install
ortools`; ortools is not a meshjit dependency), then prints both solve times
and objectives. The CP-SAT model is the same integer program: one Boolean
per strategy, Boolean edge variables under the same marginal rows, costs
rounded to nanoseconds.
"""

from __future__ import annotations

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse
import json
import subprocess
import sys
import tempfile
import time
from typing import Any

CPSAT_CHILD = "--solve-json"


def problems(names: list[str], meshes: list[str]) -> list[tuple[str, Any]]:
    """(label, Problem) per bench model and mesh, as meshjit.jit builds it."""
    import meshjit
    from bench.auto import BATCH_ARGS, _find
    from bench.workloads import bench_mesh
    from meshjit.compiler.graph import read_graph
    from meshjit.compiler.inline import inline_calls
    from meshjit.compiler.ir import make_context, parse_module
    from meshjit.passes.autoshard.build import build
    from meshjit.passes.partitioner.cost import PLATFORMS
    from meshjit.sharding import AUTO

    out = []
    for name in names or list(BATCH_ARGS):
        work = _find(name)
        for mesh_name in meshes:
            mesh = bench_mesh(mesh_name)
            f = meshjit.jit(work.fn, in_shardings=AUTO(mesh), out_shardings=AUTO(mesh))
            text = f.lower(*work.make_args()).as_text("sharded", debug_info=True)
            module = parse_module(text, make_context(), name)
            inline_calls(module)
            built = build(read_graph(module, name), PLATFORMS["cpu"])
            out.append((f"{name}/{mesh_name}", built.problem))
    return out


def to_json(problem: Any) -> dict[str, Any]:
    return {
        "costs": [list(c) for c in problem.costs],
        "edges": [
            [
                e.src,
                e.dst,
                list(e.src_class),
                list(e.dst_class),
                [list(r) for r in e.cost],
            ]
            for e in problem.edges
        ],
        "shared": [[s.seconds, [list(m) for m in s.members]] for s in problem.shared],
        "fanouts": [
            [
                f.src,
                list(f.src_class),
                [[g, list(w)] for g, w in f.readers],
                [list(r) for r in f.cost],
            ]
            for f in problem.fanouts
        ],
    }


def solve_cpsat(data: dict[str, Any], time_limit: float) -> dict[str, Any]:
    """The same integer program in CP-SAT (runs in the ortools interpreter)."""
    from ortools.sat.python import cp_model

    def ns(seconds: float) -> int:
        return round(seconds * 1e9)

    m = cp_model.CpModel()
    s = [[m.NewBoolVar("") for _ in c] for c in data["costs"]]
    terms = []
    for g, c in enumerate(data["costs"]):
        m.AddExactlyOne(s[g])
        terms += [ns(x) * v for x, v in zip(c, s[g], strict=True)]

    def marginals(src: int, a_of: list[int], dst: int, b_of: list[int]) -> Any:
        n_a, n_b = max(a_of) + 1, max(b_of) + 1
        e = [[m.NewBoolVar("") for _ in range(n_b)] for _ in range(n_a)]
        for a in range(n_a):
            m.Add(sum(e[a]) == sum(s[src][i] for i, k in enumerate(a_of) if k == a))
        for b in range(n_b):
            m.Add(
                sum(e[a][b] for a in range(n_a))
                == sum(s[dst][j] for j, k in enumerate(b_of) if k == b)
            )
        return e

    for src, dst, a_of, b_of, cost in data["edges"]:
        e = marginals(src, a_of, dst, b_of)
        for a, row in enumerate(cost):
            terms += [ns(x) * e[a][b] for b, x in enumerate(row) if x]
    for seconds, members in data["shared"]:
        z = m.NewBoolVar("")
        for g, i in members:
            m.AddImplication(s[g][i], z)
        terms.append(ns(seconds) * z)
    for src, a_of, readers, cost in data["fanouts"]:
        u = {}
        for g, want in readers:
            e = marginals(src, a_of, g, want)
            for a, row in enumerate(e):
                for b, var in enumerate(row):
                    if cost[a][b]:
                        if (a, b) not in u:
                            u[a, b] = m.NewBoolVar("")
                            terms.append(ns(cost[a][b]) * u[a, b])
                        m.AddImplication(var, u[a, b])
    m.Minimize(sum(terms))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit
    solver.parameters.num_workers = 1  # deterministic, like HiGHS here
    start = time.perf_counter()
    status = solver.Solve(m)
    return {
        "seconds": time.perf_counter() - start,
        "status": solver.StatusName(status),
        "objective_us": solver.ObjectiveValue() / 1e3,
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == CPSAT_CHILD:
        with open(argv[1], encoding="utf-8") as f:
            data = json.load(f)
        print(json.dumps(solve_cpsat(data, float(argv[2]))))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpsat-python", required=True)
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--mesh", action="append", choices=("8", "2x4"))
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    from meshjit.passes.autoshard.ilp import solve

    lines = [
        "| problem | variables (HiGHS) | HiGHS | CP-SAT (1 worker) | objective "
        "HiGHS / CP-SAT |",
        "|---|---|---|---|---|",
    ]
    for label, problem in problems(args.only, args.mesh or ["8", "2x4"]):
        highs = solve(problem, args.time_limit)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(to_json(problem), f)
        run = subprocess.run(
            [
                args.cpsat_python,
                "-m",
                "bench.solvers",
                CPSAT_CHILD,
                f.name,
                str(args.time_limit),
            ],
            capture_output=True,
            text=True,
            check=False,
            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        )
        os.unlink(f.name)
        if run.returncode != 0:
            cp = {
                "seconds": float("nan"),
                "status": run.stderr[-200:],
                "objective_us": 0,
            }
        else:
            cp = json.loads(run.stdout.strip().splitlines()[-1])
        ratio = highs.objective * 1e6 / cp["objective_us"] if cp["objective_us"] else 0
        line = (
            f"| {label} | {highs.variables} | {highs.seconds:.2f} s ({highs.status}) | "
            f"{cp['seconds']:.2f} s ({cp['status']}) | {ratio:.4f} |"
        )
        print(line, flush=True)
        lines.append(line)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
