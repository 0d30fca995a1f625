"""Random JAX programs with random meshes and shardings, for differential fuzzing.

A `Program` is plain data: a mesh, sharded inputs, lines of Python source over
values `v0, v1, ...` and the outputs. `Program.source()` is a function a person
can read and paste into a regression test; `Program.build()` execs it, either
for meshjit (constraints and nested `meshjit.jit` are real) or as the unsharded
reference (they become identities). `programs()` is the hypothesis strategy.

Values stay well conditioned: inputs lie in [-1, 1] and every float op keeps
them within a small bound (sums and dots are scaled by 1/n, binary adds by 1/2),
so rtol/atol 1e-5 holds whatever order a sharded program sums in. Each value
knows whether it is *exact*: integer math and data movement (transpose, slice,
gather, max, ...) must match the reference bitwise; float arithmetic within
tolerance. Ops whose result jumps when an input moves by one ulp (argmax,
floor, convert) take exact inputs only. Programs are float32, int32 or
complex64 (`programs(dtype=C64)`: elementwise, dots, sums, data movement,
gathers, scatters, per-row picks (`v[jnp.arange(n), idx]` and updates at
them), convolutions and pools after a `jnp.pad`, cumulative sums, sorts,
windows, loops; no ordering ops but sort's lexicographic one).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import meshjit

MESH_SHAPES: dict[tuple[int, ...], tuple[str, ...]] = {
    (8,): ("x",),
    (2, 4): ("x", "y"),
    (4, 2): ("x", "y"),
    (2, 2, 2): ("x", "y", "z"),
}
# Sizes that divide the mesh axes come first (hypothesis shrinks towards them).
DIM_SIZES = (2, 4, 8, 16, 1, 3, 6, 12)
MAX_ELEMENTS = 2048
F32, I32, C64 = "float32", "int32", "complex64"
DTYPES = (F32, I32)  # what `programs()` draws from unless told

Entry = None | str | tuple[str, ...]
Spec = tuple[Entry, ...]


def spec_text(spec: Spec) -> str:
    return "P(" + ", ".join(repr(e) for e in spec) + ")"


def spec_ways(entry: Entry, sizes: dict[str, int]) -> int:
    names = () if entry is None else (entry,) if isinstance(entry, str) else entry
    return math.prod(sizes[n] for n in names)


@dataclass(frozen=True)
class Value:
    shape: tuple[int, ...]
    dtype: str
    exact: bool  # every op it depends on is exact (data movement or integer)


@dataclass(frozen=True)
class Input:
    vid: int
    shape: tuple[int, ...]
    dtype: str
    spec: Spec | None  # in_shardings entry; None: unspecified (meshjit infers)
    placed: Spec | None  # host value when None, else a jax.Array placed so
    index_bound: int | None = None  # int32 indices in [0, bound)


@dataclass
class Program:
    mesh_shape: tuple[int, ...]
    axis_names: tuple[str, ...]
    device_perm: tuple[int, ...] | None
    seed: int
    values: list[Value] = field(default_factory=list)
    inputs: list[Input] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    outputs: tuple[int, ...] = ()
    out_specs: tuple[Spec | None, ...] | None = None  # None: out_shardings omitted
    # "jax": jax.sharding classes; "meshjit": meshjit's Mesh/NamedSharding/P;
    # "pjit": meshjit.pjit with bare PartitionSpecs under `with mesh:`;
    # "kwargs": jax classes, in_shardings a dict by parameter, keyword call
    api: str = "jax"

    # -- what to run -----------------------------------------------------------

    @property
    def sizes(self) -> dict[str, int]:
        return dict(zip(self.axis_names, self.mesh_shape, strict=True))

    def mesh(self) -> Any:
        """The mesh (jax's, or meshjit's for the meshjit and pjit APIs)."""
        mesh = self.mesh_jax()
        if self.api in ("jax", "kwargs"):
            return mesh
        return meshjit.Mesh(mesh.devices, mesh.axis_names)

    def mesh_jax(self) -> Mesh:
        devices = np.array(jax.devices()[:8], dtype=object)
        if self.device_perm is not None:
            devices = devices[list(self.device_perm)]
        return Mesh(devices.reshape(self.mesh_shape), self.axis_names)

    def sharding(self, mesh: Any, spec: Spec) -> Any:
        if self.api in ("jax", "kwargs"):
            return NamedSharding(mesh, P(*spec))
        return meshjit.NamedSharding(mesh, meshjit.P(*spec))

    def source(self) -> str:
        params = ", ".join(f"v{i.vid}" for i in self.inputs)
        body = [f"    {line}" for line in self.lines]
        outs = [f"v{o}" for o in self.outputs]
        ret = outs[0] if len(outs) == 1 else "(" + ", ".join(outs) + ")"
        return "\n".join([f"def f({params}):", *body, f"    return {ret}"]) + "\n"

    def build(self, mesh: Mesh | None) -> Callable[..., Any]:
        """The function; `mesh=None` gives the unsharded reference."""
        jax_api = self.api in ("jax", "kwargs")
        named: Any = NamedSharding if jax_api else meshjit.NamedSharding
        namespace: dict[str, Any] = {
            "jax": jax,
            "jnp": jnp,
            "np": np,
            "P": P if jax_api else meshjit.P,
            "NamedSharding": named if mesh is not None else _no_sharding,
            "MESH": mesh,
            "SMESH": None if mesh is None else self.mesh_jax(),
            "shard_map_op": shard_map_op,
            "meshjit": meshjit if mesh is not None else _UNSHARDED,
        }
        exec(compile(self.source(), "<fuzz program>", "exec"), namespace)
        fn: Callable[..., Any] = namespace["f"]
        return fn

    def args(self) -> list[np.ndarray[Any, Any]]:
        rng = np.random.default_rng(self.seed)
        out: list[np.ndarray[Any, Any]] = []
        for i in self.inputs:
            if i.index_bound is not None:
                out.append(rng.integers(0, i.index_bound, i.shape).astype(np.int32))
            elif i.dtype == I32:
                out.append(rng.integers(-8, 9, i.shape).astype(np.int32))
            elif i.dtype == C64:
                re, im = rng.uniform(-0.7, 0.7, (2, *i.shape)).astype(np.float32)
                out.append((re + 1j * im).astype(np.complex64))
            else:
                out.append(rng.uniform(-1, 1, i.shape).astype(np.float32))
        return out

    def in_shardings(self, mesh: Any) -> tuple[Any, ...]:
        if self.api == "pjit":  # bare specs; None means replicated in pjit
            return tuple(meshjit.P(*(i.spec or ())) for i in self.inputs)
        return tuple(
            None if i.spec is None else self.sharding(mesh, i.spec) for i in self.inputs
        )

    def out_shardings(self, mesh: Any) -> Any:
        assert self.out_specs is not None
        if self.api == "pjit":
            out = tuple(meshjit.P(*(s or ())) for s in self.out_specs)
        else:
            out = tuple(
                None if s is None else self.sharding(mesh, s) for s in self.out_specs
            )
        return out[0] if len(out) == 1 else out

    def output_values(self) -> list[Value]:
        return [self.values[o] for o in self.outputs]

    def describe(self) -> str:
        """Everything needed to rerun the case by hand."""
        lines = [
            f"mesh {self.mesh_shape} {self.axis_names} device_perm={self.device_perm}",
            f"seed {self.seed}, api {self.api}",
        ]
        for i in self.inputs:
            what = "host" if i.placed is None else f"placed {spec_text(i.placed)}"
            spec = "None" if i.spec is None else spec_text(i.spec)
            bound = "" if i.index_bound is None else f" indices < {i.index_bound}"
            lines.append(
                f"v{i.vid}: {i.dtype}{list(i.shape)} in_sharding {spec} ({what}){bound}"
            )
        if self.out_specs is None:
            lines.append("out_shardings omitted")
        else:
            texts = ["None" if s is None else spec_text(s) for s in self.out_specs]
            lines.append("out_shardings " + ", ".join(texts))
        return "\n".join(lines) + "\n" + self.source()


def shard_map_op(
    mesh: Mesh | None,
    kind: str,
    x: Any,
    dim: int,
    axis: str,
    n: int,
    partial: bool,
    other: int = -1,
) -> Any:
    """A shard_map over `mesh`, manual over `axis` (of size `n`) only
    (`partial`: jax's `axis_names`) or over every axis, whose in_spec splits
    `dim` over `axis` (`scatter`: whole). Its body maps each block (`map`),
    sums the blocks (`psum`; the result is one block), passes each block on
    to the next device (`ring`, by ppermute), gathers the blocks (`gather`,
    all_gather), sums and scatters the whole (`scatter`, psum_scatter) or
    moves the split from `dim` to `other` (`all_to_all`). `mesh=None`: the
    same computed on the whole array (the unsharded reference)."""
    if mesh is None:
        block = x.shape[dim] // n
        if kind == "map":
            return _block_map(x)
        if kind == "psum":
            return x.reshape(*x.shape[:dim], n, block, *x.shape[dim + 1 :]).sum(dim)
        if kind == "ring":
            return jnp.roll(x, block, axis=dim)
        return x * n if kind == "scatter" else x
    spec = P(*([None] * dim), axis)
    body: Callable[[Any], Any] = _block_map
    ins = out = spec
    if kind == "psum":
        body, out = (lambda b: jax.lax.psum(b, axis)), P()
    elif kind == "ring":
        ring = [(i, (i + 1) % n) for i in range(n)]
        body = lambda b: jax.lax.ppermute(b, axis, ring)  # noqa: E731
    elif kind == "gather":
        body = lambda b: jax.lax.all_gather(b, axis, axis=dim, tiled=True)  # noqa: E731
        out = P()
    elif kind == "scatter":
        ins = P()
        body = lambda b: jax.lax.psum_scatter(  # noqa: E731
            b, axis, scatter_dimension=dim, tiled=True
        )
    elif kind == "all_to_all":
        body = lambda b: jax.lax.all_to_all(b, axis, other, dim, tiled=True)  # noqa: E731
        out = P(*([None] * other), axis)
    extra: dict[str, Any] = {"axis_names": {axis}} if partial else {}
    return jax.shard_map(
        body, mesh=mesh, in_specs=ins, out_specs=out, check_vma=False, **extra
    )(x)


def _block_map(b: Any) -> Any:
    if jnp.issubdtype(b.dtype, jnp.floating):
        return jnp.tanh(b) * 2.0 + 1.0
    return b * 3 - 1


class _Unsharded:
    """`meshjit` as the reference sees it: constraints and nested jit vanish."""

    @staticmethod
    def with_sharding_constraint(x: Any, _sharding: Any) -> Any:
        return x

    @staticmethod
    def jit(fn: Callable[..., Any], **_options: Any) -> Callable[..., Any]:
        return fn


_UNSHARDED = _Unsharded()


def _no_sharding(_mesh: Any, _spec: Any) -> None:
    return None


# ----------------------------------------------------------------------------
# Drawing programs


class _Skip(Exception):
    """The drawn op does not apply to the drawn value; draw another op."""


@dataclass
class _Builder:
    draw: st.DrawFn
    prog: Program
    dtype: str

    # -- values ---------------------------------------------------------------

    def pick(self, *, dtype: str | None = None, exact: bool = False) -> int:
        """A value id, recent ones first (what hypothesis shrinks towards)."""
        want = dtype or self.dtype
        ids = [
            v
            for v in reversed(range(len(self.prog.values)))
            if self.prog.values[v].dtype == want
            and (self.prog.values[v].exact or not exact)
        ]
        if not ids:
            raise _Skip
        return self.one(ids)

    def one(self, items: Sequence[Any]) -> Any:
        if not items:
            raise _Skip
        return self.draw(st.sampled_from(items))

    def shape(self, v: int) -> tuple[int, ...]:
        return self.prog.values[v].shape

    def dim_size(self) -> int:
        return self.draw(st.sampled_from(DIM_SIZES))

    def draw_shape(self, min_rank: int = 0) -> tuple[int, ...]:
        rank = self.draw(st.sampled_from([r for r in (2, 1, 3, 0, 4) if r >= min_rank]))
        shape = tuple(self.dim_size() for _ in range(rank))
        if math.prod(shape) > MAX_ELEMENTS:
            raise _Skip
        return shape

    def draw_spec(self, shape: Sequence[int]) -> Spec:
        """A PartitionSpec valid for `shape`: each dim's axes divide it."""
        sizes = self.prog.sizes
        free = list(self.prog.axis_names)
        entries: list[Entry] = []
        for d in shape:
            k = self.draw(st.integers(0, min(2, len(free))))
            axes = self.draw(st.permutations(free))[:k] if k else []
            while axes and d % math.prod(sizes[a] for a in axes):
                axes.pop()  # the longest prefix that divides the dim
            if not axes:
                entries.append(None)
                continue
            for a in axes:
                free.remove(a)
            entries.append(axes[0] if len(axes) == 1 else tuple(axes))
        while entries and entries[-1] is None and self.draw(st.booleans()):
            entries.pop()  # trailing Nones may be left out
        return tuple(entries)

    def new_input(
        self, shape: tuple[int, ...], dtype: str | None = None, bound: int | None = None
    ) -> int:
        dtype = dtype or self.dtype
        vid = len(self.prog.values)
        self.prog.values.append(Value(shape, dtype, exact=True))
        spec = None if self.draw(st.integers(0, 5)) == 0 else self.draw_spec(shape)
        placed = None
        if self.draw(st.integers(0, 4)) == 0:
            placed = spec if spec is not None else self.draw_spec(shape)
        if self.prog.api == "pjit" and spec is None:
            placed = None  # pjit replicates it: a committed layout would conflict
        self.prog.inputs.append(Input(vid, shape, dtype, spec, placed, bound))
        return vid

    def emit(self, expr: str, operands: Sequence[int], exact: bool) -> int:
        """Appends `v<n> = expr`; its shape comes from jax.eval_shape."""
        vid = len(self.prog.values)
        operands = list(dict.fromkeys(operands))
        names = [f"v{o}" for o in operands]
        fn = eval(  # our own generated text
            f"lambda {', '.join(names)}: {expr}",
            {
                "jax": jax,
                "jnp": jnp,
                "np": np,
                "P": P,
                "NamedSharding": NamedSharding,
                "MESH": self.prog.mesh_jax(),
                "SMESH": self.prog.mesh_jax(),
                "shard_map_op": shard_map_op,
                "meshjit": meshjit,
            },
        )
        avals = [
            jax.ShapeDtypeStruct(self.shape(o), self.prog.values[o].dtype)
            for o in operands
        ]
        try:
            out = jax.eval_shape(fn, *avals)
        except meshjit.MeshjitError:
            raise  # meshjit refusing a valid constraint is a finding, not a skip
        except (TypeError, ValueError, IndexError):
            raise _Skip from None  # jax refuses the op on these shapes
        shape = tuple(out.shape)
        if math.prod(shape) > MAX_ELEMENTS or 0 in shape:
            raise _Skip
        exact = exact and all(self.prog.values[o].exact for o in operands)
        self.prog.values.append(Value(shape, str(out.dtype), exact))
        self.prog.lines.append(f"v{vid} = {expr}")
        return vid

    # -- ops --------------------------------------------------------------------

    def op_unary(self) -> None:
        a = self.pick()
        if self.dtype == I32:
            choices = [
                ("-{a}", True),
                ("{a} * 3 + 1", True),
                ("jnp.abs({a})", True),
                ("{a} ^ 5", True),
                ("{a} >> 1", True),
                ("jnp.maximum({a}, 0)", True),
            ]
        elif self.dtype == C64:
            choices = [
                ("jnp.conj({a})", True),
                ("-{a}", True),
                ("{a} * (0.6 + 0.8j)", False),
                ("jnp.sin({a}) * 0.5", False),
                ("{a} * {a} * 0.5", False),
                ("jax.lax.complex(jnp.imag({a}), jnp.real({a}))", True),
            ]
        else:
            choices = [
                ("jnp.tanh({a})", False),
                ("jnp.sin({a})", False),
                ("jnp.cos({a})", False),
                ("({a} * 0.5 + 0.25)", False),
                ("jax.nn.sigmoid({a})", False),
                ("-{a}", True),
                ("jnp.abs({a})", True),
                ("jnp.clip({a}, -0.5, 0.5)", True),
            ]
        expr, exact = self.draw(st.sampled_from(choices))
        self.emit(expr.format(a=f"v{a}"), [a], exact)

    def op_binary(self) -> None:
        a = self.pick()
        sa = self.shape(a)
        same = [
            v
            for v in reversed(range(len(self.prog.values)))
            if self.prog.values[v].dtype == self.dtype
            and (
                self.shape(v) == sa
                or (sa[len(sa) - len(self.shape(v)) :] == self.shape(v))
            )
        ]
        b = self.one(same)
        if self.dtype == I32:
            choices = [
                ("{a} + {b}", True),
                ("{a} * {b}", True),
                ("{a} - {b}", True),
                ("jnp.minimum({a}, {b})", True),
                ("{a} ^ {b}", True),
                ("jnp.where({a} > {b}, {a}, {b})", True),
            ]
        elif self.dtype == C64:
            choices = [
                ("({a} + {b}) * 0.5", False),
                ("{a} * {b}", False),
                ("{a} * jnp.conj({b})", False),
                ("jnp.where(jnp.real({a}) > jnp.imag({b}), {a}, {b})", True),
            ]
        else:
            choices = [
                ("({a} + {b}) * 0.5", False),
                ("{a} * {b}", False),
                ("({a} - {b}) * 0.5", False),
                ("jnp.maximum({a}, {b})", True),
                ("jnp.where({a} > {b}, {a}, {b} * 0.5)", True),
            ]
        expr, exact = self.draw(st.sampled_from(choices))
        self.emit(expr.format(a=f"v{a}", b=f"v{b}"), [a, b], exact)

    def op_dot(self) -> None:
        a = self.pick()
        sa = self.shape(a)
        if not sa:
            raise _Skip
        dims = list(range(len(sa)))
        contract = self.one(dims)
        rest = [d for d in dims if d != contract]
        batch = (
            self.draw(st.lists(st.sampled_from(rest), max_size=2, unique=True))
            if rest
            else []
        )
        if self.draw(st.integers(0, 3)) == 0:
            b, rb, rc = a, batch, [contract]  # a with itself
        else:
            free = [self.dim_size()] if self.draw(st.integers(0, 4)) else []
            order = [*(sa[d] for d in batch), sa[contract], *free]
            perm = list(self.draw(st.permutations(range(len(order)))))
            shape = tuple(order[p] for p in perm)
            rb = [perm.index(i) for i in range(len(batch))]
            rc = [perm.index(len(batch))]
            b = self.new_input(shape)
        dn = f"((({contract},), ({rc[0]},)), ({tuple(batch)}, {tuple(rb)}))"
        expr = f"jax.lax.dot_general(v{a}, v{b}, {dn})"
        if self.dtype != I32:
            expr += f" * {1.0 / sa[contract]!r}"
        self.emit(expr, [a, b], exact=self.dtype == I32)

    def op_reduce(self) -> None:
        a = self.pick()
        sa = self.shape(a)
        if not sa:
            raise _Skip
        axes = tuple(
            sorted(
                self.draw(
                    st.lists(
                        st.sampled_from(range(len(sa))),
                        min_size=1,
                        max_size=len(sa),
                        unique=True,
                    )
                )
            )
        )
        n = math.prod(sa[d] for d in axes)
        kind = self.draw(st.sampled_from(["sum", "max", "min", "argmax"]))
        if self.dtype == C64 and kind != "sum":
            # no ordering of complex values: the real part's, or the sum
            kind = "argmax_real" if kind == "argmax" else "sum"
        if kind == "argmax_real":
            b = self.pick(exact=True)
            sb = self.shape(b)
            if not sb:
                raise _Skip
            d = self.draw(st.sampled_from(range(len(sb))))
            self.emit(f"jnp.argmax(jnp.real(v{b}), axis={d})", [b], True)
        elif kind == "argmax":
            b = self.pick(exact=True)
            sb = self.shape(b)
            if not sb:
                raise _Skip
            d = self.draw(st.sampled_from(range(len(sb))))
            self.emit(f"jnp.argmax(v{b}, axis={d})", [b], True)
        elif kind == "sum" and self.dtype != I32:
            self.emit(f"jnp.sum(v{a}, axis={axes}) * {1.0 / n!r}", [a], False)
        else:
            self.emit(f"jnp.{kind}(v{a}, axis={axes})", [a], True)

    def op_broadcast(self) -> None:
        a = self.pick()
        sa = self.shape(a)
        d = self.draw(st.integers(0, len(sa)))
        shape = (*sa[:d], self.dim_size(), *sa[d:])
        self.emit(f"jnp.broadcast_to(jnp.expand_dims(v{a}, {d}), {shape})", [a], True)

    def op_reshape(self) -> None:
        a = self.pick()
        sa = self.shape(a)
        kind = self.draw(st.sampled_from(["merge", "split", "flatten", "regroup"]))
        if kind == "regroup" and len(sa) >= 2:
            # two neighbouring dims viewed the other way round, (a, b) as
            # (b, a): where a and b share no divisor, factors of one side only
            d = self.draw(st.integers(0, len(sa) - 2))
            if sa[d] == sa[d + 1]:
                raise _Skip
            shape = (*sa[:d], sa[d + 1], sa[d], *sa[d + 2 :])
        elif kind == "merge" and len(sa) >= 2:
            d = self.draw(st.integers(0, len(sa) - 2))
            shape = (*sa[:d], sa[d] * sa[d + 1], *sa[d + 2 :])
        elif kind == "split" and sa:
            d = self.draw(st.integers(0, len(sa) - 1))
            factors = [f for f in range(2, sa[d]) if sa[d] % f == 0]
            if not factors:
                raise _Skip
            f = self.one(factors)
            shape = (*sa[:d], f, sa[d] // f, *sa[d + 1 :])
        else:
            shape = (math.prod(sa),)
        self.emit(f"v{a}.reshape({shape})", [a], True)

    def op_transpose(self) -> None:
        a = self.pick()
        sa = self.shape(a)
        if len(sa) < 2:
            raise _Skip
        perm = tuple(self.draw(st.permutations(range(len(sa)))))
        self.emit(f"jnp.transpose(v{a}, {perm})", [a], True)

    def op_slice(self) -> None:
        a = self.pick()
        sa = self.shape(a)
        dims = [d for d, n in enumerate(sa) if n >= 2]
        if not dims:
            raise _Skip
        d = self.one(dims)
        n = sa[d]
        start = self.draw(st.integers(0, n - 1))
        stop = self.draw(st.integers(start + 1, n))
        stride = self.draw(st.sampled_from([1, 2, 3]))
        kind = self.draw(st.sampled_from(["slice", "dynamic", "parts", "roll"]))
        parts = [k for k in (2, 3, 4) if n % k == 0]
        if kind == "roll":  # slices of one value, concatenated: a rotation
            shift = self.draw(st.integers(-n, n))
            expr = f"jnp.roll(v{a}, {shift}, axis={d})"
        elif kind == "parts" and parts:
            # a fused projection's pattern: cut into equal parts (sibling
            # slices of one value), put back in another order (a concatenate)
            k = self.one(parts)
            expr = f"jnp.concatenate(jnp.split(v{a}, {k}, axis={d})[::-1], axis={d})"
        elif kind != "dynamic":
            expr = f"jax.lax.slice_in_dim(v{a}, {start}, {stop}, {stride}, axis={d})"
        else:
            size = stop - start
            expr = f"jax.lax.dynamic_slice_in_dim(v{a}, {start}, {size}, axis={d})"
        self.emit(expr, [a], True)

    def op_concatenate(self) -> None:
        a = self.pick()
        sa = self.shape(a)
        if not sa:
            raise _Skip
        d = self.draw(st.integers(0, len(sa) - 1))
        others = [
            v
            for v in reversed(range(len(self.prog.values)))
            if self.prog.values[v].dtype == self.dtype
            and len(self.shape(v)) == len(sa)
            and all(
                x == y
                for i, (x, y) in enumerate(zip(self.shape(v), sa, strict=True))
                if i != d
            )
        ]
        b = self.one(others)
        self.emit(f"jnp.concatenate([v{a}, v{b}], axis={d})", [a, b], True)

    def op_pad(self) -> None:
        a = self.pick()
        sa = self.shape(a)
        config = []
        for n in sa:
            lo = self.draw(st.integers(-1, 2))
            hi = self.draw(st.integers(-1, 2))
            interior = self.draw(st.integers(0, 1))
            if lo + hi + n + (n - 1) * interior < 1:
                lo = hi = 0
            config.append((lo, hi, interior))
        value = "0" if self.dtype == I32 else "0.5"
        pad_value = f"jnp.array({value}, v{a}.dtype)"
        self.emit(f"jax.lax.pad(v{a}, {pad_value}, {config})", [a], True)

    def _indices(self, bound: int, outside: bool = False) -> tuple[str, list[int]]:
        """Index text: a literal array, or a new int32 input (sharded too);
        `outside`: literal indices may lie up to 3 past either end."""
        rank = self.draw(st.sampled_from([1, 2]))
        shape = tuple(self.draw(st.sampled_from([2, 4, 3, 8])) for _ in range(rank))
        if self.draw(st.booleans()):
            vid = self.new_input(shape, I32, bound)
            return f"v{vid}", [vid]
        rng = np.random.default_rng(self.draw(st.integers(0, 2**16)))
        low, high = (-bound - 3, bound + 3) if outside else (0, bound)
        idx = rng.integers(low, high, shape).tolist()
        return f"jnp.array({idx}, jnp.int32)", []

    def op_gather(self) -> None:
        """`jnp.take`; with mode "clip" or "fill", indices out of range too
        (a clipped one reads the end row, XLA's clamp of a start index)."""
        a = self.pick()
        sa = self.shape(a)
        if not sa:
            raise _Skip
        d = self.draw(st.integers(0, len(sa) - 1))
        mode = self.draw(st.sampled_from([None, "clip", "fill"]))
        idx, extra = self._indices(sa[d], outside=mode is not None)
        how = "" if mode is None else f', mode="{mode}", fill_value=0'
        self.emit(f"jnp.take(v{a}, {idx}, axis={d}{how})", [a, *extra], True)

    def op_scatter(self) -> None:
        a = self.pick()
        sa = self.shape(a)
        if not sa:
            raise _Skip
        d = self.draw(st.integers(0, len(sa) - 1))
        n = sa[d]
        k = self.draw(st.integers(1, min(n, 4)))
        mode = self.draw(st.sampled_from(["add", "set", "max", "mul"]))
        if self.dtype == C64 and mode == "max":
            mode = "add"
        rng = np.random.default_rng(self.draw(st.integers(0, 2**16)))
        # out of range (mode="drop": such updates are dropped) or not
        drop = self.draw(st.booleans())
        if mode == "set":  # duplicates would make "set" order-dependent
            idx = rng.permutation(n)[:k].tolist()
        else:
            idx = rng.integers(-n - 3 if drop else 0, n + 3 if drop else n, k).tolist()
        where = ":, " * d + f"jnp.array({idx}, jnp.int32)"
        if self.draw(st.booleans()):
            upd = self.new_input((*sa[:d], k, *sa[d + 1 :]))
            update, operands = f"v{upd}", [a, upd]
        else:
            update, operands = ("3" if self.dtype == I32 else "0.5"), [a]
        how = ', mode="drop"' if drop else ""
        expr = f"v{a}.at[{where}].{mode}({update}{how})"
        exact = mode in ("set", "max") or self.dtype == I32
        if mode == "add" and self.dtype != I32:
            expr = f"({expr}) * 0.5"
        self.emit(expr, operands, exact)

    def op_pick(self) -> None:
        """Each row's own element, `v[jnp.arange(n), idx]` (as a loss picks
        each row's label; labels may count from the end), or an update at
        it, `v.at[jnp.arange(n), idx].add(u)` (its gradient's form):
        `batch-gathers` writes both as batched ops."""
        a = self.pick()
        sa = self.shape(a)
        if len(sa) < 2:
            raise _Skip
        n, m = sa[0], sa[1]
        if self.draw(st.booleans()):
            vid = self.new_input((n,), I32, m)
            idx, extra = f"v{vid}", [vid]
        else:
            rng = np.random.default_rng(self.draw(st.integers(0, 2**16)))
            idx = f"jnp.array({rng.integers(-m, m, n).tolist()}, jnp.int32)"
            extra = []
        where = f"jnp.arange({n}), {idx}"
        if self.draw(st.booleans()):
            self.emit(f"v{a}[{where}]", [a, *extra], True)
            return
        # one index per row: "set" has no duplicates to order
        mode = self.draw(st.sampled_from(["add", "set"]))
        upd = self.new_input((n, *sa[2:]))
        expr = f"v{a}.at[{where}].{mode}(v{upd})"
        exact = mode == "set" or self.dtype == I32
        self.emit(expr, [a, *extra, upd], exact)

    def op_conv(self) -> None:
        if self.dtype == I32:
            raise _Skip
        spatial = self.draw(st.sampled_from([1, 2]))
        rank = spatial + 2
        cands = [
            v
            for v in reversed(range(len(self.prog.values)))
            if self.prog.values[v].dtype == self.dtype and len(self.shape(v)) == rank
        ]
        if not cands:
            a = self.new_input(self.draw_shape(min_rank=rank)[:rank])
            if len(self.shape(a)) != rank:
                raise _Skip
        else:
            a = self.one(cands)
        sa = self.shape(a)
        channels = sa[-1]
        groups = self.draw(st.sampled_from([g for g in (1, 2) if channels % g == 0]))
        window = tuple(self.draw(st.integers(1, 5)) for _ in range(spatial))
        out_ch = groups * self.draw(st.sampled_from([1, 2, 4]))
        w = self.new_input((*window, channels // groups, out_ch))
        strides = tuple(self.draw(st.integers(1, 3)) for _ in range(spatial))
        dilation = tuple(self.draw(st.integers(1, 2)) for _ in range(spatial))
        lhs = tuple(self.draw(st.sampled_from([1, 1, 2])) for _ in range(spatial))
        padding = self.draw(
            st.sampled_from(
                [
                    "'SAME'",
                    "'VALID'",
                    repr(((1, 0),) * spatial),
                    repr(((2, 1),) * spatial),
                    repr(((0, 3),) * spatial),
                    "jnp.pad",  # zeros by jnp.pad, then VALID (`fold-pads`)
                ]
            )
        )
        operand = "{x}"
        if padding == "jnp.pad":
            amounts = self.draw(st.sampled_from([(1, 0), (2, 1), (0, 3), (4, 0)]))
            widths = ((0, 0), *(amounts,) * spatial, (0, 0))
            # zeros fold into the window (`fold-pads`); the other modes
            # concatenate edges the convolution reads through (`edge_pads`);
            # reflect and symmetric need the dim longer than the pad
            mode = self.draw(
                st.sampled_from(["constant", "reflect", "symmetric", "wrap", "edge"])
            )
            if mode in ("reflect", "symmetric") and min(sa[1:-1]) <= max(amounts):
                mode = "wrap"
            operand = f"jnp.pad({{x}}, {widths!r}, mode={mode!r})"
            padding = "'VALID'"
        if any(d > 1 for d in lhs) and "'" in padding:
            padding = repr(((1, 1),) * spatial)  # SAME/VALID need lhs_dilation 1
        dn = ("NWC", "WIO", "NWC") if spatial == 1 else ("NHWC", "HWIO", "NHWC")
        scale = 1.0 / (math.prod(window) * (channels // groups))
        conv = (
            f"jax.lax.conv_general_dilated({operand}, {{k}}, {strides}, {padding}, "
            f"lhs_dilation={lhs}, rhs_dilation={dilation}, dimension_numbers={dn}, "
            f"feature_group_count={groups}) * {scale!r}"
        )
        forward = conv.format(x=f"v{a}", k=f"v{w}")
        if self.draw(st.booleans()):
            self.emit(forward, [a, w], False)
            return
        # A gradient: the data gradient (an lhs-dilated convolution when
        # strided) or the filter gradient (the kernel window split).
        argnum = self.draw(st.sampled_from([0, 1]))
        loss = conv.format(x="x", k="k")
        square = "jnp.abs({}) ** 2" if self.dtype == C64 else "{} ** 2"  # real
        expr = (
            f"jax.grad(lambda x, k: jnp.sum({square.format(loss)}) * 0.5, "
            f"argnums={argnum})"
            f"(v{a}, v{w})"
        )
        self.emit(expr, [a, w], False)

    def op_loop(self) -> None:
        a = self.pick()
        n = self.draw(st.integers(1, 3))
        sa = self.shape(a)
        kind = self.draw(st.sampled_from(["fori", "while", "dot", "scan"]))
        if kind == "scan" and sa:
            # over dim 0 (split or not): jax passes xs as a loop carry the
            # body reads one slice of per iteration
            if self.dtype == I32:
                step, exact = "(c ^ x) + 1", True
            else:
                step, exact = "c * 0.5 + x * 0.5", False
            reverse = self.draw(st.booleans())
            expr = (
                f"jax.lax.scan(lambda c, x: ({step}, c), jnp.zeros_like(v{a}[0]), "
                f"v{a}, reverse={reverse})[1]"
            )
            self.emit(expr, [a], exact)
            return
        if self.dtype == I32:
            body = self.draw(st.sampled_from(["c * 3 + 1", "c ^ (c >> 1)"]))
            exact = True
        else:
            body = self.draw(st.sampled_from(["jnp.sin(c) * 0.5 + c * 0.25"]))
            exact = False
        if kind == "dot" and self.dtype != I32 and sa:
            w = self.new_input((sa[-1], sa[-1]))
            scale = 1.0 / sa[-1]
            # complex tanh has poles on the imaginary axis; sin stays bounded
            act = "jnp.tanh" if self.dtype == F32 else "0.5 * jnp.sin"
            expr = (
                f"jax.lax.fori_loop(0, {n}, lambda i, c: {act}(c @ v{w} * "
                f"{scale!r}), v{a})"
            )
            self.emit(expr, [a, w], False)
        elif kind == "while":
            expr = (
                f"jax.lax.while_loop(lambda c: c[0] < {n}, lambda c: (c[0] + 1, "
                f"{body.replace('c', 'c[1]')}), (0, v{a}))[1]"
            )
            self.emit(expr, [a], exact)
        else:
            self.emit(
                f"jax.lax.fori_loop(0, {n}, lambda i, c: {body}, v{a})", [a], exact
            )

    def op_cond(self) -> None:
        """lax.cond / lax.switch on a predicate computed exactly (max, int sum)."""
        a = self.pick()
        p = self.pick(exact=True)
        zero = "0" if self.dtype == I32 else "0.0"
        real = "jnp.real({})" if self.dtype == C64 else "{}"  # ordered
        pred = f"jnp.max({real.format(f'v{p}')}) > {zero}"
        if self.dtype == I32:
            branches = ["t * 2 + 1", "-t", "t ^ 3"]
            exact = True
        else:
            branches = ["jnp.tanh(t)", "-t", "t * 0.5"]
            exact = False
        if self.draw(st.booleans()):
            expr = (
                f"jax.lax.cond({pred}, lambda t: {branches[0]}, "
                f"lambda t: {branches[1]}, v{a})"
            )
        else:
            index = f"jnp.argmax({real.format(f'v{p}')}.reshape(-1)) % 3"
            lambdas = ", ".join(f"lambda t: {b}" for b in branches)
            expr = f"jax.lax.switch({index}, [{lambdas}], v{a})"
        self.emit(expr, [a, p], exact)

    def op_nested(self) -> None:
        a = self.pick()
        if self.dtype == I32:
            inner, exact = "t * 2 - 1", True
        else:
            inner, exact = self.draw(
                st.sampled_from([("jnp.tanh(t) * 0.5", False), ("-t", True)])
            )
        kind = self.draw(st.sampled_from(["jax", "meshjit", "meshjit_out", "twice"]))
        if kind == "jax":
            expr = f"jax.jit(lambda t: {inner})(v{a})"
        elif kind == "twice":
            expr = f"jax.jit(lambda u: jax.jit(lambda t: {inner})(u))(v{a})"
        elif kind == "meshjit":
            expr = f"meshjit.jit(lambda t: {inner})(v{a})"
        else:
            spec = spec_text(self.draw_spec(self.shape(a)))
            expr = (
                f"meshjit.jit(lambda t: {inner}, "
                f"out_shardings=NamedSharding(MESH, {spec}))(v{a})"
            )
        self.emit(expr, [a], exact)

    def op_constraint(self) -> None:
        a = self.pick()
        spec = spec_text(self.draw_spec(self.shape(a)))
        self.emit(
            f"meshjit.with_sharding_constraint(v{a}, NamedSharding(MESH, {spec}))",
            [a],
            True,
        )

    def op_shard_map(self) -> None:
        """A shard_map (manual over one axis, or over all) whose body maps,
        sums, rings, gathers, scatters or all-to-alls the blocks of a dim
        that axis divides."""
        a = self.pick()
        sa = self.shape(a)
        axis = self.one(list(self.prog.axis_names))
        n = self.prog.sizes[axis]
        dims = [d for d, size in enumerate(sa) if size % n == 0]
        d = self.one(dims)
        kinds = ["map", "psum", "ring", "gather", "scatter", "all_to_all"]
        kind = self.draw(st.sampled_from(kinds))
        other = -1
        if kind == "all_to_all":
            other = self.one([e for e in dims if e != d])
        partial = len(self.prog.axis_names) > 1 and self.draw(st.booleans())
        exact = self.prog.values[a].exact and (
            kind in ("ring", "gather", "all_to_all") or self.dtype == I32
        )
        self.emit(
            f"shard_map_op(SMESH, {kind!r}, v{a}, {d}, {axis!r}, {n}, {partial}"
            + (f", {other})" if other >= 0 else ")"),
            [a],
            exact,
        )

    def op_misc(self) -> None:
        a = self.pick()
        sa = self.shape(a)
        if not sa:
            raise _Skip
        d = self.draw(st.integers(0, len(sa) - 1))
        kind = self.draw(
            st.sampled_from(
                [
                    "cumsum",
                    "sort",
                    "flip",
                    "iota",
                    "maxpool",
                    "convert",
                    "pool",
                    "pool_grad",
                    "top_k",
                    "dropout",
                    "associative_scan",
                ]
            )
        )
        if kind == "cumsum":
            scale = "" if self.dtype == I32 else f" * {1.0 / sa[d]!r}"
            self.emit(f"jnp.cumsum(v{a}, axis={d}){scale}", [a], self.dtype == I32)
        elif kind == "associative_scan":
            # halves the dim down to 2 and 1 rows (strided slices, interior
            # pads): uneven blocks on any split
            reverse = self.draw(st.booleans())
            scale = "" if self.dtype == I32 else f" * {1.0 / sa[d]!r}"
            self.emit(
                f"jax.lax.associative_scan(jnp.add, v{a}, reverse={reverse}, "
                f"axis={d}){scale}",
                [a],
                self.dtype == I32,
            )
        elif kind == "sort":
            self.emit(f"jnp.sort(v{a}, axis={d})", [a], True)
        elif kind == "flip":
            self.emit(f"jnp.flip(v{a}, {d})", [a], True)
        elif kind == "iota":
            shape = tuple(n if i == d else 1 for i, n in enumerate(sa))
            scale = "" if self.dtype == I32 else f" * {1.0 / sa[d]!r}"
            iota = f"jnp.arange({sa[d]}, dtype=v{a}.dtype).reshape({shape}){scale}"
            self.emit(f"v{a} + {iota}", [a], self.dtype == I32)
        elif kind in ("pool", "pool_grad"):
            # Overlapping windows (3, stride 2, SAME): halos; the gradient of a
            # max pool is a select_and_scatter (counts: exact), an average
            # pool's a padded reduce_window.
            size = tuple(3 if i == d else 1 for i in range(len(sa)))
            step = tuple(2 if i == d else 1 for i in range(len(sa)))
            if self.dtype == I32 or (self.dtype == F32 and self.draw(st.booleans())):
                init = "jnp.iinfo(jnp.int32).min" if self.dtype == I32 else "-jnp.inf"
                pool = (
                    f"jax.lax.reduce_window({{t}}, {init}, jax.lax.max, {size}, "
                    f"{step}, 'SAME')"
                )
                exact = True
            else:
                zero = "0j" if self.dtype == C64 else "0.0"
                pool = (
                    f"jax.lax.reduce_window({{t}}, {zero}, jax.lax.add, {size}, "
                    f"{step}, 'SAME') * 0.25"
                )
                exact = False
            if self.draw(st.booleans()):  # padded by jnp.pad (`fold-pads`)
                fill = pool.split(", ")[1]
                widths = tuple((1, 1) if i == d else (0, 0) for i in range(len(sa)))
                pool = pool.replace(
                    "{t}", f"jnp.pad({{t}}, {widths!r}, constant_values={fill})"
                )
                pool = pool.replace("'SAME'", "'VALID'")
            if kind == "pool" or self.dtype == I32:
                self.emit(pool.format(t=f"v{a}"), [a], exact)
            else:
                inner = pool.format(t="t")
                self.emit(f"jax.grad(lambda t: jnp.sum({inner}))(v{a})", [a], exact)
        elif kind == "dropout":
            # jax's `rbg` PRNG: the mask's bits from rng_bit_generator, laid
            # out as the value is
            seed = self.draw(st.integers(0, 2**31 - 1))
            key = (
                f"jax.random.wrap_key_data(jnp.array([0, {seed}, 0, {seed}], "
                "jnp.uint32), impl='rbg')"
            )
            mask = f"jax.random.bernoulli({key}, 0.5, v{a}.shape)"
            self.emit(f"jnp.where({mask}, v{a}, 0)", [a], True)
        elif kind == "top_k":
            last = len(sa) - 1
            k = self.draw(st.integers(1, max(1, min(4, sa[last]))))
            self.emit(f"jax.lax.top_k(v{a}, {k})[0]", [a], True)
        elif kind == "maxpool":
            if self.dtype == C64:
                raise _Skip
            window = tuple(2 if i == d and n >= 2 else 1 for i, n in enumerate(sa))
            init = "jnp.iinfo(jnp.int32).min" if self.dtype == I32 else "-jnp.inf"
            expr = (
                f"jax.lax.reduce_window(v{a}, {init}, jax.lax.max, {window}, "
                f"{window}, 'VALID')"
            )
            self.emit(expr, [a], True)
        else:
            b = self.pick(exact=True)
            if self.dtype == I32:
                expr = f"(v{b}.astype(jnp.float32) * 0.5).astype(jnp.int32)"
            elif self.dtype == C64:
                expr = (
                    f"(jnp.real(v{b}) * 8.0).astype(jnp.int32).astype(jnp.complex64)"
                    " * 0.125"
                )
            else:
                expr = f"(v{b} * 8.0).astype(jnp.int32).astype(jnp.float32) * 0.125"
            self.emit(expr, [b], True)


OPS: tuple[str, ...] = (
    "unary",
    "binary",
    "dot",
    "reduce",
    "broadcast",
    "reshape",
    "transpose",
    "slice",
    "concatenate",
    "pad",
    "gather",
    "scatter",
    "pick",
    "conv",
    "loop",
    "cond",
    "nested",
    "constraint",
    "misc",
    "shard_map",
)


@st.composite
def programs(
    draw: st.DrawFn,
    max_ops: int = 6,
    ops: Sequence[str] = OPS,
    dtype: str | None = None,
    dtypes: Sequence[str] = DTYPES,
) -> Program:
    """A random program: 1-3 inputs, up to `max_ops` ops, 1-2 outputs, of
    `dtype` or one drawn from `dtypes`."""
    mesh_shape = draw(st.sampled_from(list(MESH_SHAPES)))
    perm = None
    if draw(st.integers(0, 3)) == 0:
        perm = tuple(draw(st.permutations(range(8))))
    prog = Program(
        mesh_shape, MESH_SHAPES[mesh_shape], perm, draw(st.integers(0, 2**16))
    )
    prog.api = draw(st.sampled_from(["jax", "meshjit", "pjit", "kwargs"]))
    b = _Builder(draw, prog, dtype or draw(st.sampled_from(list(dtypes))))
    for _ in range(draw(st.integers(1, 2))):
        for _attempt in range(5):
            try:
                b.new_input(b.draw_shape())
                break
            except _Skip:
                continue
    if not prog.inputs:
        b.new_input((8, 4))
    for _ in range(draw(st.integers(1, max_ops))):
        for _attempt in range(4):
            kind = draw(st.sampled_from(list(ops)))
            saved = (list(prog.values), list(prog.inputs), list(prog.lines))
            try:
                getattr(b, f"op_{kind}")()
                break
            except _Skip:
                prog.values, prog.inputs, prog.lines = (list(x) for x in saved)
    last = len(prog.values) - 1
    outputs = [last]
    if draw(st.integers(0, 2)) == 0:
        outputs.append(draw(st.integers(0, last)))
    prog.outputs = tuple(outputs)
    if draw(st.integers(0, 3)):
        prog.out_specs = tuple(
            None if draw(st.integers(0, 4)) == 0 else b.draw_spec(prog.values[o].shape)
            for o in outputs
        )
    return prog


__all__ = [
    "C64",
    "F32",
    "I32",
    "MESH_SHAPES",
    "OPS",
    "Program",
    "Value",
    "programs",
    "spec_text",
]
