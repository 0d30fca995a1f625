"""One process of the multi-process tests: `python -m meshjit.launch -n N
--devices-per-process K worker.py OUT MODE` (N x K = 8).

MODE "all": jit and pjit on a global 2x4 mesh, with_sharding_constraint,
donation, AOT lower/compile/as_text, explain, outputs sharded across
processes, host-local inputs and outputs gathered to every host; checks
what one process can check, compares with jax.jit in the same job, and
writes the gathered results to OUT-p{process}.npz for the test to compare
across 1, 2 and 4 processes. MODE "mismatch": process 1 calls the function
on another shape. MODE "dies": process 1 exits before the first run.
"""

from __future__ import annotations

import os
import sys
import warnings

import meshjit.distributed

meshjit.distributed.initialize()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import meshjit  # noqa: E402

OUT, MODE = sys.argv[1], sys.argv[2]
ME = jax.process_index()
MESH = Mesh(np.array(jax.devices()).reshape(2, 4), ("x", "y"))
RNG = np.random.default_rng(0)  # the same values on every process
X = RNG.standard_normal((16, 32), dtype=np.float32)
W1 = RNG.standard_normal((32, 64), dtype=np.float32) / 8
W2 = RNG.standard_normal((64, 8), dtype=np.float32) / 8


def global_array(value: np.ndarray, spec: P) -> jax.Array:
    """A global jax.Array from a value every process holds whole."""
    sharding = NamedSharding(MESH, spec)
    return jax.make_array_from_callback(value.shape, sharding, lambda i: value[i])


def gathered(x: jax.Array) -> np.ndarray:
    """The whole value on every process."""
    if x.is_fully_addressable:
        return np.asarray(x)
    return np.asarray(multihost_utils.process_allgather(x, tiled=True))


def loss(w1: jax.Array, w2: jax.Array, x: jax.Array) -> jax.Array:
    h = jnp.tanh(x @ w1)
    return jnp.mean((h @ w2) ** 2)


def check(cond: bool, what: str) -> None:
    if not cond:
        raise AssertionError(f"process {ME}: {what}")


def run_all() -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    x = global_array(X, P(("x", "y")))
    w1 = global_array(W1, P(None, "y"))
    w2 = global_array(W2, P("y", None))

    # jit on a global mesh, outputs sharded across processes.
    step = meshjit.jit(
        jax.value_and_grad(loss, argnums=(0, 1)),
        out_shardings=(
            NamedSharding(MESH, P()),
            (NamedSharding(MESH, P("x", "y")), NamedSharding(MESH, P("y", "x"))),
        ),
    )
    value, (g1, g2) = step(w1, w2, x)
    ref_value, (r1, r2) = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))(w1, w2, x)
    if jax.process_count() > 1:
        check(not g1.is_fully_addressable, "g1 should span processes")
    check(
        len(g1.addressable_shards) == jax.local_device_count(),
        "one shard per local device",
    )
    out["loss"] = gathered(value)
    out["g1"] = gathered(g1)
    out["g2"] = gathered(g2)
    np.testing.assert_allclose(out["g1"], gathered(r1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["g2"], gathered(r2), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["loss"], gathered(ref_value), rtol=1e-5)
    step(w1, w2, x)  # the second call: jax's C++ dispatch

    # pjit with bare PartitionSpecs under jax's `with mesh:` (None = replicated)
    # and under meshjit's own mesh context.
    xr = global_array(X, P("x"))
    scaled = meshjit.pjit(lambda a: a * 3.0, in_shardings=P("x"), out_shardings=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with MESH:
            y = scaled(xr)
    check(y.sharding.spec == P(), f"pjit None is replicated, got {y.sharding}")
    out["pjit"] = gathered(y)
    with meshjit.Mesh.from_jax(MESH):
        y2 = meshjit.pjit(lambda a: a + 1.0, in_shardings=P("x"), out_shardings=P())(xr)
    out["pjit_meshjit_mesh"] = gathered(y2)

    # with_sharding_constraint inside jit under jax.set_mesh.
    def constrained(a: jax.Array) -> jax.Array:
        b = meshjit.with_sharding_constraint(a * 2.0, P(None, "y"))
        return b.sum(axis=0)

    with jax.set_mesh(MESH):
        z = meshjit.jit(constrained)(x)
    out["wsc"] = gathered(z)

    # Donation: the donated buffers are gone after the call.
    w1_copy = global_array(W1, P(None, "y"))
    sgd = meshjit.jit(lambda w, g: w - 0.1 * g, donate_argnums=0)
    new_w1 = sgd(w1_copy, jax.device_put(g1, w1.sharding))
    check(w1_copy.is_deleted(), "the donated argument is deleted")
    out["sgd"] = gathered(new_w1)

    # AOT: lower, compile, as_text; every process compiles the same text.
    lowered = meshjit.jit(loss).lower(w1, w2, x)
    check("sdy.sharding" in lowered.as_text(), "lowered text carries shardings")
    compiled = lowered.compile()
    part = compiled.as_text("partitioned")
    check("all_reduce" in part, "the partitioned loss reduces across devices")
    out["aot"] = gathered(compiled(w1, w2, x))
    texts = multihost_utils.process_allgather(
        np.frombuffer(part.encode().ljust(1 << 16)[: 1 << 16], np.uint8)
    )
    check(all((t == texts[0]).all() for t in texts), "same text on every process")

    # explain names the collectives.
    explanation = meshjit.explain(meshjit.jit(loss), w1, w2, x)
    check(len(explanation.collectives) > 0, "explain lists the all-reduces")
    check("all-reduce" in str(explanation), "explain's text")

    # Host-local inputs: each process gives only the rows its devices hold.
    batch = NamedSharding(MESH, P(("x", "y")))
    rows = sorted(
        {
            i[0].indices(16)[:2]
            for i in batch.addressable_devices_indices_map((16, 32)).values()
        }
    )
    local = X[rows[0][0] : rows[-1][1]]
    xl = jax.make_array_from_process_local_data(batch, local, (16, 32))
    out["local_input"] = gathered(meshjit.jit(lambda a: jnp.sin(a).sum(axis=1))(xl))
    return out


def main() -> None:
    if MODE == "all":
        np.savez(f"{OUT}-p{ME}.npz", **run_all())
        print(f"OK process {ME} of {jax.process_count()}")
        return
    f = meshjit.jit(lambda a: (a * 2.0).sum(axis=0))
    if MODE == "mismatch":
        cols = 32 if ME != 1 else 16
        f(global_array(X[:, :cols], P("x")))
    elif MODE == "dies":
        x = global_array(X, P("x"))
        if ME == 1:
            os._exit(3)
        try:
            f(x)
        except meshjit.ProcessMismatchError as err:
            # Leave at once: jax.distributed's shutdown at exit would wait for
            # the dead process until the coordinator gives up on it.
            print(f"{type(err).__name__}: {err}", flush=True)
            os._exit(1)
    raise AssertionError(f"mode {MODE}: process {ME} should not get here")


if __name__ == "__main__":
    main()
