"""Trace a Python function to StableHLO with JAX's tracer, then attach shardings.

JAX traces and lowers without any shardings of ours (`jax.jit(flat).trace(...)
.lower()`): the module has plain `@main` arguments, plus `sdy.mesh` and
`sdy.sharding_constraint` where the function called `with_sharding_constraint`.
`attach_shardings` writes meshjit's decisions onto that module as Shardy
attributes (`sdy.mesh`, `sdy.sharding` on `@main`'s arguments and results),
which is all meshjit's pipeline reads.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np
from jax.tree_util import PyTreeDef

from meshjit.compiler import bridge
from meshjit.compiler.graph import AttrPlan, Opaque, read_graph, read_interface
from meshjit.compiler.ir import ir, make_context, parse_module, print_module
from meshjit.dialects import sdy_text
from meshjit.dialects.sharding import AxisRef, MeshModel, TensorSharding, view_axes
from meshjit.errors import InternalError, JitArgumentError, ShardingError
from meshjit.frontend.args import CallForm, describe_aval, is_key_dtype
from meshjit.frontend.interop import note_meshjit_objects
from meshjit.frontend.mesh import Mesh

# ----------------------------------------------------------------------------
# abstract values


@dataclass(frozen=True, slots=True)
class LeafInfo:
    """One array leaf: its key path as the user wrote it, shape and dtype."""

    path: str  # "params['w']", "result[0]"
    shape: tuple[int, ...]
    dtype: Any  # a numpy dtype, or jax's extended dtype of typed PRNG keys
    weak_type: bool = False
    # Explicit sharding mode: the sharding in the value's type (a
    # jax.sharding.NamedSharding on a mesh with an Explicit axis), which jax's
    # tracer carries through every op; None for untyped (Auto) values.
    sharding: Any = None
    # An argument committed to a mesh of Auto axes only, where jit's options
    # do not place the program elsewhere: that mesh's AbstractMesh, which jax
    # puts in the argument's aval (`x.aval.sharding.mesh` inside the
    # function; the spec names no axis).
    auto_mesh: Any = None
    # A `jax.core.Token`: passed as its buffer (bool[0], as jax passes it)
    # and made a token again inside the function.
    token: bool = False
    # A mutable array (`jax.new_ref`): its value is passed, a mutable array
    # again inside the function, and its new value written back after the
    # call.
    ref: bool = False

    def aval_key(self) -> tuple[Any, ...]:
        typed = None if self.sharding is None else typed_key(self.sharding)
        return (
            self.shape,
            self.dtype.name,
            self.weak_type,
            typed,
            self.auto_mesh,
            self.token,
            self.ref,
        )

    def sds(self) -> Any:
        """What jax traces the leaf as: a ShapeDtypeStruct, or a ShapedArray
        for a 64-bit array while jax_enable_x64 is off (made under
        `jax.enable_x64()`: jax traces it as it is and converts inside the
        program, where a ShapeDtypeStruct would narrow it)."""
        sharding = self.sharding
        if sharding is None and self.auto_mesh is not None:
            sharding = jax.sharding.NamedSharding(self.auto_mesh, jax.P())
        if self.narrowed():
            if sharding is not None:  # an aval's mesh is abstract
                mesh = getattr(sharding.mesh, "abstract_mesh", sharding.mesh)
                sharding = jax.sharding.NamedSharding(mesh, sharding.spec)
            return jax.core.ShapedArray(
                self.shape, self.dtype, self.weak_type, sharding=sharding
            )
        return jax.ShapeDtypeStruct(
            self.shape, self.dtype, weak_type=self.weak_type, sharding=sharding
        )

    def narrowed(self) -> bool:
        """A dtype jax narrows in a ShapeDtypeStruct (int64 while
        jax_enable_x64 is off)."""
        return not is_key_dtype(self.dtype) and self.dtype != abstract_dtype(self.dtype)

    def describe(self) -> str:
        return describe_aval(self)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def key_shape(self) -> tuple[int, ...]:
        """The trailing dims a typed PRNG key array has in the module (its
        key data: `key<fry>[4]` is `tensor<4x2xui32>`); () for other dtypes."""
        return key_data_shape(self.dtype)

    @property
    def physical_ndim(self) -> int:
        """The rank of the value in the module (`ndim` plus `key_shape`)."""
        return len(self.shape) + len(self.key_shape)


_SCALARS = (bool, int, float, complex, np.generic)


@functools.cache
def _key_data_shape(dtype: Any) -> tuple[int, ...]:
    data = jax.eval_shape(jax.random.key_data, jax.ShapeDtypeStruct((), dtype))
    return tuple(data.shape)


def key_data_shape(dtype: object) -> tuple[int, ...]:
    """The trailing dims of a key dtype's data (`(2,)` for threefry), else ()."""
    if isinstance(dtype, np.dtype):  # the common case, on the call path
        return ()
    return _key_data_shape(dtype) if is_key_dtype(dtype) else ()


