"""A call to a jitted function in normal form, and shardings as pytree prefixes.

`ArgSpec` is what `jit(...)` resolved once: static and donated arguments by
position and by name (each inferred from the other through the signature, as
JAX does). `bind_call` splits one call into static values (part of the cache
key) and dynamic arguments, each named by its parameter (`x`, `params`,
`args[2]`), so every later message can name what the user wrote.
`broadcast_prefix` matches a sharding prefix tree against a value tree and
reports a mismatch with its key path.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
from jax.tree_util import PyTreeDef

from meshjit.compiler import bridge
from meshjit.errors import JitArgumentError, ShardingError
from meshjit.frontend.sharding import AUTO, PartitionSpec, Sharding


class _Unspecified:
    """No sharding given: jit infers it (inputs) or propagates it (outputs)."""

    _instance: _Unspecified | None = None

    def __new__(cls) -> _Unspecified:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSPECIFIED"


UNSPECIFIED = _Unspecified()


def is_spec_leaf(x: object) -> bool:
    """A leaf of an in/out_shardings tree: a Sharding, a PartitionSpec, AUTO,
    None, or a `Format` (a memory layout and a sharding)."""
    return (
        x is None
        or isinstance(
            x,
            Sharding
            | PartitionSpec
            | AUTO
            | jax.sharding.Sharding
            | jax.sharding.PartitionSpec
            | _Unspecified,
        )
        or bridge.is_format(x)
    )


def split_format(leaf: object) -> tuple[object, Any]:
    """An in/out_shardings leaf as (its sharding, its memory layout): a
    `Format`'s parts (no sharding: unspecified), any other leaf with no
    layout."""
    if bridge.is_format(leaf):
        sharding = leaf.sharding  # type: ignore[attr-defined]
        layout = leaf.layout  # type: ignore[attr-defined]
        return (UNSPECIFIED if sharding is None else sharding), layout
    return leaf, None


# ----------------------------------------------------------------------------
# static and donated arguments


def _ints(value: int | Iterable[int] | None) -> tuple[int, ...]:
    if value is None:
        return ()
    if isinstance(value, int):
        return (value,)
    return tuple(value)


def _names(value: str | Iterable[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(value)


@dataclass(frozen=True, slots=True)
class ArgSpec:
    """Static and donated arguments of a jitted function, by position and name."""

    api: str  # "jit" or "pjit": the name used in messages
    signature: inspect.Signature | None
    static_argnums: tuple[int, ...]
    static_argnames: tuple[str, ...]
    donate_argnums: tuple[int, ...]
    donate_argnames: tuple[str, ...]

    def static_position(self, i: int, n_pos: int) -> bool:
        return any(i == (s if s >= 0 else n_pos + s) for s in self.static_argnums)

    def donated_position(self, i: int, n_pos: int) -> bool:
        return any(i == (s if s >= 0 else n_pos + s) for s in self.donate_argnums)


def _signature(fun: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(fun)
    except (TypeError, ValueError):
        return None


def _positional_params(sig: inspect.Signature) -> list[inspect.Parameter]:
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [p for p in sig.parameters.values() if p.kind in kinds]


def _infer(
    sig: inspect.Signature | None,
    nums: tuple[int, ...],
    names: tuple[str, ...],
    nums_given: bool,
    names_given: bool,
) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Fills in argnames from argnums or the reverse, through the signature."""
    if sig is None:
        return nums, names
    positional = _positional_params(sig)
    if nums_given and not names_given:
        by_pos = [
            p.name
            for i, p in enumerate(positional)
            if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
            and (i in nums or i - len(positional) in nums)
        ]
        return nums, tuple(by_pos)
    if names_given and not nums_given:
        index = {p.name: i for i, p in enumerate(positional)}
        return tuple(index[n] for n in names if n in index), names
    return nums, names


