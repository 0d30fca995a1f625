"""`jit`, `pjit` and `with_sharding_constraint`: the seed API on meshjit's compiler.

`jit(f, in_shardings=..., out_shardings=...)` traces `f` with JAX's tracer (no
shardings from JAX), attaches the shardings as `sdy` attributes, runs meshjit's
propagation and partitioner and compiles the per-device program with PJRT.
`pjit` is the same with the mesh-context semantics: under `with mesh:`, `None`
means replicated. Both resolve bare PartitionSpecs against the mesh in context
at each call, cache traces and executables (`cache_info()`), and raise
`ShardingError` naming the argument, dim and mesh axes.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import threading
import types
import weakref
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, overload

import jax

# compiler/bridge.py imports jax.extend lazily; concurrent first calls on several
# threads then raced on it ("module 'jax' has no attribute 'extend'").
import jax.extend.backend
import numpy as np
from jax.tree_util import PyTreeDef

from meshjit.compiler import bridge
from meshjit.compiler.bridge import set_mesh_context
from meshjit.errors import MeshjitError, MissingMeshError, ShardingError
from meshjit.frontend import resolve as _resolve
from meshjit.frontend.args import (
    UNSPECIFIED,
    ArgSpec,
    CallForm,
    broadcast_prefix,
    is_spec_leaf,
    resolve_argspec,
    split_format,
)
from meshjit.frontend.cache import CacheInfo, CompileKey, JitCache, TraceKey
from meshjit.frontend.dispatch import Dispatcher
from meshjit.frontend.mesh import Mesh, current_mesh
from meshjit.frontend.sharding import (
    AUTO,
    UNCONSTRAINED,
    NamedSharding,
    PartitionSpec,
    Sharding,
    SingleDeviceSharding,
    from_jax,
)
from meshjit.frontend.stages import (
    Compiled,
    Lowered,
    LoweringInputs,
    Traced,
    require_devices,
)
from meshjit.frontend.trace import (
    LeafInfo,
    TracedModule,
    auto_mesh_of,
    check_ref_arguments,
    enclosing_context_mesh,
    leaf_dtype,
    leaf_info,
    record_constraint_mesh,
    trace_function,
    traced_mesh,
)

F = TypeVar("F", bound=Callable[..., Any])


class _NotGiven:
    pass


_NOT_GIVEN = _NotGiven()

# Frames from these folders are meshjit's own: errors drop them (the user's stay),
# the HTML report shows no source line there.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INTERNAL_DIRS = tuple(
    os.path.join(_ROOT, folder) + os.sep
    for folder in (
        "meshjit",
        "frontend",
        "compiler",
        "passes",
        "dialects",
        "htmlreport",
    )
)


def _filtered(err: BaseException) -> BaseException:
    """`err` with meshjit's own frames dropped from its traceback."""
    keep = []
    tb = err.__traceback__
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(INTERNAL_DIRS):
            keep.append(tb)
        tb = tb.tb_next
    new: types.TracebackType | None = None
    for t in reversed(keep):
        new = types.TracebackType(new, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return err.with_traceback(new)


def _user_errors(method: F) -> F:
    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True  # pytest: show the user's frames
        try:
            return method(*args, **kwargs)
        except MeshjitError as err:
            raise _filtered(err) from None

    return wrapper  # type: ignore[return-value]


def context_mesh() -> Mesh | None:
    """The mesh bare PartitionSpecs resolve against: `with mesh:`, then jax.set_mesh."""
    found = current_mesh()
    if found is not None:
        return found
    jax_mesh = set_mesh_context()
    if isinstance(jax_mesh, jax.sharding.Mesh):
        return Mesh.from_jax(jax_mesh)
    # jax.sharding.use_abstract_mesh: lowered on a stand-in for its devices.
    abstract = bridge.abstract_mesh_context()
    if abstract is not None:
        return Mesh.stand_in(abstract)
    return None


def _has_tracer(tree: object) -> bool:
    return any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(tree))


@dataclass(frozen=True, slots=True)
class _Prepared:
    form: CallForm
    flat: tuple[Any, ...]
    dyn_tree: PyTreeDef
    leaves: tuple[LeafInfo, ...]
    committed: tuple[Any, ...]  # jax sharding of each committed leaf, or None
    donated: tuple[bool, ...]
    values: tuple[Any, ...]
    mesh: Mesh | None
    trace_key: TraceKey
    compile_key: CompileKey