def leaf_dtype(dtype: Any, what: str = "a value") -> Any:
    """A numpy dtype, or a typed PRNG key's dtype as jax has it; another
    extended dtype (jax's private `ExtendedDType`) is refused, naming `what`
    has it."""
    if isinstance(dtype, np.dtype):  # the common case, on the call path
        return dtype
    if is_key_dtype(dtype):
        return dtype
    if jax.numpy.issubdtype(dtype, jax.dtypes.extended):
        raise JitArgumentError(
            f"{what} has the extended dtype {dtype}: of jax's extended dtypes "
            "meshjit supports PRNG keys (jax.random.key) only"
        )
    return np.dtype(dtype)


def abstract_dtype(dtype: Any) -> Any:
    """The dtype of a ShapeDtypeStruct as jax traces it: canonical (int64 is
    int32 unless jax_enable_x64 is set), as an array argument's already is.
    (A ShapedArray's is taken as it is, as jax takes it.)"""
    dtype = leaf_dtype(dtype)
    if is_key_dtype(dtype):
        return dtype
    return np.dtype(jax.dtypes.canonicalize_dtype(dtype))


def typed_sharding(sharding: object) -> Any:
    """`sharding` as the sharding in a value's type (explicit sharding mode):
    a jax NamedSharding on a mesh with at least one Explicit axis, else None
    (Auto and Manual axes do not appear in types)."""
    to_jax = getattr(sharding, "to_jax", None)
    if to_jax is not None:  # meshjit's own sharding classes
        sharding = to_jax()
    if not isinstance(sharding, jax.sharding.NamedSharding):
        return None
    explicit = jax.sharding.AxisType.Explicit
    return sharding if explicit in sharding.mesh.axis_types else None


def typed_key(sharding: Any) -> tuple[Any, ...]:
    """What of a typed sharding the trace depends on (mesh and spec)."""
    return (sharding.mesh, sharding.spec)


def leaf_info(path: str, x: object, api: str, fun_name: str) -> LeafInfo:
    """The abstract value of an argument leaf; non-arrays must be static."""
    if isinstance(x, jax.Ref):  # its value's, marked
        value = leaf_info(path, bridge.ref_value(x), api, fun_name)
        return dataclasses.replace(value, ref=True)
    if isinstance(x, jax.core.ShapedArray):  # jax lowers on avals too
        return LeafInfo(
            path,
            tuple(x.shape),
            leaf_dtype(x.dtype, f"{api}: argument `{path}` of {fun_name}"),
            bool(x.weak_type),
            typed_sharding(getattr(x, "sharding", None)),
        )
    if isinstance(x, jax.ShapeDtypeStruct):
        return LeafInfo(
            path,
            tuple(x.shape),
            abstract_dtype(x.dtype),
            bool(x.weak_type),
            typed_sharding(x.sharding),
            # `is_ref=True`: lowering for a mutable array argument
            ref=bool(getattr(x, "is_ref", False)),
        )
    if bridge.is_token(x):
        return LeafInfo(path, (0,), np.dtype(np.bool_), token=True)
    if isinstance(x, (jax.Array, np.ndarray, *_SCALARS)):
        aval = jax.typeof(x)
        typed = None
        if isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer):
            typed = typed_sharding(x.sharding)
        return LeafInfo(
            path,
            tuple(aval.shape),
            leaf_dtype(aval.dtype, f"{api}: argument `{path}` of {fun_name}"),
            bool(getattr(aval, "weak_type", False)),
            typed,
        )
    raise JitArgumentError(
        f"{api}: argument `{path}` of {fun_name} is a {type(x).__name__} ({x!r:.60}), "
        "not an array; a non-array argument must be marked static with "
        "static_argnums or static_argnames"
    )


