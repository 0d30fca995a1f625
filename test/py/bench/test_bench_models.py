"""The real-model workloads trace and lower under plain jax.jit with each of
their layouts (spec trees match the arguments, sharded dims divide). No
compile, no timing: the bench itself runs them."""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import pytest

pytestmark = pytest.mark.devices(8)

ROOT = Path(__file__).parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.measure import _shardings, mesh_of  # noqa: E402
from bench.models import MODELS  # noqa: E402
from bench.workloads import Layout, Workload  # noqa: E402

CASES = [(w, lay) for w in MODELS for lay in w.layouts]


@pytest.mark.parametrize(
    ("work", "layout"), CASES, ids=[f"{w.name}-{lay.name}" for w, lay in CASES]
)
def test_model_lowers_under_jax_jit(work: Workload, layout: Layout) -> None:
    mesh = mesh_of(layout.mesh)
    jitted = jax.jit(
        work.fn,
        in_shardings=_shardings(mesh, layout.in_specs),
        out_shardings=_shardings(mesh, layout.out_specs),
    )
    assert "func.func" in jitted.lower(*work.make_args()).as_text()


def test_model_rows_are_distinct() -> None:
    keys = [(w.name, lay.name) for w, lay in CASES]
    assert len(keys) == len(set(keys))