def resolve_argspec(
    fun: Callable[..., Any],
    api: str,
    static_argnums: int | Iterable[int] | None,
    static_argnames: str | Iterable[str] | None,
    donate_argnums: int | Iterable[int] | None,
    donate_argnames: str | Iterable[str] | None,
) -> ArgSpec:
    """Checks and completes the static/donate arguments of `jit(...)`."""
    sig = _signature(fun)
    if sig is None and donate_argnames is not None:
        raise ShardingError(
            f"{api}: Getting the signature of function {fun!r} failed. Pass "
            "donate_argnums instead of donate_argnames (names are matched to "
            "arguments through the signature)"
        )
    s_nums, s_names = _infer(
        sig,
        _ints(static_argnums),
        _names(static_argnames),
        static_argnums is not None,
        static_argnames is not None,
    )
    d_nums, d_names = _infer(
        sig,
        _ints(donate_argnums),
        _names(donate_argnames),
        donate_argnums is not None,
        donate_argnames is not None,
    )
    if sig is not None:
        _check_range(sig, api, "static_argnums", s_nums)
        _check_range(sig, api, "donate_argnums", d_nums)
        _check_names(sig, api, "static_argnames", s_names)
        _check_names(sig, api, "donate_argnames", d_names)
    both = sorted(set(s_names) & set(d_names))
    if both or set(s_nums) & set(d_nums):
        shown: list[object] = [*both] or [*sorted(set(s_nums) & set(d_nums))]
        kind = "argnames" if both else "argnums"
        raise ShardingError(
            f"{api}: static_{kind} and donate_{kind} cannot intersect; {shown} "
            "appear in both. A static argument is a compile-time constant and "
            "has no buffer to donate: remove it from one of the two"
        )
    return ArgSpec(api, sig, s_nums, s_names, d_nums, d_names)


def _check_range(
    sig: inspect.Signature, api: str, what: str, nums: tuple[int, ...]
) -> None:
    params = sig.parameters.values()
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return
    n = len(_positional_params(sig))
    bad = [i for i in nums if not -n <= i < n]
    if bad:
        raise ShardingError(
            f"{api}: {what}={nums} but the function only accepts {n} positional "
            f"arguments; {bad} is out of range"
        )


def _check_names(
    sig: inspect.Signature, api: str, what: str, names: tuple[str, ...]
) -> None:
    params = sig.parameters
    # never passed by that name: positional-only parameters and *args (a
    # keyword named as **kwargs is, into **kwargs)
    unnamed = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.VAR_POSITIONAL)
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    bad = sorted(
        n
        for n in names
        if (n not in params and not takes_any)
        or (n in params and params[n].kind in unnamed)
    )
    if bad:
        raise ShardingError(
            f"{api}: {what} names {bad}, which the function does not take by name; "
            f"its parameters are {list(params)}"
        )


# ----------------------------------------------------------------------------
# one call in normal form


@dataclass(frozen=True, slots=True)
class Entry:
    """One dynamic argument as the user passed it."""

    name: str  # the parameter name ("x"), "args[3]" for *args, the key for **kw
    position: int | None  # index among positional args, None when by keyword
    keyword: str | None
    donated: bool


@dataclass(frozen=True, slots=True)
class StaticValue:
    """A static argument; equal values of different types are different keys."""

    name: str
    value: Hashable
    kind: type  # 2 and 2.0 are equal and hash equal; their types are not

    def key(self) -> tuple[str, type, Hashable]:
        return (self.name, self.kind, self.value)