def check_ref_arguments(
    flat: Sequence[Any],
    leaves: Sequence[LeafInfo],
    api: str,
    closed: Sequence[Any] = (),
) -> None:
    """As jax: a mutable array is passed as one argument only, and not one
    the function also closes over (`closed`)."""
    seen: dict[int, str] = {}
    for v, leaf in zip(flat, leaves, strict=True):
        if not leaf.ref:
            continue
        other = seen.setdefault(id(v), leaf.path)
        if other != leaf.path:
            raise JitArgumentError(
                f"{api}: one mutable array (jax.new_ref) is passed as both `{other}` "
                f"and `{leaf.path}`; as in jax, a mutable array may be passed once "
                "per call"
            )
        if any(v is r for r in closed):
            raise JitArgumentError(
                f"{api}: the mutable array passed as `{leaf.path}` is one the function "
                "also closes over; as in jax, pass it or close over it, not both"
            )


def _is_token_value(x: object) -> bool:
    """A token inside a trace (its aval is jax's abstract token)."""
    return getattr(x, "aval", None) is bridge.abstract_token() or bridge.is_token(x)


def auto_mesh_of(x: object) -> Any:
    """The AbstractMesh of an array committed to a mesh of several devices
    and no Explicit axis, else None."""
    if not isinstance(x, jax.Array) or isinstance(x, jax.core.Tracer):
        return None
    sharding = x.sharding
    if not x.committed or not isinstance(sharding, jax.sharding.NamedSharding):
        return None
    mesh = sharding.mesh
    if not isinstance(mesh, jax.sharding.Mesh) or mesh.size < 2:
        return None
    if jax.sharding.AxisType.Explicit in mesh.axis_types:
        return None
    return mesh.abstract_mesh


# ----------------------------------------------------------------------------
# meshes used by with_sharding_constraint while tracing


class _Recorder(threading.local):
    def __init__(self) -> None:
        self.stack: list[list[Mesh]] = []
        # The context mesh each running meshjit trace started under.
        self.contexts: list[Mesh | None] = []


_RECORDER = _Recorder()


def enclosing_context_mesh() -> Mesh | None:
    """The context mesh of the innermost meshjit trace running, if any."""
    return _RECORDER.contexts[-1] if _RECORDER.contexts else None


def record_constraint_mesh(mesh: Mesh) -> None:
    """Called by `with_sharding_constraint` while a meshjit trace is running."""
    if _RECORDER.stack:
        _RECORDER.stack[-1].append(mesh)


# ----------------------------------------------------------------------------
# tracing


class TracedText:
    """jax's lowered module and its text with locations, printed the first
    time it is asked for: the first lowering takes a copy of the module in
    jax's context instead (on a Llama step a print is 10 ms and parsing it
    again 6 ms; a copy 1-2 ms). Later lowerings of the trace parse the text
    in contexts of their own, so that no context outlives its modules' use
    by more than the trace cache's entry. `meshes`: the module's `sdy.mesh`
    definitions, (symbol, mesh attribute text)."""

    __slots__ = ("_copied", "_lock", "_module", "_text", "meshes")

    def __init__(
        self,
        module: ir.Module | None,
        text: str | None,
        meshes: tuple[tuple[str, str], ...],
    ) -> None:
        self._module = module
        self._text = text
        self._copied = False
        self._lock = threading.Lock()
        self.meshes = meshes

    def text(self) -> str:
        with self._lock:
            if self._text is None:
                assert self._module is not None
                self._text = print_module(self._module, debug_info=True)
                if self._copied:
                    self._module = None
            return self._text

    def take_copy(self) -> ir.Module | None:
        """A copy of jax's module, the first time it is asked for (None
        after, or where the text is the only form)."""
        with self._lock:
            if self._module is None or self._copied:
                return None
            self._copied = True
            module = self._module
            if self._text is not None:
                self._module = None
            return copy_module(module)


def copy_module(module: ir.Module) -> ir.Module:
    """A copy of `module` in its context: its attributes, location and ops."""
    with module.context:
        out = ir.Module.create(loc=module.operation.location)
        attrs = module.operation.attributes
        for i in range(len(attrs)):
            named = attrs[i]
            out.operation.attributes[named.name] = named.attr
        into = ir.InsertionPoint(out.body)
        for op in module.body.operations:
            op.operation.clone(ip=into)
    return out