class JitFunction:
    """A function compiled by meshjit on first call (per shapes and shardings)."""

    def __init__(
        self,
        fun: Callable[..., Any],
        *,
        api: str,
        pjit: bool,
        in_shardings: object,
        out_shardings: object,
        argspec: ArgSpec,
        keep_unused: bool,
        device: Any,
        inline: bool,
        compiler_options: Mapping[str, Any] | None,
    ) -> None:
        self._fun = fun
        self._api = api
        self._pjit = pjit
        self._in_shardings = (
            tuple(in_shardings) if isinstance(in_shardings, list) else in_shardings
        )
        self._out_shardings = out_shardings
        # AUTO in_shardings: the committed layout of such an argument does not
        # change the program (it is moved to the chosen one), so it is left
        # out of the compile key.
        self._auto_in = any(
            isinstance(s, AUTO)
            for s in jax.tree_util.tree_leaves(self._in_shardings, is_leaf=is_spec_leaf)
        )
        self._argspec = argspec
        self._keep_unused = keep_unused
        self._device = device
        self._inline = inline
        self._compiler_options = dict(compiler_options) if compiler_options else None
        self._name = getattr(fun, "__name__", None) or type(fun).__name__
        self._cache = _shared_cache(
            fun,
            (
                api,
                pjit,
                _tree_key(self._in_shardings),
                _tree_key(out_shardings),
                argspec.static_argnums,
                argspec.static_argnames,
                argspec.donate_argnums,
                argspec.donate_argnames,
                keep_unused,
                device,
                inline,
                _tree_key(self._compiler_options),
            ),
            f"{api}({self._name})",
        )
        self._dispatchers: dict[Mesh | None, Dispatcher] = {}
        # the jax.jit a call inside another trace becomes, per context mesh
        # (one wrapper, so jax's trace cache traces it once per signature)
        self._nested_jits: dict[Mesh | None, Any] = {}
        # Name, docstring, __wrapped__ and the function's own public
        # attributes (`f.some_value`, as jax.jit's wrapper has them): merging
        # all of `fun.__dict__` would copy another JitFunction's state into
        # this one when `fun` wraps one (jax.grad(meshjit.jit(f)) is
        # functools.wraps'd over it) and make this one compile `f`.
        functools.update_wrapper(self, fun, updated=())
        for key, value in getattr(fun, "__dict__", {}).items():
            if not key.startswith("_") and not hasattr(type(self), key):
                self.__dict__.setdefault(key, value)

    # -- public API ------------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True  # pytest: show the user's frames
        # jax's C++ dispatch does not see meshjit's own `with mesh:` context,
        # so each context mesh has its own dispatcher.
        mesh = current_mesh()
        dispatch = self._dispatchers.get(mesh)
        if dispatch is None:
            dispatch = self._dispatcher(mesh)
        try:
            return dispatch(*args, **kwargs)
        except MeshjitError as err:
            raise _filtered(err) from None

    def _dispatcher(self, mesh: Mesh | None) -> Dispatcher:
        spec = self._argspec
        made = Dispatcher(
            self._name,
            self._python_call,
            spec.static_argnums,
            spec.static_argnames,
            donates=bool(spec.donate_argnums or spec.donate_argnames),
        )
        return self._dispatchers.setdefault(mesh, made)  # atomic: one per mesh

    def _python_call(
        self, args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> tuple[Any, Any]:
        """One call on the Python path: outputs, and what lets jax's C++
        dispatch repeat it (None for calls it must not cache)."""
        if jax.config.jax_disable_jit:  # type: ignore[attr-defined]
            return self._fun(*args, **kwargs), None
        if _has_tracer((args, kwargs)) or bridge.tracing():
            return self._nested(args, kwargs), None
        prepared = self._prepare(args, kwargs)
        compiled = self._cache.compiled(
            prepared.compile_key, lambda: self._lower(prepared).compile()
        )
        return compiled.run_call(prepared.flat)

    @_user_errors
    def trace(self, *args: Any, **kwargs: Any) -> Traced:
        """Traces for these (possibly abstract: jax.ShapeDtypeStruct) arguments."""
        return Traced(
            self._inputs(self._prepare(args, kwargs)),
            functools.partial(self._jax_lowering, args, kwargs),
        )

    def _jax_lowering(
        self, args: Sequence[Any], kwargs: Mapping[str, Any], **options: Any
    ) -> Any:
        """jax.jit's own lowering of the function with the same options (the
        shardings in jax's form): what `jax.export` serializes, a program with
        shardings that whoever loads it partitions."""
        try:
            in_shardings = _jax_form(self._in_shardings)
            out_shardings = _jax_form(self._out_shardings)
        except _NoJaxForm:
            raise ShardingError(
                f"{self._api}({self._name}): jax.export takes jax's shardings; "
                "an AUTO leaf (or a bare PartitionSpec with no mesh in context) "
                "has no jax form: compile with meshjit and export the chosen "
                "shardings (Compiled.input_shardings/output_shardings)"
            ) from None
        spec = self._argspec
        jitted = jax.jit(
            self._fun,
            in_shardings=in_shardings,
            out_shardings=out_shardings,
            static_argnums=spec.static_argnums,
            static_argnames=spec.static_argnames,
            donate_argnums=spec.donate_argnums,
            donate_argnames=spec.donate_argnames,
            keep_unused=self._keep_unused,
        )
        return jitted.trace(*args, **kwargs).lower(**options)

    @_user_errors
    def lower(self, *args: Any, **kwargs: Any) -> Lowered:
        """Traces and attaches shardings; `.compile()` the result to run it."""
        lowered = self._lower(self._prepare(args, kwargs))
        require_devices(lowered.inputs)
        return lowered

    @_user_errors
    def eval_shape(self, *args: Any, **kwargs: Any) -> Any:
        """The outputs' ShapeDtypeStructs; where out_shardings gives an
        output's sharding, with it (as jax's)."""
        prepared = self._prepare(args, kwargs)
        traced = self._traced(prepared)
        if self._out_shardings is UNSPECIFIED:
            return traced.out_info
        placement = self._inputs(prepared).placement
        single = (
            jax.sharding.SingleDeviceSharding(placement.mesh.flat_devices[0])
            if placement.single_device
            else None
        )
        infos = [
            jax.ShapeDtypeStruct(
                o.shape,
                o.dtype,
                weak_type=o.weak_type,
                sharding=None if s is None else (single or s.to_jax()),
            )
            for o, s in zip(traced.outputs, placement.outputs, strict=True)
        ]
        return jax.tree_util.tree_unflatten(traced.out_tree, infos)

    def cache_info(self) -> CacheInfo:
        """Traces, compiles and hits so far, and why each miss happened.

        Hits count calls that found their executable: in meshjit's cache or,
        without reaching Python, in jax's C++ dispatch."""
        found = self._cache.info()
        fast = sum(d.fast_calls for d in list(self._dispatchers.values()))
        return dataclasses.replace(found, hits=found.hits + fast, fast=fast)

    def clear_cache(self) -> None:
        for dispatch in list(self._dispatchers.values()):
            dispatch.clear()
        self._dispatchers.clear()
        self._cache.clear()

    def _cache_size(self) -> int:
        return self._cache.info().size

    def __repr__(self) -> str:
        return f"<meshjit.{self._api} of {self._name}>"

    def __get__(self, obj: object, objtype: type | None = None) -> Any:
        if obj is None:
            return self
        return functools.partial(self, obj)

    # -- one call --------------------------------------------------------------------

    def _prepare(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> _Prepared:
        from meshjit.frontend.args import bind_call

        form, values = bind_call(self._argspec, args, dict(kwargs))
        flat_paths, dyn_tree = jax.tree_util.tree_flatten_with_path(values)
        leaves = []
        flat = []
        for path, value in flat_paths:
            index = path[0].idx
            name = form.entries[index].name + jax.tree_util.keystr(path[1:])
            leaf = leaf_info(name, value, self._api, self._name)
            # a mutable array is laid out, and placed, as its value is
            plain = _held(value)
            # As jax: the argument's Auto mesh is in its aval (its axes name
            # nothing in the spec), where nothing else places the program.
            auto = auto_mesh_of(plain) if leaf.sharding is None else None
            if auto is not None and self._on_mesh_of(plain):
                leaf = dataclasses.replace(leaf, auto_mesh=auto)
            leaves.append(leaf)
            flat.append(value._buf if leaf.token else value)  # a token's buffer
        if any(leaf.ref for leaf in leaves):
            check_ref_arguments(flat, leaves, self._api)
        committed = tuple(_committed(_held(v)) for v in flat)
        donated = tuple(form.entries[path[0].idx].donated for path, _ in flat_paths)
        mesh = context_mesh()
        trace_key = TraceKey(
            form,
            dyn_tree,
            tuple(leaf.aval_key() for leaf in leaves),
            tuple(leaf.path for leaf in leaves),
            mesh,
            bridge.trace_context(),
        )
        compile_key = CompileKey(
            trace_key,
            committed,
            mesh,
            self._device,
            jax.config.jax_default_device,  # type: ignore[attr-defined]
        )
        prepared = _Prepared(
            form,
            tuple(flat),
            dyn_tree,
            tuple(leaves),
            committed,
            donated,
            values,
            mesh,
            trace_key,
            compile_key,
        )
        if not self._auto_in:
            return prepared
        auto = [isinstance(s, AUTO) for s in self._in_specs(prepared)]
        keyed = tuple(None if a else c for a, c in zip(auto, committed, strict=True))
        return dataclasses.replace(
            prepared, compile_key=dataclasses.replace(compile_key, committed=keyed)
        )

    def _on_mesh_of(self, value: jax.Array) -> bool:
        """Whether the program runs on `value`'s own mesh as far as jit's
        options say: no device=, out_shardings, and in_shardings unspecified
        or all on that mesh."""
        if self._device is not None or self._out_shardings is not UNSPECIFIED:
            return False
        if self._in_shardings is UNSPECIFIED:
            return True
        own = value.sharding.mesh  # type: ignore[attr-defined]
        return self._in_meshes == (own,)

    @functools.cached_property
    def _in_meshes(self) -> tuple[Any, ...]:
        """The jax meshes of the in_shardings leaves, once each (an empty
        tuple where a leaf has none: a bare spec, None, AUTO, one device)."""
        meshes: list[Any] = []
        leaves = jax.tree_util.tree_leaves(self._in_shardings, is_leaf=is_spec_leaf)
        for s in leaves:
            mesh = getattr(s, "mesh", None)
            if isinstance(mesh, Mesh):
                mesh = mesh.to_jax()
            if not isinstance(mesh, jax.sharding.Mesh):
                return ()
            if mesh not in meshes:
                meshes.append(mesh)
        return tuple(meshes)

    def _traced(self, prepared: _Prepared) -> TracedModule:
        def make() -> TracedModule:
            return trace_function(
                self._fun,
                prepared.form,
                prepared.dyn_tree,
                prepared.leaves,
                self._keep_unused,
                self._name,
                prepared.trace_key.context_mesh,  # type: ignore[arg-type]
            )

        return self._cache.trace(prepared.trace_key, make)

    def _in_specs(self, prepared: _Prepared) -> list[object]:
        spec = self._in_shardings
        entries = prepared.form.entries
        what = f"{self._api} in_shardings"
        if is_spec_leaf(spec):
            return [spec] * len(prepared.leaves)
        if isinstance(spec, dict):
            names = {e.name for e in entries}
            params = (
                set(self._argspec.signature.parameters)
                if self._argspec.signature
                else names
            )
            unknown = sorted(k for k in spec if k not in names | params)
            if unknown:
                raise ShardingError(
                    f"{what} names parameters {unknown}, which the function does not "
                    f"take; the call passes ({', '.join(e.name for e in entries)})"
                )
            per_entry: tuple[object, ...] = tuple(
                spec.get(e.name, UNSPECIFIED) for e in entries
            )
        elif isinstance(spec, tuple):
            if len(spec) != len(entries):
                statics = [s.name for _, s in prepared.form.static_pos] + [
                    k for k, _ in prepared.form.static_kw
                ]
                excluded = (
                    f"; static arguments ({', '.join(statics)}) are not counted"
                    if statics
                    else ""
                )
                raise ShardingError(
                    f"{what} is a tuple of length {len(spec)} but the call has "
                    f"{len(entries)} dynamic arguments "
                    f"({', '.join(e.name for e in entries)}){excluded}. Give one "
                    "entry per dynamic argument (keyword arguments count in the "
                    "order of the signature), a single Sharding for all of them, or "
                    "a dict keyed by parameter name"
                )
            per_entry = spec
        else:
            raise ShardingError(
                f"{what} must be a Sharding, a PartitionSpec, None, a tuple with one "
                f"entry per argument or a dict by parameter name; found {spec!r}"
            )
        out: list[object] = []
        for entry, prefix, value in zip(
            entries, per_entry, prepared.values, strict=True
        ):
            out.extend(broadcast_prefix(prefix, value, entry.name, what))
        return out

    def _inputs(self, prepared: _Prepared) -> LoweringInputs:
        traced = self._traced(prepared)
        # `Format` leaves: a memory layout beside the sharding
        in_specs, in_layouts = _split_formats(self._in_specs(prepared))
        out_specs, out_layouts = _split_formats(
            broadcast_prefix(
                self._out_shardings,
                traced.out_info,
                "result",
                f"{self._api} out_shardings",
            )
        )
        if in_layouts:
            _check_layouts(self._api, "in_shardings", in_layouts, prepared.leaves)
        if out_layouts:
            _check_layouts(self._api, "out_shardings", out_layouts, traced.outputs)
        found = traced_mesh(traced.source.meshes)
        request = _resolve.Request(
            api=self._api,
            pjit=self._pjit,
            context_mesh=prepared.mesh,
            device=self._device,
            in_specs=tuple(in_specs),
            committed=tuple(
                None if s is None else _as_meshjit(s) for s in prepared.committed
            ),
            out_specs=tuple(out_specs),
            constraint_meshes=traced.constraint_meshes,
            traced_mesh=None if found is None else found[1],
        )
        placement = _resolve.resolve(request, prepared.leaves, traced.outputs)
        return LoweringInputs(
            api=self._api,
            fun_name=self._name,
            traced=traced,
            form=prepared.form,
            dyn_tree=prepared.dyn_tree,
            leaves=prepared.leaves,
            donated=prepared.donated,
            placement=placement,
            mesh_name="mesh" if found is None else found[0],
            compiler_options=self._compiler_options,
            in_layouts=in_layouts,
            out_layouts=out_layouts,
        )

    def _lower(self, prepared: _Prepared) -> Lowered:
        return Lowered(self._inputs(prepared))

    def _nested(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        """Called inside another trace: become part of it (inline or a nested jit)."""
        fun, out_shardings = self._fun, self._out_shardings
        if self._compiler_options and bridge.inside_jit_trace((args, kwargs)):
            raise ShardingError(
                f"{self._api}(compiler_options=...) of {self._name} is called inside "
                "another jitted function, which XLA compiles as one program: "
                "`compiler_options` can only be passed to top-level `jax.jit`; pass "
                "them to the outer function's jit"
            )

        outer, inner = enclosing_context_mesh(), context_mesh()
        if (
            self._pjit
            and outer is not None
            and inner is not None
            and inner.size != outer.size
        ):
            raise ShardingError(
                f"{self._api}({self._name}) is called inside a function traced "
                f"under the mesh {outer} ({outer.size} devices) while the "
                f"context mesh is {inner} ({inner.size} devices): a nested "
                "pjit cannot change the size of the mesh; call it under the "
                "outer mesh"
            )

        # Inside another trace an AUTO output is left to the outer search,
        # and memory layouts (Format leaves) to the outer program.
        out_shardings = jax.tree_util.tree_map(
            lambda s: None if isinstance(s, AUTO) else _sharding_of(s),
            out_shardings,
            is_leaf=is_spec_leaf,
        )

        def body(*a: Any, **k: Any) -> Any:
            out = fun(*a, **k)
            if out_shardings is UNSPECIFIED or out_shardings is None:
                return out
            return with_sharding_constraint(out, out_shardings)

        if self._inline:
            return body(*args, **kwargs)
        # one nested jit per context mesh (which bare PartitionSpecs in
        # out_shardings name): a new wrapper per call would be traced again
        # at every call inside the outer trace (a layer called 10 times, 10
        # traces; jax.jit traces it once)
        mesh = context_mesh()
        nested = self._nested_jits.get(mesh)
        if nested is not None:
            return nested(*args, **kwargs)
        as_jax = _jax_out_shardings(out_shardings)
        if as_jax is not None:
            # A nested jit as jax makes one: out_shardings are its own (one
            # jit equation whose body is the function's, as jax.vmap and
            # make_jaxpr show it).
            nested = jax.jit(
                fun,
                static_argnums=self._argspec.static_argnums,
                static_argnames=self._argspec.static_argnames,
                donate_argnums=self._argspec.donate_argnums,
                donate_argnames=self._argspec.donate_argnames,
                out_shardings=as_jax,
            )
        else:
            # Donation stays part of the nested jit (a jaxpr run eagerly, e.g.
            # core.jaxpr_as_fun(make_jaxpr(f)), donates as f would). The
            # wrapper carries the function's name and source (jax's debug
            # info and saved_residuals name it).
            nested = jax.jit(
                functools.wraps(fun)(body),
                static_argnums=self._argspec.static_argnums,
                static_argnames=self._argspec.static_argnames,
                donate_argnums=self._argspec.donate_argnums,
            )
        nested = self._nested_jits.setdefault(mesh, nested)
        return nested(*args, **kwargs)


def _sharding_of(leaf: object) -> object:
    """An in/out_shardings leaf without its memory layout (a Format's
    sharding; no sharding: None)."""
    sharding, _ = split_format(leaf)
    return None if sharding is UNSPECIFIED and leaf is not UNSPECIFIED else sharding


def _check_layouts(
    api: str, what: str, layouts: Sequence[Any], leaves: Sequence[LeafInfo]
) -> None:
    """A concrete layout has one entry per dim of the value it lays out."""
    for layout, leaf in zip(layouts, leaves, strict=True):
        if layout is None or bridge.is_auto_layout(layout):
            continue
        order = tuple(layout.major_to_minor)
        if len(order) != len(leaf.shape):
            raise ShardingError(
                f"{api} {what} for `{leaf.path}` ({leaf.describe()}): Length of "
                "major_to_minor and the rank of the value should match: "
                f"major_to_minor={order} lays out {len(order)} dims"
            )


def _split_formats(specs: Sequence[object]) -> tuple[list[object], tuple[Any, ...]]:
    """Per-leaf specs as (shardings, memory layouts); no layouts at all: ()."""
    parts = [split_format(s) for s in specs]
    layouts = tuple(layout for _, layout in parts)
    return [s for s, _ in parts], layouts if any(x is not None for x in layouts) else ()


def _jax_leaf(s: object, mesh: Mesh | None, unspecified: object) -> object:
    """An in/out_shardings leaf as jax.jit takes it: meshjit's shardings as
    jax's, bare PartitionSpecs on the context `mesh`, a Format with its
    sharding converted, `unspecified` for an unspecified leaf; _NoJaxForm
    for one with no jax form (AUTO, a bare spec with no mesh)."""
    if s is UNSPECIFIED or s is None:
        return unspecified
    if bridge.is_format(s):
        sharding, layout = split_format(s)
        return bridge.make_format(layout, _jax_leaf(sharding, mesh, None))
    if isinstance(s, PartitionSpec | jax.sharding.PartitionSpec):
        if mesh is None:
            raise _NoJaxForm
        spec = s if isinstance(s, jax.sharding.PartitionSpec) else s.to_jax()
        return jax.sharding.NamedSharding(mesh.to_jax(), spec)
    if isinstance(s, Sharding):
        return s.to_jax()
    if isinstance(s, jax.sharding.Sharding):
        return s
    raise _NoJaxForm


def _jax_out_shardings(tree: object) -> object | None:
    """out_shardings as jax.jit takes them (see `_jax_leaf`), or None where
    a leaf has no jax form or is unspecified (jax.jit takes no per-leaf
    "unspecified" publicly)."""
    mesh = context_mesh()
    unspecified = object()
    try:
        converted = jax.tree_util.tree_map(
            lambda s: _jax_leaf(s, mesh, unspecified), tree, is_leaf=is_spec_leaf
        )
    except _NoJaxForm:
        return None
    leaves = jax.tree_util.tree_leaves(converted, is_leaf=lambda x: x is unspecified)
    if not leaves or any(x is unspecified for x in leaves):
        return None
    found: object = converted
    return found


def _jax_form(tree: object) -> Any:
    """in/out_shardings as jax.jit takes them (see `_jax_leaf`; unspecified
    leaves None); _NoJaxForm where a leaf has no jax form."""
    if tree is UNSPECIFIED:
        return None
    mesh = context_mesh()
    return jax.tree_util.tree_map(
        lambda s: _jax_leaf(s, mesh, None), tree, is_leaf=is_spec_leaf
    )


class _NoJaxForm(Exception):
    """An out_shardings leaf jax.jit cannot take."""


# Jitted wrappers of one function with the same options share their traces
# and executables, as jax's caches do (`pjit(f, ...)` made again per call
# does not trace again): function -> options -> cache.
_SHARED: weakref.WeakKeyDictionary[Any, dict[Hashable, JitCache]] = (
    weakref.WeakKeyDictionary()
)
_SHARED_LOCK = threading.Lock()
# Option sets kept per function (a loop making jit(f, in_shardings=s) for
# ever new `s` must not hold every executable while `f` lives).
_SHARED_PER_FUNCTION = 32


def _tree_key(tree: object) -> Hashable:
    """A hashable key for an options tree, or a fresh object (never equal)
    when a leaf is not hashable."""
    leaves, treedef = jax.tree_util.tree_flatten(tree, is_leaf=is_spec_leaf)
    try:
        key = (treedef, tuple(leaves))
        hash(key)
    except TypeError:
        return object()
    return key


def _shared_cache(fun: Any, options: Hashable, name: str) -> JitCache:
    try:
        hash(options)
        with _SHARED_LOCK:
            per_fun = _SHARED.setdefault(fun, {})
            found = per_fun.get(options)
            if found is None:
                if len(per_fun) >= _SHARED_PER_FUNCTION:  # oldest options out
                    del per_fun[next(iter(per_fun))]
                found = per_fun[options] = JitCache(name)
            return found
    except TypeError:  # not weakly referable, or options not hashable
        return JitCache(name)


def _held(v: Any) -> Any:
    """The value a mutable array holds now; any other leaf (a
    ShapeDtypeStruct with `is_ref=True` among them) itself."""
    return bridge.ref_value(v) if isinstance(v, jax.Ref) else v


def _committed(v: object) -> Hashable:
    if (
        isinstance(v, jax.Array)
        and not _has_tracer(v)  # (a tracer has no `committed`)
        and not v.committed
        and len(v.sharding.device_set) > 1
    ):
        raise NotImplementedError(
            "Having uncommitted Array sharded on multiple devices is not "
            f"supported (as in jax): an argument is an uncommitted array on "
            f"{len(v.sharding.device_set)} devices ({v.sharding}); "
            "jax.device_put it onto its sharding to commit it"
        )
    found: Hashable = None
    if (isinstance(v, jax.Array) and not _has_tracer(v) and v.committed) or (
        isinstance(v, jax.ShapeDtypeStruct) and v.sharding is not None
    ):
        found = v.sharding
    return found


def _as_meshjit(s: Any) -> Sharding:
    return s if isinstance(s, Sharding) else from_jax(s)


# ----------------------------------------------------------------------------
# jit and pjit


def _refuse_unconstrained(api: str, name: str, value: object) -> None:
    """P.UNCONSTRAINED in in_shardings/out_shardings is refused when jit is
    called, as jax does (an argument or result has one layout)."""
    if value is UNSPECIFIED or value is None:
        return
    for leaf in jax.tree_util.tree_leaves(value, is_leaf=is_spec_leaf):
        leaf = _sharding_of(leaf)
        spec = (
            leaf
            if isinstance(leaf, (PartitionSpec, jax.sharding.PartitionSpec))
            else getattr(leaf, "spec", None)
        )
        if spec is None:
            continue
        parts = tuple(spec.partitions)
        if any(
            p is UNCONSTRAINED or p is jax.sharding.PartitionSpec.UNCONSTRAINED
            for p in parts
        ):
            raise ShardingError(
                f"{api} {name}: P.UNCONSTRAINED is not allowed in {name} "
                f"({leaf!r}): Unconstrained dims are not allowed at a function's "
                "boundary; use None to let meshjit decide, or "
                "with_sharding_constraint inside the function"
            )


def _check_jit_options(
    fun: object,
    api: str,
    in_shardings: object,
    out_shardings: object,
    device: Any,
    backend: str | None,
    abstracted_axes: object,
) -> Any:
    if isinstance(fun, staticmethod):  # callable, but not as jit takes it
        raise TypeError(
            f"{api}: staticmethod arguments are not supported; apply {api} to the "
            "function, then staticmethod: @staticmethod above @jit"
        )
    if not callable(fun):
        raise TypeError(f"{api}: Expected a callable value, got {fun!r}")
    if inspect.isgeneratorfunction(fun):
        raise TypeError(
            f"{api}: Expected a function, got a generator function: {fun!r}; a "
            "traced function returns arrays (collect what it yields)"
        )
    if abstracted_axes is not None:
        raise NotImplementedError(
            f"{api}(abstracted_axes=...) is not implemented: meshjit compiles for "
            "concrete shapes (JAX removed abstracted_axes too); call the function "
            "with each shape you need, or pad to a common shape"
        )
    if device is not None and backend is not None:
        raise ShardingError(
            f"{api}: can't specify both a device and a backend, got device={device} "
            f"and backend={backend!r}"
        )
    for name, value in (
        ("in_shardings", in_shardings),
        ("out_shardings", out_shardings),
    ):
        if any(
            bridge.is_layout(leaf)
            for leaf in jax.tree_util.tree_leaves(value, is_leaf=is_spec_leaf)
        ):
            raise ShardingError(
                f"{api} {name}: `jax.jit` does not accept device-local layouts "
                "directly; pass Format(layout, sharding) (jax.experimental.layout), "
                "or Format(layout) to leave the sharding unspecified"
            )
        _refuse_unconstrained(api, name, value)
    if device is None and backend is None:
        return None
    for name, value in (
        ("in_shardings", in_shardings),
        ("out_shardings", out_shardings),
    ):
        if value is not UNSPECIFIED:
            raise ShardingError(
                f"{api}: if backend or device is specified, {name} should not be "
                "specified: device/backend put the whole computation on one device"
            )
    return device if device is not None else jax.devices(backend)[0]


@overload
def jit(
    fun: Callable[..., Any],
    /,
    *,
    in_shardings: object = ...,
    out_shardings: object = ...,
    static_argnums: int | Iterable[int] | None = ...,
    static_argnames: str | Iterable[str] | None = ...,
    donate_argnums: int | Iterable[int] | None = ...,
    donate_argnames: str | Iterable[str] | None = ...,
    keep_unused: bool = ...,
    device: Any = ...,
    backend: str | None = ...,
    inline: bool = ...,
    abstracted_axes: object = ...,
    compiler_options: Mapping[str, Any] | None = ...,
) -> JitFunction: ...


@overload
def jit(
    fun: _NotGiven = ...,
    /,
    *,
    in_shardings: object = ...,
    out_shardings: object = ...,
    static_argnums: int | Iterable[int] | None = ...,
    static_argnames: str | Iterable[str] | None = ...,
    donate_argnums: int | Iterable[int] | None = ...,
    donate_argnames: str | Iterable[str] | None = ...,
    keep_unused: bool = ...,
    device: Any = ...,
    backend: str | None = ...,
    inline: bool = ...,
    abstracted_axes: object = ...,
    compiler_options: Mapping[str, Any] | None = ...,
) -> Callable[[Callable[..., Any]], JitFunction]: ...


def jit(
    fun: Callable[..., Any] | _NotGiven = _NOT_GIVEN,
    /,
    *,
    in_shardings: object = UNSPECIFIED,
    out_shardings: object = UNSPECIFIED,
    static_argnums: int | Iterable[int] | None = None,
    static_argnames: str | Iterable[str] | None = None,
    donate_argnums: int | Iterable[int] | None = None,
    donate_argnames: str | Iterable[str] | None = None,
    keep_unused: bool = False,
    device: Any = None,
    backend: str | None = None,
    inline: bool = False,
    abstracted_axes: object = None,
    compiler_options: Mapping[str, Any] | None = None,
) -> JitFunction | Callable[[Callable[..., Any]], JitFunction]:
    """Compile `fun` with meshjit: the `jax.jit` API, meshjit's compiler.

    Shardings are Shardings (meshjit's or jax's), bare PartitionSpecs (resolved
    against the mesh in context at each call) or pytree prefixes of the
    arguments (keyword arguments included, by parameter) / the outputs; `None`
    means "infer" (inputs) or "propagate" (outputs). Without `fun`, returns a
    decorator: `@jit(static_argnames="n")`.
    """
    options: dict[str, Any] = {
        "in_shardings": in_shardings,
        "out_shardings": out_shardings,
        "static_argnums": static_argnums,
        "static_argnames": static_argnames,
        "donate_argnums": donate_argnums,
        "donate_argnames": donate_argnames,
        "keep_unused": keep_unused,
        "device": device,
        "backend": backend,
        "inline": inline,
        "abstracted_axes": abstracted_axes,
        "compiler_options": compiler_options,
    }
    if isinstance(fun, _NotGiven):
        return lambda f: _make(f, "jit", False, **options)
    return _make(fun, "jit", False, **options)


def pjit(
    fun: Callable[..., Any],
    in_shardings: object = UNSPECIFIED,
    out_shardings: object = UNSPECIFIED,
    static_argnums: int | Iterable[int] | None = None,
    static_argnames: str | Iterable[str] | None = None,
    donate_argnums: int | Iterable[int] | None = None,
    donate_argnames: str | Iterable[str] | None = None,
    keep_unused: bool = False,
    device: Any = None,
    backend: str | None = None,
    inline: bool = False,
    abstracted_axes: object = None,
    compiler_options: Mapping[str, Any] | None = None,
) -> JitFunction:
    """`jit` with pjit's mesh-context semantics: under `with mesh:`, `None` in
    in/out_shardings means replicated, and bare PartitionSpecs use the mesh in
    context where the function is called (not where `pjit` was applied)."""
    return _make(
        fun,
        "pjit",
        True,
        in_shardings=in_shardings,
        out_shardings=out_shardings,
        static_argnums=static_argnums,
        static_argnames=static_argnames,
        donate_argnums=donate_argnums,
        donate_argnames=donate_argnames,
        keep_unused=keep_unused,
        device=device,
        backend=backend,
        inline=inline,
        abstracted_axes=abstracted_axes,
        compiler_options=compiler_options,
    )


def _make(
    fun: Callable[..., Any],
    api: str,
    pjit_mode: bool,
    *,
    in_shardings: object,
    out_shardings: object,
    static_argnums: int | Iterable[int] | None,
    static_argnames: str | Iterable[str] | None,
    donate_argnums: int | Iterable[int] | None,
    donate_argnames: str | Iterable[str] | None,
    keep_unused: bool,
    device: Any,
    backend: str | None,
    inline: bool,
    abstracted_axes: object,
    compiler_options: Mapping[str, Any] | None,
) -> JitFunction:
    # jax's own "unspecified" leaf (jit's default, which code built for
    # jax.jit passes explicitly) is meshjit's.
    in_shardings, out_shardings = (
        jax.tree_util.tree_map(
            lambda s: UNSPECIFIED if bridge.is_jax_unspecified(s) else s,
            tree,
            is_leaf=lambda s: is_spec_leaf(s) or bridge.is_jax_unspecified(s),
        )
        for tree in (in_shardings, out_shardings)
    )
    try:
        placed_on = _check_jit_options(
            fun, api, in_shardings, out_shardings, device, backend, abstracted_axes
        )
        argspec = resolve_argspec(
            fun, api, static_argnums, static_argnames, donate_argnums, donate_argnames
        )
    except MeshjitError as err:
        raise _filtered(err) from None
    return JitFunction(
        fun,
        api=api,
        pjit=pjit_mode,
        in_shardings=in_shardings,
        out_shardings=out_shardings,
        argspec=argspec,
        keep_unused=keep_unused,
        device=placed_on,
        inline=inline,
        compiler_options=compiler_options,
    )


# ----------------------------------------------------------------------------
# with_sharding_constraint


def _on_abstract_mesh(spec: object) -> bool:
    return isinstance(spec, jax.sharding.NamedSharding) and isinstance(
        spec.mesh, jax.sharding.AbstractMesh
    )


def _on_renamed_mesh(spec: object, value: object) -> object:
    """A bare PartitionSpec inside a trace, under `use_abstract_mesh` of a
    mesh with other axes than the mesh context's (the same devices renamed or
    resized, `mesh.abstract_mesh.update(...)`): on that abstract mesh, as jax
    resolves it."""
    if not isinstance(value, jax.core.Tracer):
        return spec
    if isinstance(spec, PartitionSpec):
        jspec = spec.to_jax()
    elif isinstance(spec, jax.sharding.PartitionSpec):
        jspec = spec
    else:
        return spec
    abstract = bridge.abstract_mesh_context()
    mesh = context_mesh()
    if abstract is None or mesh is None or abstract.axis_names == mesh.axis_names:
        return spec
    outer = bridge.set_mesh_context()
    if abstract.size != mesh.size or (
        outer is not None and outer.abstract_mesh == abstract
    ):
        return spec  # not a renaming of the context mesh's devices
    return jax.sharding.NamedSharding(abstract, jspec)


def _abstract_constraint(value: Any, spec: Any, path: str) -> Any:
    """A constraint on an AbstractMesh (axis names and sizes, no devices), as
    jax allows: inside a trace it constrains the value on whichever mesh the
    computation runs on (the module's mesh must have those axes); on a
    concrete array it takes the array's own devices."""
    if isinstance(value, jax.core.Tracer):
        return jax.lax.with_sharding_constraint(value, spec)
    own = getattr(value, "sharding", None)
    if isinstance(own, jax.sharding.NamedSharding) and (
        own.mesh.abstract_mesh == spec.mesh
    ):
        return jax.device_put(value, jax.sharding.NamedSharding(own.mesh, spec.spec))
    raise ShardingError(
        f"with_sharding_constraint for `{path}`: {spec!r} is on an AbstractMesh, "
        "which has no devices; outside a jitted function the value must be an "
        "array on a mesh with the same axes (or pass a NamedSharding on a "
        "concrete Mesh)"
    )


def _constraint_sharding(spec: object, path: str) -> NamedSharding | None:
    if spec is None or spec is UNSPECIFIED:
        return None  # meshjit: None leaves the value unconstrained (jax#19951)
    bare = None
    if isinstance(spec, PartitionSpec):
        bare = spec
    elif isinstance(spec, jax.sharding.PartitionSpec):
        bare = PartitionSpec.from_jax(spec)
    if bare is not None:
        mesh = context_mesh()
        if mesh is None:
            raise MissingMeshError(
                f"with_sharding_constraint for `{path}` got a bare PartitionSpec "
                f"{bare!r}, which needs a mesh: use `with mesh:` or pass "
                f"NamedSharding(mesh, {bare!r})"
            )
        return NamedSharding(mesh, bare)
    if isinstance(spec, jax.sharding.Sharding):
        spec = from_jax(spec)
    if isinstance(spec, NamedSharding):
        return spec
    if isinstance(spec, SingleDeviceSharding):
        # As jax: the whole value on that device (a computation on other
        # devices then reports the mismatch).
        return NamedSharding(
            _resolve.single_device_mesh(next(iter(spec.device_set))), PartitionSpec()
        )
    raise ShardingError(
        f"with_sharding_constraint for `{path}` needs a NamedSharding, a "
        f"SingleDeviceSharding or a PartitionSpec, found {spec!r}"
    )


def with_sharding_constraint(x: Any, shardings: Any) -> Any:
    """Constrain the sharding of `x` (a pytree) inside a jitted function.

    Becomes an `sdy.sharding_constraint` that meshjit's propagation honours.
    A dim the constraint's axes do not divide is split in padded blocks, as
    JAX does (and, unlike JAX, the value stays split: jax#26946); a `None`
    leaf leaves its subtree free.
    Outside a trace it moves the arrays, like `jax.device_put`.
    """
    try:
        specs = broadcast_prefix(
            shardings, x, "x", "with_sharding_constraint shardings"
        )
        flat, tree = jax.tree_util.tree_flatten_with_path(x)
        out = []
        for (path, value), spec in zip(flat, specs, strict=True):
            name = "x" + jax.tree_util.keystr(path)
            spec, layout = split_format(spec)
            if layout is not None:
                raise ShardingError(
                    f"with_sharding_constraint for `{name}`: a memory layout "
                    f"({spec if spec is not UNSPECIFIED else 'no sharding'} "
                    f"with {layout}) is not supported by meshjit inside a "
                    "function; give the sharding alone, or ask for the layout "
                    "of a result with jit's out_shardings=Format(layout, sharding)"
                )
            if spec is UNSPECIFIED:
                out.append(value)
                continue
            spec = _on_renamed_mesh(spec, value)
            if _on_abstract_mesh(spec):
                out.append(_abstract_constraint(value, spec, name))
                continue
            sharding = _constraint_sharding(spec, name)
            if sharding is None:
                out.append(value)
                continue
            shape = tuple(np.shape(value))
            _check_constraint(sharding, name, shape, value)
            record_constraint_mesh(sharding.mesh)
            if isinstance(value, jax.core.Tracer):
                # One device: jax's own SingleDeviceSharding (its type has no
                # mesh; the recorded mesh names the device).
                target = (
                    jax.sharding.SingleDeviceSharding(sharding.mesh.flat_devices[0])
                    if sharding.mesh.axis_names == (_resolve.SINGLE_DEVICE_AXIS,)
                    else sharding.to_jax()
                )
                out.append(jax.lax.with_sharding_constraint(value, target))
            else:
                _check_eager_devices(value, sharding, name)
                out.append(jax.device_put(value, sharding.to_jax()))
        return jax.tree_util.tree_unflatten(tree, out)
    except MeshjitError as err:
        raise _filtered(err) from None


def _check_eager_devices(value: object, sharding: NamedSharding, name: str) -> None:
    """Outside a trace the constraint is a computation, as in jax: a
    committed array must be on the mesh's devices in the mesh's order."""
    if not isinstance(value, jax.Array) or not value.committed:
        return
    own = _as_meshjit(value.sharding)._device_assignment
    want = sharding.mesh.flat_devices
    if tuple(own) != tuple(want):
        raise ShardingError(
            f"with_sharding_constraint for `{name}`: incompatible devices: the "
            f"array is committed to devices with ids {[d.id for d in own]} but "
            f"the constraint's mesh {sharding.mesh} has ids "
            f"{[d.id for d in want]} (order counts); device_put it first"
        )


def _check_constraint(
    sharding: NamedSharding, name: str, shape: tuple[int, ...], value: object
) -> None:
    leaf = LeafInfo(name, shape, leaf_dtype(getattr(value, "dtype", np.float32)))
    try:
        sharding.tensor_sharding(len(shape)).validate(
            sharding.mesh.to_model(),
            shape,
            what=f"`{name}` ({leaf.describe()})",
            allow_uneven=True,
        )
    except ShardingError as err:
        raise type(err)(f"with_sharding_constraint: {err}") from None


__all__ = [
    "Compiled",
    "JitFunction",
    "Lowered",
    "Traced",
    "context_mesh",
    "jit",
    "pjit",
    "with_sharding_constraint",
]
