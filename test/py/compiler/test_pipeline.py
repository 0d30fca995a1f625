"""Pipeline text: meshjit passes with typed options, aliases, upstream passes."""

from __future__ import annotations

import dataclasses
import enum
from typing import ClassVar

import pytest

from meshjit.compiler.diagnostics import Diagnostics
from meshjit.compiler.ir import ir, make_context
from meshjit.compiler.pass_base import ModulePass
from meshjit.compiler.pipeline import UpstreamPass, parse_pipeline
from meshjit.errors import PipelineError


class Strategy(enum.Enum):
    BASIC = "basic"
    AGGRESSIVE = "aggressive"


@dataclasses.dataclass(frozen=True)
class ToyPass(ModulePass):
    """A pass with one option of each kind."""

    name: ClassVar[str] = "toy"
    max_iters: int = 32
    strategy: Strategy = Strategy.AGGRESSIVE
    conservative: bool = False
    ratio: float = 1.0

    def run(self, module: ir.Module, diags: Diagnostics) -> None:
        del module, diags


def test_options_convert_by_type() -> None:
    p = ToyPass.from_options(
        {"max-iters": "8", "strategy": "basic", "conservative": "true", "ratio": "0.5"}
    )
    assert p == ToyPass(8, Strategy.BASIC, True, 0.5)
    assert (
        p.pipeline_text()
        == "toy{max-iters=8 strategy=basic conservative=true ratio=0.5}"
    )
    assert ToyPass().pipeline_text() == "toy"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"max-iters": "eight"},
            "option 'max-iters' of pass 'toy' expects an integer, got 'eight'",
        ),
        ({"strategy": "greedy"}, "expects one of basic, aggressive, got 'greedy'"),
        ({"conservative": "maybe"}, "expects true or false, got 'maybe'"),
        ({"ratio": "x"}, "expects a number, got 'x'"),
        ({"max_iters": "3"}, r"pass 'toy' has no option 'max_iters' \(its options: "),
    ],
)
def test_bad_option_values_name_the_option(
    options: dict[str, str], message: str
) -> None:
    with pytest.raises(PipelineError, match=message):
        ToyPass.from_options(options)


def test_option_descriptions_for_list_passes() -> None:
    described = [o.describe() for o in ToyPass.options()]
    assert described == [
        "max-iters=<int> (default: 32)",
        "strategy=<basic|aggressive> (default: aggressive)",
        "conservative=<bool> (default: false)",
        "ratio=<float> (default: 1.0)",
    ]


def test_upstream_passes_parse_with_options_and_nesting() -> None:
    stages = parse_pipeline(
        "builtin.module(canonicalize{max-iterations=2},func.func(cse),symbol-dce)",
        make_context(),
    )
    assert stages == [
        UpstreamPass("canonicalize{max-iterations=2}"),
        UpstreamPass("func.func(cse)"),
        UpstreamPass("symbol-dce"),
    ]
    assert [s.name for s in stages] == ["canonicalize", "func.func", "symbol-dce"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("frobnicate", r"unknown pass 'frobnicate' \(known: .*canonicalize"),
        ("cse,,canonicalize", "empty pass name at column 5"),
        ("cse{", "unbalanced brackets"),
        ("cse)", r"unbalanced '\)' at column 4"),
        ("canonicalize{max-iterations=x}", "bad options for pass 'canonicalize'"),
        ("sdy-basic-propagate", "one of Shardy's passes"),
        (
            "propagation-pipeline{dedup=true}",
            r"no option dedup \(it takes dedup-functions-fully\)",
        ),
        (
            "propagation-pipeline{dedup-functions-fully=maybe}",
            "must be one of false, true",
        ),
        ("spmd-pipeline{x=1}", r"no option x \(it takes no options\)"),
    ],
)
def test_bad_pipelines_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(PipelineError, match=message):
        parse_pipeline(text, make_context())