@dataclass(frozen=True, slots=True)
class TracedModule:
    """JAX's StableHLO for one call form and abstract arguments, no shardings."""

    source: TracedText
    fun_name: str
    out_tree: PyTreeDef
    outputs: tuple[LeafInfo, ...]
    kept: tuple[int, ...]  # indices of the argument leaves @main still takes
    constraint_meshes: tuple[Mesh, ...]
    jaxpr: Any  # jax's ClosedJaxpr (for users; meshjit reads only `text`)
    # Each output's abstract mesh in jax's types (empty without a mesh
    # context): decides how an output sharding is spelled, as in jax.
    out_meshes: tuple[Any, ...] = ()
    # Host callbacks and ordered effects (jax.debug.print, io_callback):
    # what compiling and running the program needs; None without any.
    effects: bridge.Effects | None = None
    # Output leaves that are tokens (returned as bool[0] buffers).
    token_outputs: tuple[int, ...] = ()
    # Mutable arrays (jax.new_ref) the function closes over: @main's last
    # arguments; after the outputs, @main returns a new value for
    # `refs[written[i]]` (jax writes them back after the call).
    refs: tuple[Any, ...] = ()
    written: tuple[int, ...] = ()
    # The argument leaves that are mutable arrays (`LeafInfo.ref`): @main
    # returns their new values right after the function's outputs (before
    # those of the mutable arrays it closes over).
    ref_args: tuple[int, ...] = ()
    # jax.debug.inspect_array_sharding's callbacks, by the id its custom call
    # @InspectSharding names (`bridge.lowering_inspections`)
    inspections: Mapping[int, Any] = dataclasses.field(default_factory=dict)

    @property
    def text(self) -> str:
        """The module's text with locations (printed on first use)."""
        return self.source.text()

    def take_module(self) -> ir.Module | None:
        """For the first lowering: a copy of jax's module, in the context jax
        lowered it in (a new context costs 2.5-3 ms, 4% of a small program's
        first call; a parse of the text more); None for later ones."""
        return self.source.take_copy()

    @property
    def out_info(self) -> Any:
        return jax.tree_util.tree_unflatten(
            self.out_tree, [o.sds() for o in self.outputs]
        )


# An `sdy.mesh` definition with axes (jax's @empty_mesh has none).
_MESH_DEF = re.compile(r'^\s*sdy\.mesh @\S+ = <\["', re.MULTILINE)


def _trace(
    flat: Callable[..., Any],
    leaves: Sequence[LeafInfo],
    keep_unused: bool,
    context: Mesh | None,
) -> tuple[Any, Any, list[Mesh]]:
    """jax's trace and lowering of `flat` on the leaves' abstract values, and
    the meshes `with_sharding_constraint` used while tracing."""
    meshes: list[Mesh] = []
    _RECORDER.stack.append(meshes)
    _RECORDER.contexts.append(context)
    try:
        traced = jax.jit(flat, keep_unused=keep_unused).trace(
            *(leaf.sds() for leaf in leaves)
        )
        # Types on an AbstractMesh only (no devices): jax lowers them for a
        # named platform; the module does not depend on which.
        abstract = any(
            (
                leaf.sharding is not None
                and not isinstance(leaf.sharding.mesh, jax.sharding.Mesh)
            )
            or leaf.auto_mesh is not None
            # (a 64-bit leaf's typed sharding is traced on its abstract mesh)
            or (leaf.sharding is not None and leaf.narrowed())
            for leaf in leaves
        ) or (
            bridge.abstract_mesh_context() is not None
            and bridge.set_mesh_context() is None
        )
        with bridge.lowering_inspections():
            lowered = (
                traced.lower(lowering_platforms=(jax.default_backend(),))
                if abstract
                else traced.lower()
            )
    finally:
        _RECORDER.stack.pop()
        _RECORDER.contexts.pop()
    _check_lowered_avals(lowered, leaves)
    return traced, lowered, meshes


def _check_lowered_avals(lowered: Any, leaves: Sequence[LeafInfo]) -> None:
    """Each leaf is lowered as the type the call path checks arguments
    against: the executable takes their buffers as they are (a 64-bit buffer
    handed to a 32-bit parameter crashed jax's C++ dispatch)."""
    avals = bridge.lowered_in_avals(lowered)
    if avals is None or len(avals) != len(leaves):
        return
    for leaf, aval in zip(leaves, avals, strict=True):
        if tuple(aval.shape) != leaf.shape or aval.dtype != leaf.dtype:
            raise InternalError(
                f"argument `{leaf.path}` is {leaf.describe()} but jax lowered "
                f"it as {aval.str_short()}"
            )