@dataclass(frozen=True, slots=True)
class CallForm:
    """The shape of a call: hashable, part of every cache key."""

    n_pos: int
    static_pos: tuple[tuple[int, StaticValue], ...]
    static_kw: tuple[tuple[str, StaticValue], ...]
    entries: tuple[Entry, ...]

    def static_key(self) -> tuple[object, ...]:
        return tuple(s.key() for _, s in self.static_pos) + tuple(
            s.key() for _, s in self.static_kw
        )

    def rebuild(self, dynamic: Sequence[object]) -> tuple[list[object], dict[str, Any]]:
        """The user's (args, kwargs) from the dynamic values and the static ones."""
        pos: list[object] = [None] * self.n_pos
        kw: dict[str, Any] = {}
        for i, s in self.static_pos:
            pos[i] = s.value
        for k, s in self.static_kw:
            kw[k] = s.value
        for entry, value in zip(self.entries, dynamic, strict=True):
            if entry.keyword is None:
                assert entry.position is not None
                pos[entry.position] = value
            else:
                kw[entry.keyword] = value
        return pos, kw


def _param_name(sig: inspect.Signature | None, i: int) -> str:
    if sig is None:
        return f"args[{i}]"
    positional = _positional_params(sig)
    if i < len(positional):
        return positional[i].name
    var = [
        p for p in sig.parameters.values() if p.kind is inspect.Parameter.VAR_POSITIONAL
    ]
    if var:
        return f"{var[0].name}[{i - len(positional)}]"
    return f"args[{i}]"


def _static(name: str, value: Any, api: str) -> StaticValue:
    try:
        hash(value)
    except TypeError as err:
        raise JitArgumentError(
            f"{api}: Non-hashable static arguments are not supported: static "
            f"argument `{name}` must be hashable, found "
            f"{type(value).__name__} {value!r} ({err}); pass a hashable value "
            "(e.g. a tuple instead of a list) or make the argument dynamic"
        ) from None
    try:
        value == value  # noqa: B015 (a cache lookup compares keys)
    except Exception as err:
        raise JitArgumentError(
            f"{api}: static arguments should be comparable using __eq__: "
            f"static argument `{name}` ({type(value).__name__}) raised "
            f"{type(err).__name__}: {err} when compared; give it an __eq__ "
            "that returns a bool"
        ) from None
    return StaticValue(name, value, type(value))


def bind_call(
    spec: ArgSpec, args: Sequence[object], kwargs: dict[str, object]
) -> tuple[CallForm, tuple[object, ...]]:
    """(the call's form, its dynamic values in signature order)."""
    sig = spec.signature
    if sig is not None:
        try:
            sig.bind(*args, **kwargs)
        except TypeError as err:
            raise TypeError(str(err)) from None
    n_pos = len(args)
    static_pos: list[tuple[int, StaticValue]] = []
    dyn: list[tuple[int, Entry, object]] = []
    order = _signature_order(sig)
    for i, value in enumerate(args):
        name = _param_name(sig, i)
        # By position only static_argnums (and donate_argnums) count, as in
        # jax: they are inferred from the names unless given too, and where
        # both are given they may disagree (jax respects both choices).
        if spec.static_position(i, n_pos):
            static_pos.append((i, _static(name, value, spec.api)))
            continue
        donated = spec.donated_position(i, n_pos)
        dyn.append((i, Entry(name, i, None, donated), value))
    static_kw: list[tuple[str, StaticValue]] = []
    for k, value in kwargs.items():
        if k in spec.static_argnames:
            static_kw.append((k, _static(k, value, spec.api)))
            continue
        rank = order.get(k, len(order) + len(dyn))
        dyn.append((rank, Entry(k, None, k, k in spec.donate_argnames), value))
    dyn.sort(key=lambda t: t[0])
    form = CallForm(
        n_pos,
        tuple(static_pos),
        tuple(sorted(static_kw, key=lambda t: t[0])),
        tuple(e for _, e, _ in dyn),
    )
    return form, tuple(v for _, _, v in dyn)


def _signature_order(sig: inspect.Signature | None) -> dict[str, int]:
    """Keyword parameters' ranks, after every positional argument slot."""
    if sig is None:
        return {}
    return {name: i for i, name in enumerate(sig.parameters)}


# ----------------------------------------------------------------------------
# pytree prefixes


