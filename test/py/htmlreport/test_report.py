"""The HTML report: its data (what the page shows), the page being one
self-contained file, `meshjit-opt --report`, and a real-model train step's
page rendered in headless Chromium (skipped where Chromium is missing)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import meshjit
from meshjit import NamedSharding, P
from meshjit.compiler.diagnostics import SourceLoc
from meshjit.dialects.sdy_text import parse_mesh, parse_sharding
from meshjit.htmlreport.model import device_blocks, local_bytes, scope_of

pytestmark = pytest.mark.devices(8)

ROOT = Path(__file__).parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.report_pages import chromium, open_headless, workload_report  # noqa: E402
from bench.scaling import chain_module  # noqa: E402


def page_data(path: str) -> dict[str, Any]:
    text = Path(path).read_text()
    m = re.search(
        r'<script id="report-data" type="application/json">(.*?)</script>', text, re.S
    )
    assert m is not None
    return dict(json.loads(m.group(1)))


def two_layers(x: jax.Array, w: jax.Array) -> jax.Array:
    with jax.named_scope("layer1"):
        h = jnp.tanh(x @ w)
    with jax.named_scope("layer2"):
        return (h @ w.T).sum(0)


@pytest.fixture(scope="module")
def mesh() -> meshjit.Mesh:
    return meshjit.Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("x", "y"))


@pytest.fixture(scope="module")
def small(mesh: meshjit.Mesh, tmp_path_factory: pytest.TempPathFactory) -> Any:
    f = meshjit.jit(
        two_layers,
        in_shardings=(
            NamedSharding(mesh, P("x", None)),
            NamedSharding(mesh, P(None, "y")),
        ),
    )
    x, w = jnp.ones((8, 16)), jnp.ones((16, 32))
    compiled = f.lower(x, w).compile()
    path = compiled.report(tmp_path_factory.mktemp("report") / "small.html")
    return compiled, path, page_data(path)


def test_page_is_one_self_contained_file(small: Any) -> None:
    _, path, _ = small
    text = Path(path).read_text()
    assert text.startswith("<!DOCTYPE html>")
    # Nothing is fetched when the page is viewed: no external script,
    # stylesheet, image or font.
    assert not re.search(r"<(script|img|iframe)[^>]*\ssrc=", text)
    assert "<link" not in text
    assert not re.search(r"url\((?!#)", text)
    assert "Copyright (c) 2012-2014 Chris Pettitt" in text  # dagre's licence kept


def test_arguments_results_and_mesh(small: Any) -> None:
    _, _, d = small
    assert d["mesh"]["axes"] == [["x", 2], ["y", 4]]
    assert d["mesh"]["devices"] == list(range(8))
    x, w = d["arguments"]
    assert (x["name"], w["name"]) == ("`x`", "`w`")
    assert x["sharding"] == '[{"x"}, {}]'
    assert (x["bytes"], x["local_bytes"]) == (8 * 16 * 4, 4 * 16 * 4)
    # devices 0-3 hold rows block 0, devices 4-7 block 1; every column whole
    assert [c["block"] for c in x["grid"]["cells"]] == [[0, None]] * 4 + [[1, None]] * 4
    assert [c["block"] for c in w["grid"]["cells"]] == [[None, i % 4] for i in range(8)]
    (out,) = d["results"]
    assert out["name"] == "`result`"
    assert out["shape"] == [16]


def test_graph_groups_by_named_scope(small: Any) -> None:
    _, _, d = small
    labels = {g["id"]: g["label"] for g in d["groups"]}
    ops = {n["op"]: labels[n["group"]] for n in d["nodes"] if n["kind"] == "op"}
    assert ops["tanh"] == "layer1"
    assert ops["transpose"] == "layer2"
    assert ops["reduce"] == "layer2"
    # every edge joins two drawn boxes
    ids = {n["id"] for n in d["nodes"]}
    assert all(e["src"] in ids and e["dst"] in ids for e in d["edges"])


def test_collectives_match_the_partitioner(small: Any) -> None:
    compiled, _, d = small
    inserted = compiled.partition_report.collectives
    assert len(d["collectives"]) == len(inserted) >= 1
    for row, c in zip(d["collectives"], inserted, strict=True):
        assert (row["kind"], row["bytes"], row["reason"]) == (
            c.kind,
            c.bytes_per_device,
            c.reason,
        )
        # attached to the op that needed it, which is drawn
        node = next(n for n in d["nodes"] if n["id"] == row["node"])
        assert node["op"] == c.op.removeprefix("stablehlo.")
    assert d["totals"]["bytes"] == compiled.partition_report.total_bytes


def test_memory_and_origins(small: Any) -> None:
    _, _, d = small
    m = d["memory"]
    # per device: x's block (256 B) and w's (512 B) are the arguments
    assert m["arguments"] == 256 + 512
    assert m["peak"] >= m["arguments"] + m["results"]
    assert m["xla"]["argument"] > 0
    # the first dot's result got its axes from both arguments: its steps
    # point back at rows of `values` that are the arguments
    dot = next(v for v in d["values"] if v["n"].startswith("dot_general result 0"))
    sources = {d["values"][st[5]]["n"] for st in dot["st"]}
    assert sources == {"`x`", "`w`"}
    assert d["values"][0]["o"], "argument x carries its user sharding as origin"


def test_device_blocks_any_rank_and_sub_axes() -> None:
    mesh = parse_mesh('<["a"=2, "b"=4]>')
    s = parse_sharding('<@m, [{"b":(2)2}, {}, {"a", "b":(1)2}]>')
    blocks = device_blocks(s, mesh, (4, 3, 8))
    # device at (a, b): dim 0 block = b // 2; dim 2 block = a * 2 + b % 2
    want = [[b // 2, None, a * 2 + b % 2] for a in range(2) for b in range(4)]
    assert blocks == want
    assert local_bytes(s, mesh, (4, 3, 8), "f32") == 2 * 3 * 2 * 4
    # uneven: 5 rows over 2 devices -> blocks of 3 (padded)
    assert local_bytes(parse_sharding('<@m, [{"a"}]>'), mesh, (5,), "bf16") == 3 * 2


def test_scope_of_location_names() -> None:
    loc = SourceLoc("m.py", 3, 1, "jit(step)/transpose(jvp(block))/attn/dot_general")
    assert scope_of(loc) == ["transpose(jvp(block))", "attn"]
    assert scope_of(SourceLoc("m.py", 3, 1, "")) == []


def test_meshjit_report_function_on_a_plain_function(
    mesh: meshjit.Mesh, tmp_path: Path
) -> None:
    x = jax.device_put(jnp.ones((8, 4)), NamedSharding(mesh, P("x")).to_jax())
    path = meshjit.report(lambda a: a * 2, x, path=tmp_path / "r.html", bound_bytes=0)
    assert path == str(tmp_path / "r.html")
    d = page_data(path)
    assert d["totals"]["count"] == 0
    assert d["totals"]["bound"] == 0


def test_results_are_shown_as_laid_out(mesh: meshjit.Mesh, tmp_path: Path) -> None:
    """A result is drawn in its out_sharding's layout, not its value's, and
    the gather between the two sits on the edge from the multiply (computed
    on blocks, its result gathered) to the results box."""
    x = jax.device_put(jnp.ones((8, 4)), NamedSharding(mesh, P("x")).to_jax())
    f = meshjit.jit(lambda a: a * 2, out_shardings=NamedSharding(mesh, P()))
    d = page_data(meshjit.report(f, x, path=tmp_path / "r.html"))
    (out,) = d["results"]
    assert out["sharding"] == "replicated"
    assert out["local_bytes"] == out["bytes"] == 8 * 4 * 4
    assert d["values"][out["row"]]["s"] == d["shardings"].index('[{"x"}, {}]')
    (gather,) = d["collectives"]
    assert gather["kind"] == "all-gather"
    node = next(n for n in d["nodes"] if n["id"] == gather["node"])
    assert node["op"] == "multiply"
    edge = d["edges"][gather["edge"]]
    assert (edge["src"], edge["dst"], edge["c"]) == (gather["node"], "r", [0])


def opt(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "meshjit.compiler.opt", *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    )


def test_meshjit_opt_report(tmp_path: Path) -> None:
    src = tmp_path / "chain.mlir"
    src.write_text(chain_module(3, (("x", 2), ("y", 4)), 16))
    out = tmp_path / "chain.html"
    run = opt(str(src), "-p", "spmd-pipeline", "--report", str(out), "--collectives")
    assert run.returncode == 0, run.stderr
    listed = [line for line in run.stderr.splitlines() if line.startswith("  all-")]
    d = page_data(str(out))
    assert len(d["collectives"]) == len(listed) >= 1
    assert d["op_count"] == 15
    assert d["title"] == "chain.mlir"


def test_meshjit_opt_report_errors(tmp_path: Path) -> None:
    src = tmp_path / "chain.mlir"
    src.write_text(chain_module(1, (("x", 2),), 4))
    run = opt(
        str(src), "-p", "propagation-pipeline", "--report", str(tmp_path / "r.html")
    )
    assert run.returncode == 1
    assert run.stderr.strip() == (
        "meshjit-opt: error: --report: the report needs a pipeline that ends in "
        "the partition pass (e.g. spmd-pipeline, or propagation-pipeline,partition)"
    )
    run = opt(
        str(src), "-p", "spmd-pipeline", "--split-input-file", "--report", "r.html"
    )
    assert run.returncode == 1
    assert "cannot be combined with --split-input-file" in run.stderr
    missing = tmp_path / "no" / "such" / "dir.html"
    run = opt(str(src), "-p", "spmd-pipeline", "--report", str(missing))
    assert run.returncode == 1
    assert run.stderr.startswith(f"meshjit-opt: error: cannot write '{missing}'")


@pytest.mark.skipif(
    chromium() is None, reason="no chromium in PATH (apt install chromium)"
)
def test_real_model_train_step_renders_in_headless_chromium(tmp_path: Path) -> None:
    """gpt2_train (DP x TP, fused QKV, tied embedding): the page renders with
    no console message, and its collectives table has one row per
    collective that `collectives_text` (as `--collectives`) lists. The
    screenshot is kept for a person to look at (MESHJIT_TEST_ARTIFACTS, or
    the test's temp folder)."""
    path, compiled = workload_report("gpt2_train", 0, str(tmp_path / "gpt2_train.html"))
    artifacts = Path(os.environ.get("MESHJIT_TEST_ARTIFACTS", tmp_path))
    artifacts.mkdir(parents=True, exist_ok=True)
    shot = artifacts / "gpt2_train_report.png"
    opened = open_headless(path, screenshot=str(shot))
    assert opened.console == []
    assert opened.status == "ok"
    rows = len(re.findall(r'<tr class="coll"', opened.dom))
    # one line per collective (then the total and what combining merged)
    listed = [x for x in compiled.collectives_text().splitlines() if " axes {" in x]
    assert rows == len(listed) >= 10
    assert shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")