def trace_function(
    fun: Callable[..., Any],
    form: CallForm,
    dyn_tree: PyTreeDef,
    leaves: Sequence[LeafInfo],
    keep_unused: bool,
    fun_name: str,
    context: Mesh | None = None,
) -> TracedModule:
    """Traces `fun` on abstract leaves with JAX and lowers it without shardings
    (`context`: the mesh context it is called under)."""

    tokens = [leaf.token for leaf in leaves]
    token_outputs: list[int] = []
    ref_args = tuple(k for k, leaf in enumerate(leaves) if leaf.ref)

    def flat(*values: object) -> Any:
        if any(tokens):  # a token argument arrives as its buffer
            values = tuple(
                jax.lax.create_token() if t else v
                for v, t in zip(values, tokens, strict=True)
            )
        made: list[Any] = []
        if ref_args:  # a mutable array's value arrives: a mutable array again
            given = list(values)
            for k in ref_args:
                given[k] = jax.new_ref(given[k])
                made.append(given[k])
            values = tuple(given)
        dynamic = jax.tree_util.tree_unflatten(dyn_tree, values)
        pos, kw = form.rebuild(dynamic)
        try:
            out = fun(*pos, **kw)
        except (TypeError, ValueError) as err:
            note_meshjit_objects(err)
            raise
        leaves_out, tree = jax.tree_util.tree_flatten(out)
        for i, o in enumerate(leaves_out):
            if isinstance(o, jax.Ref):
                path = jax.tree_util.keystr(
                    jax.tree_util.tree_flatten_with_path(out)[0][i][0]
                )
                raise JitArgumentError(
                    f"{fun_name} returns a mutable array (jax.new_ref) as "
                    f"result{path}; mutable arrays cannot be returned (as in "
                    "jax): return its value, ref[...]"
                )
        found = [i for i, o in enumerate(leaves_out) if _is_token_value(o)]
        if found:
            # a token result leaves as a buffer (bool[0]) and is a token
            # again when the call returns
            token_outputs[:] = found
            out = jax.tree_util.tree_unflatten(
                tree,
                [
                    jax.numpy.zeros((0,), bool) if i in found else o
                    for i, o in enumerate(leaves_out)
                ],
            )
        # the mutable arguments' new values follow the outputs
        return (out, [r[...] for r in made]) if made else out

    flat.__name__ = fun_name
    flat.__qualname__ = fun_name
    auto = any(leaf.auto_mesh is not None for leaf in leaves)
    try:
        traced, lowered, meshes = _trace(flat, leaves, keep_unused, context)
        if not bridge.tracing():
            leaked = bridge.leaked_tracer_error(traced)
            if leaked is not None:
                raise leaked
    except ValueError as err:
        # Host callbacks need devices at lowering: jax refuses the
        # arguments' AbstractMeshes then; trace without them (below).
        if not auto or "require devices" not in str(err):
            raise
        lowered = None
    if auto and (lowered is None or len(_MESH_DEF.findall(str(lowered.as_text()))) > 1):
        # The arguments' Auto meshes in their avals made jax write them into
        # the module beside another mesh (a constraint's): trace without them
        # (the avals then carry no mesh; the program is the same, and mixing
        # meshes is reported as it was).
        plain = [dataclasses.replace(leaf, auto_mesh=None) for leaf in leaves]
        traced, lowered, meshes = _trace(flat, plain, keep_unused, context)
    out_info = traced.out_info[0] if ref_args else traced.out_info
    out_flat, out_tree = jax.tree_util.tree_flatten_with_path(out_info)
    out_avals = traced.jaxpr.out_avals[: len(out_flat)]
    outputs = tuple(
        LeafInfo(
            "result" + jax.tree_util.keystr(p),
            tuple(o.shape),
            leaf_dtype(o.dtype, f"the result{jax.tree_util.keystr(p)} of {fun_name}"),
            bool(getattr(o, "weak_type", False)),
            # The sharding in the output's type (explicit mode), where
            # out_info has none (no out_shardings): the value's own aval's.
            typed_sharding(getattr(o, "sharding", None))
            or (
                typed_sharding(getattr(a, "sharding", None)) if a is not None else None
            ),
        )
        for (p, o), a in zip(
            out_flat,
            out_avals if len(out_avals) == len(out_flat) else [None] * len(out_flat),
            strict=True,
        )
    )
    kept = tuple(sorted(bridge.kept_argument_indices(lowered)))
    refs, out_mut = bridge.mutable_arrays(lowered)
    written = tuple(i - len(kept) for i in out_mut if i is not None)
    returned = len(outputs) + len(ref_args)
    if refs and (
        any(i is not None for i in out_mut[:returned])
        or len(written) != len(out_mut) - returned
    ):
        raise NotImplementedError(
            f"{fun_name}: jax's lowering interleaves the values of the mutable "
            "arrays it closes over with the function's results; meshjit expects "
            "them after the results"
        )
    return TracedModule(
        _traced_text(lowered),
        fun_name,
        out_tree,
        outputs,
        kept,
        tuple(dict.fromkeys(meshes)),
        traced.jaxpr,
        tuple(getattr(getattr(a, "sharding", None), "mesh", None) for a in out_avals),
        bridge.lowering_effects(lowered),
        tuple(token_outputs),
        refs,
        written,
        ref_args,
        bridge.inspect_callbacks(traced),
    )