def _one_level(obj: object) -> tuple[PyTreeDef, list[tuple[str, object]]]:
    flat, tdef = jax.tree_util.tree_flatten_with_path(
        obj, is_leaf=lambda n: n is not obj
    )
    return tdef, [(jax.tree_util.keystr(p), c) for p, c in flat]


def _kind(x: object) -> str:
    if isinstance(x, jax.Array | jax.ShapeDtypeStruct):
        return f"an array {describe_aval(x)}"
    return f"a {type(x).__name__}"


def _mismatch(prefix: object, full: object, path: str) -> str | None:
    if is_spec_leaf(prefix):
        return None
    pdef, pkids = _one_level(prefix)
    fdef, fkids = _one_level(full)
    pdata, fdata = pdef.node_data(), fdef.node_data()
    if pdata is None:
        return (
            f"at key path {path}: {_kind(prefix)} is not a Sharding, a "
            "PartitionSpec or None"
        )
    if fdata is None:
        return (
            f"at key path {path}: the shardings have a {pdata[0].__name__} where the "
            f"value is {_kind(full)}"
        )
    if pdata[0] is not fdata[0]:
        return (
            f"different types at key path {path}: the shardings have a "
            f"{pdata[0].__name__} but the value is a {fdata[0].__name__}"
        )
    if len(pkids) != len(fkids):
        return (
            f"different lengths at key path {path}: the shardings have a "
            f"{pdata[0].__name__} of length {len(pkids)} but the value has length "
            f"{len(fkids)}"
        )
    if pdata[1] != fdata[1]:
        return (
            f"different keys at key path {path}: the shardings have "
            f"{pdata[1]!r} but the value has {fdata[1]!r}"
        )
    for (key, p), (_, f) in zip(pkids, fkids, strict=True):
        found = _mismatch(p, f, path + key)
        if found:
            return found
    return None


def _check_leaves(prefix: object, path: str, what: str) -> None:
    flat, _ = jax.tree_util.tree_flatten_with_path(prefix, is_leaf=is_spec_leaf)
    for p, leaf in flat:
        if not is_spec_leaf(leaf):
            raise ShardingError(
                f"{what} leaf at {path}{jax.tree_util.keystr(p)} is {leaf!r} "
                f"({type(leaf).__name__}); expected a Sharding, a PartitionSpec, "
                "AUTO(mesh) or None"
            )


def broadcast_prefix(
    prefix: object, full: object, path: str, what: str
) -> list[object]:
    """One prefix leaf per leaf of `full` (a leaf applies to its whole subtree)."""
    _check_leaves(prefix, path, what)
    n = len(jax.tree_util.tree_leaves(full))
    if is_spec_leaf(prefix):
        return [prefix] * n
    found = _mismatch(prefix, full, path)
    if found:
        raise ShardingError(
            f"{what} must be a pytree prefix of the value it shards: {found}"
        )
    pdef = jax.tree_util.tree_structure(prefix, is_leaf=is_spec_leaf)
    subtrees: list[object] = pdef.flatten_up_to(full)  # type: ignore[attr-defined]
    leaves = jax.tree_util.tree_leaves(prefix, is_leaf=is_spec_leaf)
    out: list[object] = []
    for leaf, sub in zip(leaves, subtrees, strict=True):
        out.extend([leaf] * len(jax.tree_util.tree_leaves(sub)))
    return out


def is_key_dtype(dtype: Any) -> bool:
    """Whether `dtype` is a typed PRNG key's (`jax.random.key(0).dtype`)."""
    return bool(jax.numpy.issubdtype(dtype, jax.dtypes.prng_key))


def describe_aval(x: object) -> str:
    shape = tuple(getattr(x, "shape", ()))
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        short = "?"
    elif is_key_dtype(dtype):
        short = str(dtype)  # key<fry>
    else:
        short = jax.numpy.dtype(dtype).name
    short = {
        "float32": "f32",
        "float64": "f64",
        "int32": "i32",
        "bfloat16": "bf16",
    }.get(short, short)
    return f"{short}[{','.join(str(d) for d in shape)}]"
