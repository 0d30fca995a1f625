"""Creating contexts, parsing, printing and verifying modules.

Passes reach `jaxlib.mlir.ir` only through this module (`from meshjit.compiler.ir
import ir`), so MLIR errors become meshjit diagnostics in one place.
"""

from __future__ import annotations

from jaxlib.mlir import ir, passmanager

from meshjit.compiler.bridge import make_ir_context
from meshjit.compiler.diagnostics import (
    Diagnostic,
    DiagnosticError,
    Severity,
    SourceLoc,
    parse_loc_text,
)
from meshjit.compiler.graph import invalidate_graphs

__all__ = [
    "DiagnosticError",
    "diagnostics_from_mlir_error",
    "ir",
    "make_context",
    "parse_module",
    "passmanager",
    "print_module",
    "replace_module",
    "verify_module",
]


def make_context() -> ir.Context:
    """A context with every dialect JAX uses; unregistered ops are rejected."""
    return make_ir_context()


def _severity(sev: object) -> Severity:
    name = str(sev).rsplit(".", 1)[-1].lower()
    for s in Severity:
        if s.name.lower() == name:
            return s
    return Severity.ERROR


def diagnostics_from_mlir_error(
    err: ir.MLIRError, source_name: str, fallback: str
) -> list[Diagnostic]:
    """Converts an MLIRError (parser or verifier) into meshjit diagnostics."""
    out: list[Diagnostic] = []
    for d in err.error_diagnostics:
        loc = parse_loc_text(str(d.location), source_name)
        out.append(Diagnostic(_severity(d.severity), loc, str(d.message)))
        for note in d.notes:
            if str(note.message).startswith("see current operation"):
                continue  # MLIR's dump of the whole op: noise for a user
            nloc = parse_loc_text(str(note.location), source_name)
            out.append(Diagnostic(Severity.NOTE, nloc, str(note.message)))
    if not out:
        msg = str(err).splitlines()[-1] if str(err) else fallback
        out.append(Diagnostic(Severity.ERROR, SourceLoc(source_name, 1, 1), msg))
    return out


def parse_module(text: str, ctx: ir.Context, source_name: str = "-") -> ir.Module:
    """Parses a module; raises DiagnosticError with `file:line:col` diagnostics.

    Binary or non-UTF-8 input is reported, not passed to the parser.
    """
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise DiagnosticError(
            [
                Diagnostic(
                    Severity.ERROR,
                    SourceLoc(source_name, line, 1),
                    "input contains a NUL byte; expected MLIR text",
                )
            ]
        )
    try:
        with ctx:
            module = ir.Module.parse(text)
    except ir.MLIRError as err:
        raise DiagnosticError(
            diagnostics_from_mlir_error(err, source_name, "cannot parse module")
        ) from None
    return module


def verify_module(module: ir.Module, source_name: str, after: str) -> None:
    """Runs the MLIR verifier; a failure names the pass that broke the module."""
    try:
        module.operation.verify()
    except ir.MLIRError as err:
        diags = diagnostics_from_mlir_error(err, source_name, "verification failed")
        first = diags[0]
        diags[0] = Diagnostic(
            first.severity,
            first.loc,
            f"module does not verify after {after}: {first.message}",
        )
        raise DiagnosticError(diags) from None


def replace_module(module: ir.Module, text: str, source_name: str = "-") -> None:
    """Replaces the module's body and attributes by those of the module `text`.

    Passes that build a new program as text (the partitioner) hand it back here;
    the `ir.Module` object the caller holds stays valid.
    """
    new = parse_module(text, module.context, source_name)
    invalidate_graphs(module)
    with module.context:
        for op in list(module.body.operations):
            op.operation.erase()
        for op in list(new.body.operations):
            module.body.append(op.operation)
        target = module.operation.attributes
        for name in [n for n in target if n != "sym_name"]:
            del target[name]
        source = new.operation.attributes
        for name in source:
            target[name] = source[name]


def print_module(module: ir.Module | ir.Operation, *, debug_info: bool = False) -> str:
    """The module's text exactly as jaxlib prints it (`str(module)`); a module
    operation (a clone, say) prints the same."""
    if debug_info:
        text = str(module.operation.get_asm(enable_debug_info=True))
        return text if text.endswith("\n") else text + "\n"
    return str(module)


def is_dense_ints(attr: ir.Attribute) -> bool:
    """Whether `attr` is a dense integer elements attribute (replica groups
    written out, rather than jax 0.11's `#stablehlo.replica_group_mesh_axes`)."""
    if isinstance(attr, ir.DenseIntElementsAttr):
        return True
    try:  # bindings that hand out attributes undowncast
        ir.DenseIntElementsAttr(attr)
    except ValueError:
        return False
    return True


def renamed(old: ir.Operation, name: str) -> ir.Operation:
    """A copy of `old` (operands, attributes, result types, location) as op
    `name`, inserted before it; `old` is left for the caller to replace.
    An attribute the Python bindings cannot hold (a complex dense constant:
    "Can't cast unknown element type") is carried through the op's generic
    text instead."""
    ip = ir.InsertionPoint(old)
    try:
        attributes = {k: old.attributes[k] for k in old.attributes}
    except TypeError:
        if len(old.operands) or len(old.regions):
            raise
        text = str(
            old.get_asm(
                print_generic_op_form=True, enable_debug_info=True, use_local_scope=True
            )
        )
        quoted = f'"{old.name}"'
        made = ir.Operation.parse(text.replace(quoted, f'"{name}"', 1)).operation
        ip.insert(made)
        return made
    return ir.Operation.create(
        name,
        results=[r.type for r in old.results],
        operands=list(old.operands),
        attributes=attributes,
        loc=old.location,
        ip=ip,
    )