def _traced_text(lowered: Any) -> TracedText:
    """jax's module, kept as it is where its text would be kept as printed
    (one mesh with axes at most: no views to merge), else its text with the
    views merged."""
    module = bridge.static_module(lowered)
    if isinstance(module, ir.Module):
        with module.context:
            meshes = tuple(
                (
                    ir.StringAttr(op.attributes["sym_name"]).value,
                    str(op.attributes["mesh"]),
                )
                for op in module.body.operations
                if op.operation.name == "sdy.mesh"
            )
        if sum(1 for _, m in meshes if sdy_text.parse_mesh(m).axes) < 2:
            return TracedText(module, None, meshes)
    text = merge_mesh_views(print_module(module, debug_info=True))
    return TracedText(None, text, tuple(mesh_defs(text)))


# ----------------------------------------------------------------------------
# the module's interface as Shardy attributes


_MESH_OP = re.compile(r"^\s*sdy\.mesh @([\w$.]+) = (<[^>]*>)", re.MULTILINE)


def mesh_defs(text: str) -> list[tuple[str, str]]:
    """A module text's `sdy.mesh` definitions, (symbol, mesh attribute text),
    read off with `_MESH_OP` (parsing the module for them took 3 to 11 ms of
    a first call); a text with a mesh op the pattern misses (another printed
    form) is parsed."""
    meshes: list[tuple[str, str]] = _MESH_OP.findall(text)
    if len(meshes) != text.count("sdy.mesh"):
        interface = read_interface(parse_module(text, make_context()))
        meshes = [(sym, attr.text) for sym, attr in interface.meshes]
    return meshes


def traced_mesh(
    text: str | Sequence[tuple[str, str]],
) -> tuple[str, MeshModel] | None:
    """The `sdy.mesh` a traced module defines (from with_sharding_constraint),
    from its text or its `mesh_defs`."""
    meshes = mesh_defs(text) if isinstance(text, str) else text
    found: list[tuple[str, MeshModel]] = []
    for sym, mesh_text in meshes:
        model = sdy_text.parse_mesh(mesh_text)
        if not model.axes:
            # JAX's @empty_mesh for replicated 0-d values, or a maximal mesh
            # (one device) where jax places a host callback
            continue
        found.append((sym, model))
    # jax 0.11 declares the mesh again for a shard_map (`@mesh_0`, the same
    # axes and devices): one mesh under two names.
    if len({model for _, model in found}) > 1:
        shown = ", ".join(f"@{n} = {m}" for n, m in found)
        raise ShardingError(
            "the function uses with_sharding_constraint on several meshes "
            f"({shown}); meshjit compiles a function for one mesh: use shardings "
            "on one mesh throughout"
        )
    return found[0] if found else None


def merge_mesh_views(text: str) -> str:
    """A module whose function changes mesh names or sizes over the same
    devices (`use_abstract_mesh(mesh.update(...))` inside it; jax writes the
    second mesh as `@mesh_0`), with every sharding on such a view spelled on
    the first mesh instead: one mesh, as meshjit partitions. Views that are
    not the same devices in the same order stay, and are reported as
    several meshes."""
    if len(_MESH_DEF.findall(text)) < 2:
        return text
    meshes = [
        (name, sdy_text.parse_mesh(body)) for name, body in _MESH_OP.findall(text)
    ]
    meshes = [(n, m) for n, m in meshes if m.axes]
    base_name, base = meshes[0]
    return respell_views(text, base_name, base)


