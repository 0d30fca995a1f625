"""The one module that imports private jax/jaxlib APIs.

meshjit supports jax and jaxlib from 0.10.2 up to the last 0.12 release (the
same release of the two; see pyproject.toml). Where those versions differ in a
private name, this file alone knows it; `check_versions` runs before any
private import, so a jax outside the range fails at `import meshjit` with the
range named, not deep in a pass.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import jax
import jaxlib.version

from meshjit.dialects.stablehlo_rules import INSPECT_SHARDING
from meshjit.errors import (
    DuplicateAxisError,
    IndivisibleDimError,
    UnsupportedJaxError,
)

# The supported range, as pyproject.toml's dependencies spell it.
JAX_RANGE = ">=0.10.2,<0.13"
JAX_MIN = (0, 10, 2)
JAX_BELOW = (0, 13)


def release(version: str) -> tuple[int, ...]:
    """The numeric release of a version string: "0.12.0.1" -> (0, 12, 0, 1),
    "0.11.0rc1" or "0.11.0.dev2026" -> (0, 11, 0)."""
    found = re.match(r"\d+(?:\.\d+)*", version.strip())
    if found is None:
        return ()
    return tuple(int(p) for p in found.group(0).split("."))


def check_versions(jax_version: str, jaxlib_version: str) -> None:
    """Refuses a jax or jaxlib outside the supported range, or the two at
    different releases (major.minor.patch), with one error naming the range."""
    problems = []
    for name, version in (("jax", jax_version), ("jaxlib", jaxlib_version)):
        found = release(version)
        if not found or found < JAX_MIN or found[:2] >= JAX_BELOW:
            problems.append(f"{name} {version}")
    if problems:
        raise UnsupportedJaxError(
            f"meshjit supports jax and jaxlib {JAX_RANGE} (0.10.2 up to the last "
            f"0.12 release); this environment has {' and '.join(problems)}. "
            f"Install a supported pair, e.g. `pip install 'jax{JAX_RANGE}' "
            f"'jaxlib{JAX_RANGE}'`."
        )
    if release(jax_version)[:3] != release(jaxlib_version)[:3]:
        raise UnsupportedJaxError(
            f"meshjit needs jax and jaxlib of the same release; this environment "
            f"has jax {jax_version} and jaxlib {jaxlib_version}. Install matching "
            f"versions (both {JAX_RANGE})."
        )


check_versions(jax.__version__, jaxlib.version.__version__)

# ruff: noqa: E402 (the private imports come after the version check)
import jax.extend.backend  # imported here, not lazily: threads raced on it
from jax._src import mesh as _jax_mesh
from jax._src.interpreters import mlir as _jax_mlir
from jaxlib.mlir import ir

JAX_VERSION = release(jax.__version__)


def make_ir_context() -> ir.Context:
    """A fresh MLIR context with every dialect JAX emits (stablehlo, chlo, sdy, ...)."""
    ctx: ir.Context = _jax_mlir.make_ir_context()
    return ctx


def backend() -> Any:
    """The default PJRT client, as jax.extend exposes it."""
    return jax.extend.backend.get_backend()


# --- arrays ------------------------------------------------------------------------


def weakly_typed(x: Any) -> Any:
    """`x` over the same buffers with a weak type, as jax.jit returns a
    result whose type is weak (no public constructor sets it)."""
    from jax._src import array

    if x.aval.weak_type:
        return x
    aval = x.aval.update(weak_type=True)
    return array.ArrayImpl(aval, x.sharding, x._arrays, committed=x._committed)


def single_device_array(piece: Any, sharding: Any, committed: bool) -> Any:
    """A jax.Array of one device's buffer, committed to it or not (jax's own
    outputs are uncommitted when nothing chose their device; no public
    constructor makes such an array)."""
    from jax._src import array

    return array.ArrayImpl(piece.aval, sharding, [piece], committed=committed)


# --- jax's deprecated `with mesh:` context ----------------------------------------


def legacy_context_mesh() -> Any:
    """The `jax.sharding.Mesh` entered with jax's deprecated `with mesh:` on
    this thread, or None (read on every call: kept cheap)."""
    found = _jax_mesh.thread_resources.env.physical_mesh
    return None if found.empty else found


def set_mesh_context() -> Any:
    """The `jax.sharding.Mesh` of `jax.set_mesh`, or None; unlike the public
    `jax.sharding.get_mesh` it also answers while a function is traced."""
    found = _jax_mesh.get_concrete_mesh()
    return None if found is None or found.empty else found


def abstract_mesh_context() -> Any:
    """The `jax.sharding.AbstractMesh` of `jax.sharding.use_abstract_mesh`
    (or of `jax.set_mesh`), or None when empty."""
    found = _jax_mesh.get_abstract_mesh()
    return None if found is None or found.empty else found


# --- jax.distributed's key-value store ----------------------------------------------


def distributed_client() -> Any:
    """The `jax.distributed` client (its key-value store), or an error if
    `jax.distributed.initialize()` did not run."""
    from jax._src import distributed

    client = distributed.global_state.client
    if client is None:
        from meshjit.errors import ShardingError

        raise ShardingError(
            "the mesh spans devices of several processes but jax.distributed is "
            "not initialized in this one: call meshjit.distributed.initialize() "
            "first"
        )
    return client


# --- jax's internal "unspecified" sharding marker -----------------------------------


def is_jax_unspecified(obj: object) -> bool:
    """Whether `obj` is jax's internal `UNSPECIFIED` in/out_shardings leaf
    (`jax._src.sharding_impls.UNSPECIFIED`, what jax's own jit defaults to)."""
    from jax._src.sharding_impls import UnspecifiedValue  # type: ignore[attr-defined]

    return isinstance(obj, UnspecifiedValue)


# --- jax's internal GSPMDSharding (gone from jax.sharding since 0.4.3x) ----------


def is_jax_gspmd_sharding(obj: object) -> bool:
    """Whether `obj` is jax's internal `GSPMDSharding`."""
    from jax._src.sharding_impls import GSPMDSharding

    return isinstance(obj, GSPMDSharding)


def jax_gspmd_sharding_parts(obj: Any) -> tuple[tuple[Any, ...], str, str | None]:
    """(device assignment, HLO sharding text, memory kind) of a jax GSPMDSharding."""
    devices = tuple(obj._device_assignment)
    return devices, str(obj._hlo_sharding), obj.memory_kind


def make_jax_gspmd_sharding(
    devices: tuple[Any, ...], hlo_text: str, memory_kind: str | None
) -> Any:
    """jax's internal `GSPMDSharding` from devices and XLA's sharding text."""
    from jax._src.sharding_impls import GSPMDSharding
    from jaxlib import xla_client

    hlo = xla_client.HloSharding.from_string(hlo_text)
    return GSPMDSharding(devices, hlo, memory_kind=memory_kind)


# jax sets these compiler options on the build options, not as env overrides.
_BUILD_OPTION_NAMES = (
    "exec_time_optimization_effort",
    "memory_fitting_effort",
    "optimization_level",
    "memory_fitting_level",
)


# --- compiling and running per-device (already partitioned) programs ---------


def tuple_all_to_all(devices: Sequence[Any]) -> bool:
    """Whether the module compiled for `devices` should carry its all-to-alls
    in XLA's tuple form (`compiler/tuple_all_to_all.py`): XLA's CPU compiler
    cuts every array all-to-all into one constant slice per group member
    (`AllToAllDecomposer`), each its own LLVM kernel. CPU devices only: on
    GPUs the offsets' loop costs a host round trip per step and nothing was
    measured. Written as a variadic `stablehlo.all_to_all`, which jaxlib
    translates to HLO's tuple all-to-all (MHLO's convention, not the
    StableHLO spec's: operand i goes to the group's i-th member; checked on
    jaxlib 0.10.2, and by `test_tuple_all_to_all.py` numerically wherever
    the suite runs)."""
    return bool(devices) and all(d.platform == "cpu" for d in devices)


def _spmd_options(
    devices: tuple[Any, ...],
    compiler_options: Mapping[str, Any] | None,
    replicas: bool = False,
) -> Any:
    import numpy as np
    from jaxlib import xla_client as xc

    options = xc.CompileOptions()
    build = options.executable_build_options
    n = len(devices)
    if replicas:  # device i is replica i: no SPMD partitioner, no Shardy
        build.num_replicas, build.num_partitions = n, 1
        build.use_spmd_partitioning = False
        ids = np.array([d.id for d in devices]).reshape(n, 1)
    else:
        build.num_replicas, build.num_partitions = 1, n
        build.use_spmd_partitioning = True
        build.use_shardy_partitioner = True
        ids = np.array([d.id for d in devices]).reshape(1, n)
    build.device_assignment = xc.DeviceAssignment.create(ids)
    overrides = dict(compiler_options or {})
    for name in _BUILD_OPTION_NAMES:
        if name in overrides:
            setattr(build, name, overrides.pop(name))
    options.env_option_overrides = list(overrides.items())
    return options


def compile_spmd(
    program: Any,
    devices: tuple[Any, ...],
    compiler_options: Mapping[str, Any] | None = None,
    host_callbacks: tuple[Any, ...] = (),
    replicas: bool = False,
) -> Any:
    """Compiles a per-device module (text or a parsed `ir.Module`) for
    `devices`; returns PJRT's loaded executable. Device i runs partition i of
    an SPMD module (body = sdy.manual_computation over all axes: XLA's SPMD
    partitioner sees only manual code and adds no collectives), or with
    `replicas` replica i of the module's replica form (`compiler/replicas.py`).
    `compiler_options` are XLA options (e.g.
    `{"xla_cpu_enable_fast_math": True}`), set as jax does: build-option names
    on the build options, the rest as environment option overrides; XLA checks
    names and values and raises `JaxRuntimeError` for a bad one.
    """
    from jaxlib import xla_client as xc

    options = _spmd_options(devices, compiler_options, replicas)
    if host_callbacks or not isinstance(program, str):
        # the overload that takes callbacks (by their index in this list)
        # takes a parsed module
        if isinstance(program, str):
            from meshjit.compiler.ir import make_context, parse_module

            program = parse_module(program, make_context())
        return backend().compile_and_load(
            program,
            executable_devices=xc.DeviceList(devices),
            compile_options=options,
            host_callbacks=list(host_callbacks),
        )
    return backend().compile_and_load(program, xc.DeviceList(devices), options)


# --- effects: host callbacks and the tokens that order them -----------------------


@dataclass(frozen=True, slots=True)
class Effects:
    """What jax's lowering says a program's side effects need at compile and
    run time: its ordered effects (each one a token argument and result at
    the front of @main, threaded between calls as jax threads them), its
    host callbacks (a callback custom call names one by its index in this
    list) and what must stay alive while it runs."""

    ordered: tuple[Any, ...]
    host_callbacks: tuple[Any, ...]
    keepalive: Any


def lowering_effects(lowered: Any) -> Effects | None:
    """The effects of a jax `Lowered`, or None for a program without any."""
    args = lowered._lowering.compile_args
    ordered = tuple(args.get("ordered_effects") or ())
    unordered = bool(args.get("unordered_effects"))
    callbacks = tuple(args.get("host_callbacks") or ())
    if not (ordered or unordered or callbacks):
        return None
    return Effects(ordered, callbacks, args.get("keepalive"))


def mutable_arrays(lowered: Any) -> tuple[tuple[Any, ...], tuple[int | None, ...]]:
    """The mutable arrays (`jax.new_ref`) the function closes over, which
    jax's lowering passes as @main's last arguments, and for each @main
    result None or the index, among the kept arguments and then those
    arrays, of the argument whose array takes the result's value."""
    mut = lowered._lowering.compile_args.get("mut")
    if mut is None:
        return (), ()
    return tuple(mut.in_mut), tuple(mut.out_mut)


def ref_value(ref: Any) -> Any:
    """The jax.Array a mutable array holds now."""
    return ref._refs._buf


def set_ref_value(ref: Any, value: Any) -> None:
    """Makes a mutable array hold `value` (as jax writes its results back).
    The array keeps its sharding: jax 0.11 refuses a buffer of another
    sharding object, so an equivalent layout (a one-device mesh for a
    single-device array) is rewrapped first."""
    buf = ref._refs._buf
    if value.sharding != buf.sharding:
        value = jax.device_put(value, buf.sharding)
    buf._replace_with(value)


def token_of(pieces: list[Any]) -> Any:
    """A `jax.core.Token` over a token result's per-device buffers."""
    from jax._src import core

    if len(pieces) == 1:
        return core.Token(pieces[0])
    devices = [next(iter(p.sharding.device_set)) for p in pieces]
    import numpy as np

    sharding = jax.sharding.NamedSharding(
        jax.sharding.Mesh(np.array(devices), ("x",)), jax.P("x")
    )
    return core.Token(jax.make_array_from_single_device_arrays((0,), sharding, pieces))


def is_token(x: object) -> bool:
    from jax._src import core

    return isinstance(x, core.Token)


def abstract_token() -> Any:
    from jax._src import core

    return core.abstract_token


def run_with_effects(
    executable: Any, devices: tuple[Any, ...], args: list[Any], effects: Effects
) -> list[list[Any]]:
    """Runs a program with effects as jax does: the current token of each
    ordered effect in front of the arguments, the runtime tokens kept (so
    `jax.effects_barrier()` waits for its callbacks) and each ordered
    effect's token result made current. Returns the per-device pieces of the
    other results."""
    from jax._src import dispatch

    tokens = [
        dispatch.runtime_tokens.get_token_input(eff, list(devices))._buf
        for eff in effects.ordered
    ]
    results = executable.execute_sharded([*tokens, *args], with_tokens=True)
    n = len(effects.ordered)
    token_pieces = results.consume_with_handlers([_pieces] * n, strict=False)
    runtime = results.consume_token()
    for i, device in enumerate(devices):
        dispatch.runtime_tokens.set_output_runtime_token(device, runtime.get_token(i))
    for eff, pieces in zip(effects.ordered, token_pieces, strict=True):
        dispatch.runtime_tokens.set_token_result(eff, token_of(list(pieces)))
    rest: list[list[Any]] = results.disassemble_into_single_device_arrays()
    return rest


def _pieces(xs: Any) -> Any:
    return xs


def serialize_executable(executable: Any) -> bytes:
    """PJRT's serialized form of a loaded executable (what jax's persistent
    compilation cache stores)."""
    return bytes(executable.serialize())


def deserialize_spmd(
    data: bytes,
    devices: tuple[Any, ...],
    compiler_options: Mapping[str, Any] | None = None,
    replicas: bool = False,
) -> Any:
    """A loaded executable from `serialize_executable`'s bytes, for the same
    devices and options `compile_spmd` was given."""
    from jaxlib import xla_client as xc

    options = _spmd_options(devices, compiler_options, replicas)
    return backend().deserialize_executable(data, xc.DeviceList(devices), options)


def jaxlib_version() -> str:
    import jaxlib.version

    return str(jaxlib.version.__version__)


def platform_version() -> str:
    """The PJRT plugin's version string (part of what an executable depends on)."""
    return str(backend().platform_version)


# --- what jax's lowering kept ---------------------------------------------------


def kept_argument_indices(lowered: Any) -> frozenset[int]:
    """Indices of the flat arguments jax kept as @main arguments (keep_unused)."""
    return frozenset(lowered._lowering.compile_args["kept_var_idx"])


# --- jax's C++ dispatch (the per-call fast path) ---------------------------------

_DISPATCH_CAPACITY = 4096


def _array_type() -> type:
    from jaxlib import xla_client as xc

    return xc.ArrayImpl  # type: ignore[no-any-return]


ARRAY_TYPE: Any = _array_type()  # jax.Array's concrete class (not tracers)
_dispatch_cache: list[Any] = []


def cpp_dispatcher(
    name: str,
    cache_miss: Any,
    static_argnums: tuple[int, ...],
    static_argnames: tuple[str, ...],
) -> Any:
    """jax's C++ `PjitFunction` in front of `cache_miss`.

    A call whose argument signature (pytree, static values and their types,
    shapes, dtypes, weak types, committed shardings, jax's jit-keyed configs)
    was seen before runs the cached executable in C++; any other call goes to
    `cache_miss(*args, **kwargs)`, which returns `(outputs, fastpath_data or
    None, False)`. With no function given the dispatcher keeps its own cache
    (it dies with the dispatcher) and refuses `jax.disable_jit()` with a
    ValueError, which the caller handles.
    """
    from jax._src import tree_util
    from jax._src.interpreters import pxla
    from jax._src.lib import _jax  # type: ignore[attr-defined]

    if not _dispatch_cache:
        _dispatch_cache.append(_jax.PjitFunctionCache(capacity=_DISPATCH_CAPACITY))
    return _jax.pjit(
        name,
        None,
        cache_miss,
        list(static_argnums),
        list(static_argnames),
        (),  # the cache key: unused without a function
        tree_util.dispatch_registry,
        pxla.cc_shard_arg,
        _dispatch_cache[0],
    )


def fastpath_data(
    loaded_executable: Any,
    out_tree: Any,
    out_flat: list[Any],
    kept: list[bool],
    in_shardings: list[Any],
) -> Any | None:
    """What jax's C++ dispatch needs to run `loaded_executable` again without
    Python: the kept-argument mask over the flat dynamic arguments, the target
    sharding of each kept argument (others are `device_put` there), and the
    outputs' avals, shardings and pytree as this call produced them. None when
    an output is not a plain jax array (the call then stays on the Python path).
    """
    from jax._src.interpreters import pxla
    from jaxlib import xla_client as xc

    flat, tree = pxla.reflatten_outputs_for_dispatch(out_tree, out_flat)
    if not all(type(x) is xc.ArrayImpl for x in flat) or len(flat) != len(out_flat):
        return None
    return pxla.MeshExecutableFastpathData(
        loaded_executable,
        tree,
        list(in_shardings),
        # as jax: the outputs' own shardings (a typed key array's, not its
        # key data's), which later calls' outputs carry
        [x.sharding for x in out_flat],
        [x.aval for x in flat],
        [x._committed for x in flat],
        list(kept),
        [None] * len(in_shardings),
        [],
    )


# --- jax's tracing configuration ---------------------------------------------------


def leaked_tracer_error(traced: Any) -> Exception | None:
    """jax's UnexpectedTracerError for a tracer of another (finished) trace
    that a traced function closed over (a side effect of an earlier trace
    leaked it), as jax.jit raises at the call; None when there is none."""
    from jax._src import core

    hoisted = getattr(traced, "_consts", None) or ()  # jax's hoisted constants
    for c in (*hoisted, *traced.jaxpr.consts):
        if isinstance(c, core.Tracer):
            make = getattr(core, "escaped_tracer_error", None)
            if make is None:
                return jax.errors.UnexpectedTracerError(
                    "Encountered an unexpected tracer (a side effect of an "
                    f"earlier trace leaked it): {c}; it was created on a line "
                    "of that trace"
                )
            return make(c)  # type: ignore[no-any-return]
    return None


INSPECT_PREFIX = "meshjit.inspect:"  # + id(callback), as its backend_config


class _Inspecting(threading.local):
    active: bool = False


_INSPECTING = _Inspecting()
_INSPECT_RULE: list[Any] = []  # jax's own lowering rule, once replaced
_INSPECT_LOCK = threading.Lock()


@contextmanager
def lowering_inspections() -> Iterator[None]:
    """While jax lowers a program in this block (this thread),
    `jax.debug.inspect_array_sharding` lowers to a custom call
    @InspectSharding whose backend_config names its callback (by `id`, see
    `inspect_callbacks`), not to jax's encoded pointer to a callback that
    XLA's partitioner calls (meshjit partitions in its place, and calls it
    with the sharding its propagation chose); jax's one-device shortcut
    (the callback called at once) is not taken. Elsewhere jax's rule
    lowers it as before."""
    from jax._src import debugging
    from jax._src.lib.mlir.dialects import hlo  # type: ignore[attr-defined]

    with _INSPECT_LOCK:
        if not _INSPECT_RULE:
            _INSPECT_RULE.append(_replace_inspect_rule(debugging, hlo))
    saved = _INSPECTING.active
    _INSPECTING.active = True
    try:
        yield
    finally:
        _INSPECTING.active = saved


def _replace_inspect_rule(debugging: Any, hlo: Any) -> Any:
    """Registers `lowering_inspections`' rule for jax's inspect_sharding_p;
    returns jax's."""
    found = _jax_mlir._lowerings[debugging.inspect_sharding_p].rule

    def rule(ctx: Any, value: Any, *, callback: Any) -> Any:
        if not _INSPECTING.active:
            return found(ctx, value, callback=callback)
        hlo.CustomCallOp(
            [value.type],
            [value],
            call_target_name=ir.StringAttr.get(INSPECT_SHARDING),
            has_side_effect=ir.BoolAttr.get(True),
            backend_config=ir.StringAttr.get(f"{INSPECT_PREFIX}{id(callback)}"),
        )
        return []

    _jax_mlir.register_lowering(debugging.inspect_sharding_p, rule)
    return found


def inspect_callbacks(traced: Any) -> dict[int, Any]:
    """The callbacks of the jax.debug.inspect_array_sharding calls in a jax
    `Traced`'s program, by `id` (looked for only where the program has jax's
    debug effect); holding them keeps the ids the module names valid."""
    from jax._src import core, debugging

    closed = traced.jaxpr
    found: dict[int, Any] = {}
    if debugging.debug_effect not in closed.effects:
        return found
    stack = [closed.jaxpr]
    while stack:
        jaxpr = stack.pop()
        for eqn in jaxpr.eqns:
            if eqn.primitive is debugging.inspect_sharding_p:
                callback = eqn.params["callback"]
                found[id(callback)] = callback
            stack.extend(core.jaxprs_in_params(eqn.params))
    return found


def on_clear_caches(cache: Any, what: str) -> None:
    """Has `jax.clear_caches()` call `cache.cache_clear()` too (`cache` also
    has `cache_info()` and `cache_keys()`; jax holds it weakly)."""
    from jax._src import util

    register = getattr(util, "register_cache", None)
    if register is not None:  # (a jax without it clears only its own)
        register(cache, what)


def trace_context() -> Any:
    """jax's configuration that changes what a function traces to (matmul
    precision, rank promotion, user contexts, mesh contexts, ...): a hashable
    value, part of jax's own trace cache key."""
    from jax._src import config

    found = getattr(config, "trace_context", None)
    return found() if found is not None else None


def trace_context_changes(old: Any, new: Any) -> list[str]:
    """The names of the settings that differ between two `trace_context()`s."""
    from jax._src import config

    try:
        names = config.trace_context_names()
    except (NotImplementedError, AttributeError):
        return []
    if len(names) != len(old) or len(old) != len(new):
        return []
    return [n for n, a, b in zip(names, old, new, strict=True) if a != b]


# --- memory layouts ----------------------------------------------------------------


def buffer_layout(x: Any) -> Any:
    """The per-device memory layout (PJRT's) of a jax.Array's buffers."""
    return x._pjrt_layout


def default_layout(x: Any) -> Any:
    """The layout PJRT gives a buffer of `x`'s per-device shape by default."""
    device = x.addressable_shards[0].device  # (one of this process's)
    shard = x.sharding.shard_shape(x.shape)
    return device.client.get_default_layout(x.dtype, shard, device)


_FORMAT: list[type] = []  # jax's Format class, imported at the first use


def is_format(x: object) -> bool:
    """Whether `x` is a `jax.experimental.layout.Format` (a layout and a
    sharding, what jit's in/out_shardings also take)."""
    if not _FORMAT:
        from jax.experimental.layout import Format

        _FORMAT.append(Format)
    return isinstance(x, _FORMAT[0])


def is_layout(x: object) -> bool:
    """Whether `x` is a memory layout alone (a `Layout`, or `Layout.AUTO`)."""
    from jax.experimental.layout import Layout

    return isinstance(x, Layout) or is_auto_layout(x)


def is_auto_layout(layout: object) -> bool:
    """Whether `layout` is `Layout.AUTO` (the compiler chooses)."""
    from jax.experimental.layout import Layout

    return layout is Layout.AUTO


def layout_mode(layout: Any, dtype: Any) -> str | None:
    """`layout` (None, Layout.AUTO or a Layout) as the `mhlo.layout_mode`
    of an argument or result of @main, as jax's lowering writes it ("auto",
    or XLA's minor-to-major text such as "{0,1}"); None: the default."""
    if layout is None:
        return None
    if is_auto_layout(layout):
        return "auto"
    return str(layout._to_xla_layout(dtype))


def make_format(layout: Any, sharding: Any) -> Any:
    """jax's `Format(layout, sharding)`."""
    from jax.experimental.layout import Format

    return Format(layout, sharding)


def jax_layout(layout: Any) -> Any:
    """A PJRT layout (an executable's parameter or output layout) as jax's
    `Layout`."""
    from jax.experimental.layout import Layout

    return Layout.from_pjrt_layout(layout)


def relayout(x: Any, layout: Any) -> Any:
    """`x` copied into `layout` (a PJRT layout: what an executable takes an
    argument in), its sharding kept."""
    from jax.experimental.layout import Format, Layout

    return jax.device_put(x, Format(Layout.from_pjrt_layout(layout), x.sharding))


# --- typed PRNG keys ---------------------------------------------------------------


def physical_sharding(shape: tuple[int, ...], dtype: Any, sharding: Any) -> Any:
    """The sharding of a typed key array's key data (its trailing dims
    whole), as jax's C++ dispatch compares argument buffers with."""
    from jax._src import core, sharding_impls

    return sharding_impls.physical_sharding(core.ShapedArray(shape, dtype), sharding)


def wrap_key_data(data: Any, dtype: Any) -> Any:
    """A typed key array of `dtype` (`key<fry>`, ...) over its key data, as
    the executable returned it (no computation)."""
    import jax

    return jax.random.wrap_key_data(data, impl=dtype._impl)


# --- HLO of a StableHLO module (Lowered.as_text(dialect="hlo"), compiler_ir) ---


def xla_computation(text: str) -> Any:
    """XLA's HLO computation of a StableHLO module (as jax's `Lowered.hlo()`)."""
    from jaxlib import xla_client as xc

    mlir = xc._xla.mlir  # type: ignore[attr-defined]
    return mlir.mlir_module_to_xla_computation(text, use_tuple_args=False)


def static_module(lowered: Any) -> Any:
    """jax's module of a jax `Lowered`, its shapes refined where it uses
    dimension variables on static arguments (a function exported with
    symbolic shapes called inside: `tensor<?x4xf32>` values), as jax refines
    it before compiling; a module with symbolic arguments (being exported)
    stays as it is."""
    module = lowered.compiler_ir("stablehlo")
    lowering = getattr(lowered, "_lowering", None)
    state = getattr(lowering, "compile_args", {}).get("shape_poly_state")
    if state is None or not state.uses_dim_vars:
        return module
    avals = lowered_in_avals(lowered) or []
    if all(type(d) is int for a in avals for d in getattr(a, "shape", ())):
        module = _jax_mlir.refine_polymorphic_shapes(module)
    return module


def lowered_in_avals(lowered: Any) -> list[Any] | None:
    """The flat argument avals a jax `Lowered` was lowered for; None where
    jax cannot give them (its pytree of them fails with closed-over
    mutable arrays)."""
    try:
        return jax.tree_util.tree_leaves(lowered.in_avals)
    except ValueError:
        return None


def hlo_text(text: str, debug_info: bool) -> str:
    """XLA's HLO text of a StableHLO module as jax's `Lowered.as_text("hlo")`
    prints it: short and parsable, with each op's metadata (source file and
    line, from the module's locations) only for `debug_info`."""
    from jax._src.lib import hlo  # type: ignore[attr-defined]

    options = hlo.HloPrintOptions.short_parsable()
    options.print_metadata = debug_info
    return str(xla_computation(text).as_hlo_module().to_string(options))


def hlo_cost_analysis(computation: Any) -> dict[str, float]:
    """XLA's cost estimate of an unoptimized HLO computation (as jax's
    `Lowered.cost_analysis()`)."""
    from jax._src.lib import _jax  # type: ignore[attr-defined]

    found = _jax.hlo_module_cost_analysis(backend(), computation.as_hlo_module())
    return dict(found)


def tracing() -> bool:
    """Whether a jax trace is being built on this thread (a function called
    inside another jitted one, even with no traced arguments)."""
    from jax._src import core

    return not core.trace_state_clean()


def inside_jit_trace(tree: Any) -> bool:
    """Whether a leaf of `tree` is a value of a jit trace being built (jax's
    DynamicJaxprTracer): the function is called inside another jitted one."""
    import jax
    from jax._src.interpreters import partial_eval as pe

    return any(
        isinstance(x, pe.DynamicJaxprTracer) for x in jax.tree_util.tree_leaves(tree)
    )


# --- jax's own exception classes (meshjit's errors subclass them) ------------


def _jax_indivisible() -> type:
    from jax._src.sharding import IndivisibleError

    return IndivisibleError


def _jax_duplicate_spec() -> type:
    from jax._src.named_sharding import DuplicateSpecError

    return DuplicateSpecError


class IndivisibleShardingError(IndivisibleDimError, _jax_indivisible()):  # type: ignore[misc]
    """A dim its mesh axes do not divide: meshjit's error, and jax's
    IndivisibleError for code that catches that."""


class DuplicateAxisShardingError(DuplicateAxisError, _jax_duplicate_spec()):  # type: ignore[misc]
    """A mesh axis on two dims of one spec: meshjit's error, and jax's
    DuplicateSpecError for code that catches that (its `message`, `mesh` and
    `pspec` attributes too)."""

    def __init__(self, message: str, mesh: Any = None, pspec: Any = None) -> None:
        Exception.__init__(self, message)
        self.message = message
        self.mesh = mesh
        self.pspec = pspec

    def __str__(self) -> str:
        return self.message
