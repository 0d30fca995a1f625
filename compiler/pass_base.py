"""The pass base class and typed pass options.

A pass is a frozen dataclass: its fields are its options (kebab case on the
command line, `propagate{max-iters=8 strategy=basic}`), its class docstring's
first line is what `--list-passes` prints, and `run` does the work.
"""

from __future__ import annotations

import dataclasses
import enum
import typing
from typing import ClassVar

from jaxlib.mlir import ir

from meshjit.compiler.diagnostics import Diagnostics
from meshjit.errors import PipelineError


@dataclasses.dataclass(frozen=True)
class ModulePass:
    """Base of every meshjit pass (subclasses give a one-line docstring)."""

    name: ClassVar[str] = ""

    def run(self, module: ir.Module, diags: Diagnostics) -> None:
        raise NotImplementedError(f"pass '{self.name}' does not implement run()")

    @classmethod
    def summary(cls) -> str:
        doc = cls.__doc__ or ""
        return doc.strip().splitlines()[0] if doc.strip() else ""

    @classmethod
    def options(cls) -> list[PassOption]:
        found = _OPTIONS.get(cls)
        if found is None:  # type hints are resolved once per class (~0.3 ms)
            hints = typing.get_type_hints(cls)
            found = _OPTIONS[cls] = tuple(
                PassOption(f.name.replace("_", "-"), f.name, hints[f.name], f.default)
                for f in dataclasses.fields(cls)
            )
        return list(found)

    @classmethod
    def from_options(cls, given: dict[str, str]) -> ModulePass:
        """The pass built from `{kebab-name: text}` options, each converted by type."""
        known = {o.cli_name: o for o in cls.options()}
        kwargs: dict[str, object] = {}
        for key, text in given.items():
            opt = known.get(key)
            if opt is None:
                valid = ", ".join(sorted(known)) or "none"
                raise PipelineError(
                    f"pass '{cls.name}' has no option '{key}' (its options: {valid})"
                )
            kwargs[opt.field_name] = opt.convert(text, cls.name)
        return cls(**kwargs)

    def pipeline_text(self) -> str:
        """The pass with its non-default options, as pipeline text."""
        parts = []
        for opt in self.options():
            value = getattr(self, opt.field_name)
            if value != opt.default:
                parts.append(f"{opt.cli_name}={opt.format(value)}")
        return f"{self.name}{{{' '.join(parts)}}}" if parts else self.name


@dataclasses.dataclass(frozen=True, slots=True)
class PassOption:
    cli_name: str
    field_name: str
    type: type
    default: object

    def describe(self) -> str:
        if isinstance(self.type, type) and issubclass(self.type, enum.Enum):
            kind = "|".join(m.value for m in self.type)
        else:
            kind = getattr(self.type, "__name__", str(self.type))
        return f"{self.cli_name}=<{kind}> (default: {self.format(self.default)})"

    def format(self, value: object) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, enum.Enum):
            return str(value.value)
        return str(value)

    def convert(self, text: str, pass_name: str) -> object:
        where = f"option '{self.cli_name}' of pass '{pass_name}'"
        t = self.type
        if t is bool:
            if text in ("true", "1", ""):
                return True
            if text in ("false", "0"):
                return False
            raise PipelineError(f"{where} expects true or false, got '{text}'")
        if t is int:
            try:
                return int(text)
            except ValueError:
                raise PipelineError(
                    f"{where} expects an integer, got '{text}'"
                ) from None
        if t is float:
            try:
                return float(text)
            except ValueError:
                raise PipelineError(f"{where} expects a number, got '{text}'") from None
        if isinstance(t, type) and issubclass(t, enum.Enum):
            for member in t:
                if member.value == text:
                    return member
            choices = ", ".join(str(m.value) for m in t)
            raise PipelineError(f"{where} expects one of {choices}, got '{text}'")
        if t is str:
            return text
        raise PipelineError(f"{where} has a type meshjit cannot parse ({t})")


_OPTIONS: dict[type[ModulePass], tuple[PassOption, ...]] = {}