def respell_views(text: str, base_name: str, base: MeshModel) -> str:
    """Every sharding on a mesh of the module that is a view of `base` (the
    same devices in the same order, other axis names or sizes) spelled on
    `@base_name`, with `base`'s axes or sub-axes; those meshes' definitions
    dropped."""
    views: dict[str, dict[str, tuple[AxisRef, ...]]] = {}
    for name, body in _MESH_OP.findall(text):
        mesh = sdy_text.parse_mesh(body)
        if _is_view(mesh, base):
            found = view_axes(mesh, base)
            assert found is not None
            views[name] = found
    if not views:
        return text
    names = "|".join(re.escape(n) for n in views)
    pattern = re.compile(r"<@(" + names + r"), [^>]*>")

    def move(
        axes: dict[str, tuple[AxisRef, ...]], refs: tuple[AxisRef, ...]
    ) -> tuple[AxisRef, ...]:
        out: list[AxisRef] = []
        for b in (b for r in refs for b in axes[r.name]):
            last = out[-1] if out else None
            if (
                last is not None
                and last.name == b.name
                and last.size is not None
                and b.size is not None
                and last.pre_size * last.size == b.pre_size
            ):  # adjacent sub-axes of one axis: one (sub-)axis
                size = last.size * b.size
                whole = last.pre_size == 1 and size == base.axis_size(b.name)
                out[-1] = (
                    AxisRef(b.name)
                    if whole
                    else AxisRef(b.name, pre_size=last.pre_size, size=size)
                )
            else:
                out.append(b)
        return tuple(out)

    def respell(match: re.Match[str]) -> str:
        sharding = sdy_text.parse_sharding(match.group(0))
        axes = views[sharding.mesh_name]
        moved = TensorSharding(
            base_name,
            tuple(
                dataclasses.replace(d, axes=move(axes, d.axes)) for d in sharding.dims
            ),
            move(axes, sharding.replicated),
            move(axes, sharding.unreduced),
        )
        return sdy_text.print_sharding_body(moved)

    text = pattern.sub(respell, text)
    # The views' definitions go; `base` is defined where the first was,
    # unless the module defines it already.
    defined = base_name not in views and any(
        n == base_name for n, _ in _MESH_OP.findall(text)
    )
    keep = [not defined]

    def drop(match: re.Match[str]) -> str:
        if keep[0]:
            keep[0] = False
            return "  " + sdy_text.print_mesh_op(base_name, base) + "\n"
        return ""

    views_def = re.compile(r"^[ \t]*sdy\.mesh @(?:" + names + r") = .*\n", re.MULTILINE)
    return views_def.sub(drop, text)


def has_views(meshes: Sequence[tuple[str, str]], base: MeshModel) -> bool:
    """Whether any of the `mesh_defs` is a view of `base` (other axis names
    or sizes over its devices), whose shardings `respell_views` rewrites."""
    return any(_is_view(sdy_text.parse_mesh(m), base) for _, m in meshes)


def _is_view(mesh: MeshModel, base: MeshModel) -> bool:
    """Whether shardings on `mesh` are respelled on `base` (`respell_views`)."""
    return bool(mesh.axes) and mesh != base and view_axes(mesh, base) is not None


def _main(module: ir.Module) -> Any:
    for op in module.body.operations:
        if op.operation.name != "func.func":
            continue
        if ir.StringAttr(op.attributes["sym_name"]).value == "main":
            return op
    raise ShardingError("the traced module has no @main")


def _merge_entries(
    func: Any, key: str, count: int, updates: Mapping[int, Mapping[str, ir.Attribute]]
) -> None:
    old = func.attributes[key] if key in func.attributes else None  # noqa: SIM401
    entries = []
    for i in range(count):
        merged: dict[str, ir.Attribute] = {}
        if old is not None:
            entry: Any = ir.DictAttr(old[i])
            merged.update((na.name, na.attr) for na in entry)
        merged.update(updates.get(i, {}))
        entries.append(ir.DictAttr.get(merged))
    func.attributes[key] = ir.ArrayAttr.get(entries)


