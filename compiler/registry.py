"""Name -> pass class, built once from `meshjit.passes.ALL_PASSES`, plus named
pipelines (aliases) and the upstream MLIR passes meshjit-opt may also run."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from meshjit.compiler.pass_base import ModulePass
from meshjit.errors import InternalError


@dataclass(frozen=True, slots=True)
class PipelineAlias:
    """A registered name that expands to pipeline text (`propagation-pipeline`)."""

    name: str
    pipeline: str
    summary: str
    # options the name takes: (option, help, ((value, pipeline text), ...));
    # a value not listed is an error, the default pipeline is `pipeline`
    options: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...] = ()

    def expand(self, options: dict[str, str]) -> str:
        """The pipeline text for these options (at most one may be given)."""
        known = {name: dict(values) for name, _help, values in self.options}
        unknown = sorted(set(options) - set(known))
        if unknown:
            takes = ", ".join(known) or "no options"
            raise ValueError(
                f"pipeline '{self.name}' has no option {', '.join(unknown)} "
                f"(it takes {takes})"
            )
        if len(options) > 1:
            raise ValueError(f"pipeline '{self.name}' takes one option at a time")
        for name, value in options.items():
            text = known[name].get(value)
            if text is None:
                raise ValueError(
                    f"pipeline '{self.name}': option {name}={value} must be one of "
                    f"{', '.join(known[name])}"
                )
            return text
        return self.pipeline


# Upstream MLIR passes jaxlib registers that are useful around meshjit's own.
# Any other pass jaxlib registers is accepted too (except Shardy's, see pipeline.py).
UPSTREAM_PASSES: tuple[tuple[str, str], ...] = (
    ("canonicalize", "MLIR's canonicalizer: folds and simplifies ops"),
    ("cse", "MLIR's common subexpression elimination"),
    (
        "inline",
        "MLIR's inliner (it leaves calls of StableHLO bodies alone in jaxlib; "
        "meshjit's passes handle calls themselves)",
    ),
    ("symbol-dce", "MLIR's dead symbol elimination: drops unused private funcs"),
)


@cache
def pass_classes() -> dict[str, type[ModulePass]]:
    from meshjit.passes import ALL_PASSES

    table: dict[str, type[ModulePass]] = {}
    for cls in ALL_PASSES:
        if not cls.name:
            raise InternalError(f"pass class {cls.__name__} has no name")
        if cls.name in table:
            raise InternalError(
                f"two passes are named '{cls.name}': "
                f"{table[cls.name].__name__} and {cls.__name__}"
            )
        table[cls.name] = cls
    return table


@cache
def pipeline_aliases() -> dict[str, PipelineAlias]:
    from meshjit.passes import ALL_PIPELINES

    table: dict[str, PipelineAlias] = {}
    for alias in ALL_PIPELINES:
        if alias.name in table or alias.name in pass_classes():
            raise InternalError(f"pipeline name '{alias.name}' is registered twice")
        table[alias.name] = alias
    return table
