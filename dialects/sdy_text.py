"""Shardy's text forms, parsed and printed byte-for-byte as MLIR prints them.

    #sdy.mesh<["x"=2, "y"=4]>                 print_mesh / parse_mesh
    sdy.mesh @mesh = <["x"=2], device_ids=[1, 0]>   print_mesh_op / parse_mesh_op
    #sdy.sharding<@mesh, [{"x"}, {"y", ?}p1], replicated={"z"}>
                                              print_sharding / parse_sharding
    #sdy.sharding_per_value<[<@mesh, [{"x"}]>, <@mesh, []>]>
                                              print_sharding_per_value / parse_...

Parsers accept the attribute with or without its `#sdy.<name>` prefix (an op's
`sdy.sharding_constraint %0 <@mesh, [...]>` omits it) and any whitespace between
tokens; printers emit MLIR's canonical spelling (iota `device_ids` elided, strings
escaped as MLIR escapes them). Errors are ShardingErrors naming the column.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import TypeVar

from meshjit.dialects.sharding import (
    AxisRef,
    DimSharding,
    MeshAxis,
    MeshModel,
    TensorSharding,
)
from meshjit.errors import ShardingError

_T = TypeVar("_T")

# MLIR's bare identifier: symbols matching it print without quotes.
_BARE_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")
_INT = re.compile(r"-?[0-9]+")
_HEX = "0123456789ABCDEF"


# ----------------------------------------------------------------------------
# Printing


def print_string(value: str) -> str:
    """A quoted MLIR string: printable ASCII as is, other bytes as `\\XX`."""
    out = ['"']
    for byte in value.encode("utf-8"):
        if byte == 0x5C:
            out.append("\\\\")
        elif 0x20 <= byte < 0x7F and byte != 0x22:
            out.append(chr(byte))
        else:
            out.append("\\" + _HEX[byte >> 4] + _HEX[byte & 0xF])
    out.append('"')
    return "".join(out)


def print_symbol(name: str) -> str:
    """`@mesh`, or `@"my mesh"` when the name is not a bare identifier."""
    if _BARE_ID.fullmatch(name):
        return "@" + name
    return "@" + print_string(name)


def print_axis_ref(axis: AxisRef) -> str:
    text = print_string(axis.name)
    if axis.size is None:
        return text
    return f"{text}:({axis.pre_size}){axis.size}"


def print_dim_sharding(dim: DimSharding) -> str:
    items = [print_axis_ref(a) for a in dim.axes]
    if not dim.closed:
        items.append("?")
    text = "{" + ", ".join(items) + "}"
    if dim.priority is not None:
        text += f"p{dim.priority}"
    return text


def _axis_set(axes: Sequence[AxisRef]) -> str:
    return "{" + ", ".join(print_axis_ref(a) for a in axes) + "}"


def print_sharding_body(sharding: TensorSharding) -> str:
    """`<@mesh, [{"x"}, {}]>`: the form inside per-value lists and op syntax."""
    parts = [
        print_symbol(sharding.mesh_name),
        "[" + ", ".join(print_dim_sharding(d) for d in sharding.dims) + "]",
    ]
    if sharding.replicated:
        parts.append("replicated=" + _axis_set(sharding.replicated))
    if sharding.unreduced:
        parts.append("unreduced=" + _axis_set(sharding.unreduced))
    return "<" + ", ".join(parts) + ">"


def print_sharding(sharding: TensorSharding) -> str:
    """`#sdy.sharding<@mesh, [{"x"}, {"y", ?}]>`."""
    return "#sdy.sharding" + print_sharding_body(sharding)


def print_sharding_per_value(shardings: Sequence[TensorSharding]) -> str:
    inner = ", ".join(print_sharding_body(s) for s in shardings)
    return f"#sdy.sharding_per_value<[{inner}]>"


def print_mesh_body(mesh: MeshModel) -> str:
    """`<["x"=2, "y"=4]>`, with `device_ids=[...]` unless they are iota."""
    axes = ", ".join(f"{print_string(a.name)}={a.size}" for a in mesh.axes)
    text = f"[{axes}]"
    if mesh.device_ids is not None:
        text += ", device_ids=[" + ", ".join(map(str, mesh.device_ids)) + "]"
    return f"<{text}>"


def print_mesh(mesh: MeshModel) -> str:
    return "#sdy.mesh" + print_mesh_body(mesh)


def print_mesh_op(name: str, mesh: MeshModel) -> str:
    """`sdy.mesh @mesh = <["x"=2, "y"=4]>`, the module-level mesh definition."""
    return f"sdy.mesh {print_symbol(name)} = {print_mesh_body(mesh)}"


# ----------------------------------------------------------------------------
# Parsing


class _Parser:
    """A cursor over one text; every `expect` failure names the column."""

    def __init__(self, text: str, what: str) -> None:
        self.text = text
        self.pos = 0
        self.what = what

    def error(self, expected: str, pos: int | None = None) -> ShardingError:
        at = self.pos if pos is None else pos
        found = self.text[at : at + 12] or "end of text"
        caret = " " * at + "^"
        return ShardingError(
            f"cannot parse {self.what} at column {at + 1}: expected {expected}, "
            f"found {found!r}\n  {self.text}\n  {caret}"
        )

    def skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def peek(self, token: str) -> bool:
        self.skip_ws()
        return self.text.startswith(token, self.pos)

    def accept(self, token: str) -> bool:
        if self.peek(token):
            self.pos += len(token)
            return True
        return False

    def expect(self, token: str) -> None:
        if not self.accept(token):
            raise self.error(f"'{token}'")

    def at_end(self) -> bool:
        self.skip_ws()
        return self.pos == len(self.text)

    def expect_end(self) -> None:
        if not self.at_end():
            raise self.error("end of text")

    def integer(self, what: str) -> int:
        self.skip_ws()
        match = _INT.match(self.text, self.pos)
        if match is None:
            raise self.error(what)
        self.pos = match.end()
        return int(match.group())

    def string(self) -> str:
        """An MLIR string literal; escapes are backslash, quote, n, t and hex pairs."""
        self.skip_ws()
        start = self.pos
        if not self.text.startswith('"', start):
            raise self.error("a quoted string")
        out = bytearray()
        i = start + 1
        text = self.text
        while i < len(text):
            ch = text[i]
            if ch == '"':
                self.pos = i + 1
                return out.decode("utf-8", errors="replace")
            if ch != "\\":
                out += ch.encode("utf-8")
                i += 1
                continue
            nxt = text[i + 1 : i + 2]
            simple = {"\\": b"\\", '"': b'"', "n": b"\n", "t": b"\t"}
            if nxt in simple:
                out += simple[nxt]
                i += 2
                continue
            pair = text[i + 1 : i + 3]
            if len(pair) == 2 and all(c in "0123456789abcdefABCDEF" for c in pair):
                out.append(int(pair, 16))
                i += 3
                continue
            raise self.error('a valid escape (\\\\, \\", \\n, \\t or \\XX)', i)
        raise self.error("a closing '\"'", start)

    def symbol(self) -> str:
        self.expect("@")
        if self.text.startswith('"', self.pos):
            return self.string()
        match = _BARE_ID.match(self.text, self.pos)
        if match is None:
            raise self.error("a symbol name after '@'")
        self.pos = match.end()
        return match.group()

    def comma_list(self, close: str, item: Callable[[], _T]) -> list[_T]:
        """Items separated by ',' up to `close` (the opener is already consumed)."""
        items: list[_T] = []
        if self.accept(close):
            return items
        while True:
            items.append(item())
            if self.accept(close):
                return items
            if not self.accept(","):
                raise self.error(f"',' or '{close}'")

    def optional_prefix(self, prefix: str) -> None:
        """`#sdy.sharding` before `<`; absent in op syntax, so it is optional."""
        self.skip_ws()
        if self.text.startswith(prefix, self.pos):
            self.pos += len(prefix)
            return
        if self.text.startswith("#", self.pos):
            raise self.error(f"'{prefix}<' or '<'")

    # -- Shardy pieces ---------------------------------------------------------

    def axis_ref(self) -> AxisRef:
        name = self.string()
        if not self.accept(":"):
            return AxisRef(name)
        self.expect("(")
        pre = self.integer("a sub-axis pre-size")
        self.expect(")")
        size = self.integer("a sub-axis size")
        start = self.pos
        try:
            return AxisRef(name, pre, size)
        except ShardingError as err:
            raise self.error(f"a valid sub-axis ({err})", start) from None

    def dim_sharding(self) -> DimSharding:
        self.expect("{")
        axes: list[AxisRef] = []
        closed = True
        if not self.accept("}"):
            while True:
                if self.accept("?"):
                    closed = False
                    self.expect("}")
                    break
                axes.append(self.axis_ref())
                if self.accept("}"):
                    break
                if not self.accept(","):
                    raise self.error("',' or '}'")
        priority = self.priority()
        return DimSharding(tuple(axes), closed, priority)

    def priority(self) -> int | None:
        self.skip_ws()
        match = re.compile(r"p([0-9]+)").match(self.text, self.pos)
        if match is None:
            return None
        digits = match.group(1)
        if len(digits) > 1 and digits.startswith("0"):
            raise self.error(f"a priority without leading zeros, not p{digits}")
        self.pos = match.end()
        return int(digits)

    def axis_set(self) -> tuple[AxisRef, ...]:
        self.expect("{")
        start = self.pos
        axes = self.comma_list("}", self.axis_ref)
        if not axes:
            raise self.error("at least one axis (omit the empty set)", start)
        return tuple(axes)

    def sharding_body(self) -> TensorSharding:
        self.expect("<")
        self.skip_ws()
        if not self.text.startswith("@", self.pos):
            raise self.error(
                "a mesh symbol such as '@mesh' (inline meshes are not supported)"
            )
        mesh_name = self.symbol()
        self.expect(",")
        self.expect("[")
        dims = self.comma_list("]", self.dim_sharding)
        replicated: tuple[AxisRef, ...] = ()
        unreduced: tuple[AxisRef, ...] = ()
        while self.accept(","):
            self.skip_ws()
            key_at = self.pos
            if self.accept("replicated") and not replicated:
                self.expect("=")
                replicated = self.axis_set()
            elif self.accept("unreduced") and not unreduced:
                self.expect("=")
                unreduced = self.axis_set()
            else:
                raise self.error("'replicated={...}' or 'unreduced={...}'", key_at)
        self.expect(">")
        return TensorSharding(mesh_name, tuple(dims), replicated, unreduced)

    def mesh_axis(self) -> MeshAxis:
        name = self.string()
        self.expect("=")
        start = self.pos
        size = self.integer("an axis size")
        try:
            return MeshAxis(name, size)
        except ShardingError as err:
            raise self.error(f"a valid axis size ({err})", start) from None

    def mesh_body(self) -> MeshModel:
        self.expect("<")
        start = self.pos
        self.expect("[")
        axes = self.comma_list("]", self.mesh_axis)
        device_ids: tuple[int, ...] | None = None
        if self.accept(","):
            self.expect("device_ids")
            self.expect("=")
            self.expect("[")
            device_ids = tuple(
                self.comma_list("]", lambda: self.integer("a device id"))
            )
        self.expect(">")
        try:
            return MeshModel(tuple(axes), device_ids)
        except ShardingError as err:
            raise self.error(f"a valid mesh ({err})", start) from None


@functools.lru_cache(maxsize=4096)
def parse_sharding(text: str) -> TensorSharding:
    """Parse `#sdy.sharding<@mesh, [...]>` (or the bare `<@mesh, [...]>`).

    The parsers are memoized (a module repeats its shardings; the results
    are immutable); text that does not parse raises every time."""
    parser = _Parser(text, "Shardy sharding")
    parser.optional_prefix("#sdy.sharding")
    sharding = parser.sharding_body()
    parser.expect_end()
    return sharding


@functools.lru_cache(maxsize=4096)
def parse_sharding_per_value(text: str) -> tuple[TensorSharding, ...]:
    """Parse `#sdy.sharding_per_value<[<@mesh, [...]>, ...]>`."""
    parser = _Parser(text, "Shardy sharding_per_value")
    parser.optional_prefix("#sdy.sharding_per_value")
    parser.expect("<")
    parser.expect("[")
    shardings = parser.comma_list("]", parser.sharding_body)
    parser.expect(">")
    parser.expect_end()
    return tuple(shardings)


@functools.lru_cache(maxsize=4096)
def parse_mesh(text: str) -> MeshModel:
    """Parse `#sdy.mesh<["x"=2], device_ids=[1, 0]>` (or the bare `<...>`)."""
    parser = _Parser(text, "Shardy mesh")
    parser.optional_prefix("#sdy.mesh")
    mesh = parser.mesh_body()
    parser.expect_end()
    return mesh


def parse_mesh_op(text: str) -> tuple[str, MeshModel]:
    """Parse `sdy.mesh @name = <[...]>` into (name, mesh)."""
    parser = _Parser(text, "sdy.mesh op")
    parser.expect("sdy.mesh")
    name = parser.symbol()
    parser.expect("=")
    mesh = parser.mesh_body()
    parser.expect_end()
    return name, mesh