def attach_shardings(
    text: str | ir.Module,
    mesh_name: str,
    mesh: MeshModel,
    args: Sequence[TensorSharding | None],
    results: Sequence[TensorSharding | None],
    context: ir.Context | None = None,
    *,
    lazy: bool = False,
    layout_modes: tuple[Sequence[str | None], Sequence[str | None]] | None = None,
) -> tuple[str | None, ir.Module | None]:
    """The module with `sdy.mesh @mesh_name` and `sdy.sharding` on @main, as
    text and as the module that printed it (which a caller takes instead of
    parsing the text again: a new context and a parse are 3-10 ms of a
    first call); references to an empty mesh, or to `mesh` under another
    name, are renamed @mesh_name in the module. Shardings on a view of `mesh`
    (its devices renamed or resized) are spelled on it. `context`: where to
    parse it (jax's lowering context), else a new one. `lazy`: where the
    module is the answer, the text is not printed (None): the caller prints
    it when it needs it (a module's print with locations is 10 ms of a
    Llama step's first call). `text` may be the module itself (a copy of
    jax's, changed in place), unless its meshes include views of `mesh`.
    `layout_modes`: per argument and result, an `mhlo.layout_mode` to set
    (a memory layout jit was asked for), or None."""
    if isinstance(text, ir.Module):
        module = text
        ctx = module.context
        with ctx:
            defs = [
                str(op.attributes["mesh"])
                for op in module.body.operations
                if op.operation.name == "sdy.mesh"
            ]
        if any(_is_view(sdy_text.parse_mesh(d), mesh) for d in defs):
            raise ValueError("attach_shardings: views of the mesh need the text")
    else:
        text = respell_views(text, mesh_name, mesh)
        ctx = context if context is not None else make_context()
        module = parse_module(text, ctx)
    axis_less: list[str] = []  # names that become @mesh_name
    with ctx, ir.Location.unknown():
        for op in list(module.body.operations):
            if op.operation.name == "sdy.mesh":
                model = sdy_text.parse_mesh(str(op.attributes["mesh"]))
                if not model.axes and model.device_ids is not None:
                    continue  # a maximal mesh: ops placed on one device
                name = ir.StringAttr(op.attributes["sym_name"]).value
                if (model == MeshModel(()) or model == mesh) and name != mesh_name:
                    # replicated on any mesh, or the mesh again under another
                    # name (jax 0.11's shard_map): references become @mesh_name
                    axis_less.append(name)
                op.operation.erase()
        mesh_op = ir.Operation.parse(sdy_text.print_mesh_op(mesh_name, mesh))
        ir.InsertionPoint.at_block_begin(module.body).insert(mesh_op)
        func = _main(module)
        ftype = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
        if len(ftype.inputs) != len(args) or len(ftype.results) != len(results):
            raise ShardingError(
                f"internal: @main takes {len(ftype.inputs)} arguments and returns "
                f"{len(ftype.results)} results, but {len(args)} and {len(results)} "
                "shardings were given"
            )

        def updates(
            shardings: Sequence[TensorSharding | None],
            modes: Sequence[str | None] | None,
        ) -> dict[int, dict[str, ir.Attribute]]:
            out = {
                i: {"sdy.sharding": ir.Attribute.parse(sdy_text.print_sharding(s))}
                for i, s in enumerate(shardings)
                if s is not None
            }
            for i, mode in enumerate(modes or ()):
                if mode is not None:
                    out.setdefault(i, {})["mhlo.layout_mode"] = ir.StringAttr.get(mode)
            return out

        arg_modes, res_modes = layout_modes or (None, None)
        _merge_entries(func, "arg_attrs", len(args), updates(args, arg_modes))
        _merge_entries(func, "res_attrs", len(results), updates(results, res_modes))
        i32 = ir.IntegerType.get_signless(32)
        module.operation.attributes["mhlo.num_partitions"] = ir.IntegerAttr.get(
            i32, mesh.size
        )
        for name in axis_less:  # in sharding attributes, constraints, regions
            ir.SymbolTable.replace_all_symbol_uses(name, mesh_name, module.operation)
    if lazy:
        return None, module
    return print_module(module, debug_info=True), module


def alias_plan(
    module: ir.Module, aliases: Mapping[int, int], source_name: str
) -> AttrPlan:
    """Marks argument i of @main as reusing the buffer of result aliases[i],
    as graph attribute changes (a `graph_session`'s graph stays in step with
    the module); `source_name` as the session read it (then the graph is not
    read again)."""
    plan = AttrPlan()
    main = read_graph(module, source_name).symbols["main"]
    for a, r in aliases.items():
        plan.set_arg(main, a, "tf.aliasing_output", f"{r} : i32")
    return plan


def interface_shardings(
    module: ir.Module,
) -> tuple[list[TensorSharding | None], list[TensorSharding | None]]:
    """The `sdy.sharding` of each argument and result of @main (None: none)."""
    main = read_interface(module).funcs["main"]

    def read(entries: tuple[Mapping[str, Any], ...]) -> list[TensorSharding | None]:
        out: list[TensorSharding | None] = []
        for entry in entries:
            found = entry.get("sdy.sharding")
            out.append(
                sdy_text.parse_sharding(found.text)
                if isinstance(found, Opaque)
                else None
            )
        return out

    return read(main.arg_attrs), read(main.res_attrs)