def test_pipeline_alias_options_choose_the_expansion() -> None:
    from meshjit.passes import PropagatePass
    from meshjit.passes.propagation.calls import Callees

    def callees(text: str) -> Callees:
        stages = parse_pipeline(text, make_context())
        (prop,) = [s for s in stages if isinstance(s, PropagatePass)]
        return prop.callees

    assert callees("propagation-pipeline") is Callees.COPIES
    assert (
        callees("propagation-pipeline{dedup-functions-fully=false}") is Callees.COPIES
    )
    assert callees("propagation-pipeline{dedup-functions-fully=true}") is Callees.SHARED
    assert callees("propagation-pipeline{dedup-functions-fully}") is Callees.SHARED
    assert callees("propagate") is Callees.AS_WRITTEN


def test_empty_pipeline_is_no_stages() -> None:
    assert parse_pipeline("", make_context()) == []
    assert parse_pipeline("builtin.module()", make_context()) == []


@dataclasses.dataclass(frozen=True)
class GcProbePass(ModulePass):
    """Records whether the cyclic collector runs during a pass; can fail."""

    name: ClassVar[str] = "gc-probe"
    fail: bool = False
    seen: ClassVar[list[bool]] = []

    def run(self, module: ir.Module, diags: Diagnostics) -> None:
        import gc

        self.seen.append(gc.isenabled())
        if self.fail:
            raise PipelineError("probe failed")


@pytest.mark.parametrize("enabled_before", [True, False])
@pytest.mark.parametrize("fail", [False, True])
def test_the_collector_pauses_during_passes_and_comes_back(
    enabled_before: bool, fail: bool
) -> None:
    import gc

    from meshjit.compiler.diagnostics import DiagnosticError
    from meshjit.compiler.ir import parse_module
    from meshjit.compiler.pipeline import run_pipeline

    ctx = make_context()
    module = parse_module("module {}", ctx)
    GcProbePass.seen.clear()
    (gc.enable if enabled_before else gc.disable)()
    try:
        if fail:
            with pytest.raises(DiagnosticError, match="probe failed"):
                run_pipeline([GcProbePass(fail=True)], module, "-")
        else:
            run_pipeline([GcProbePass()], module, "-")
        assert GcProbePass.seen == [False]
        assert gc.isenabled() is enabled_before
    finally:
        gc.enable()


@dataclasses.dataclass(frozen=True)
class BreakPass(ModulePass):
    """Leaves the module invalid (a func.func whose return does not match)."""

    name: ClassVar[str] = "break"

    def run(self, module: ir.Module, diags: Diagnostics) -> None:
        func = module.body.operations[0]
        ret = func.regions[0].blocks[0].operations[0]
        ret.operation.erase()
        with ir.InsertionPoint(func.regions[0].blocks[0]), ir.Location.unknown():
            ir.Operation.create("func.return", operands=[])


@pytest.mark.parametrize(
    ("each", "last", "caught_after"),
    [(True, False, "break"), (False, True, "toy"), (False, False, None)],
)
def test_verification_after_each_pass_or_the_last(
    each: bool, last: bool, caught_after: str | None
) -> None:
    """meshjit-opt verifies after every pass (naming the one that broke the
    module); meshjit.jit's compiles verify once, after the last; mlir-opt's
    --no-verify-each verifies nothing."""
    from meshjit.compiler.diagnostics import DiagnosticError
    from meshjit.compiler.ir import parse_module
    from meshjit.compiler.pipeline import Instrumentation, run_pipeline

    text = (
        "func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
        "  return %x : tensor<2xf32>\n}"
    )
    module = parse_module(text, make_context())
    inst = Instrumentation(verify_each=each, verify_last=last)
    stages = [BreakPass(), ToyPass()]
    if caught_after is None:
        run_pipeline(stages, module, "f.mlir", inst)
        return
    with pytest.raises(
        DiagnosticError, match=f"does not verify after pass '{caught_after}'"
    ):
        run_pipeline(stages, module, "f.mlir", inst)
