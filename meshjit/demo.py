"""The main demo: a sharded model compiled by `meshjit.jit` on 8 CPU devices.

    python -m meshjit.demo
    python -m meshjit.launch -n 2 --devices-per-process 4 -m meshjit.demo

A two-layer MLP with Megatron-style shardings on a 2x4 ("data", "model") mesh:
meshjit traces it with JAX, propagates shardings with its own pass, partitions
it into a per-device program with explicit collectives and runs it through
PJRT. The demo prints the result (checked against numpy), the shardings
meshjit chose for every value and why, the collectives it inserted, a train
step whose layouts meshjit chooses itself (AUTO), and then runs the seed
pages' examples (`selu`, `g(x, n)` with static_argnames, pjit's convolve).
Under `meshjit.launch` the same mesh spans the devices of every process: each
process prints its check of the result, process 0 the report.
"""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")


def _model() -> None:
    import jax
    import numpy as np
    from jax.experimental import multihost_utils

    import meshjit
    from meshjit import Mesh, NamedSharding, P

    # 2x4 over 8 devices; where there are fewer (one GPU: JAX_PLATFORMS=cuda),
    # the same program on a 1x1 mesh.
    shape = (2, 4) if jax.device_count() >= 8 else (1, 1)
    devices = jax.devices()[: shape[0] * shape[1]]
    mesh = Mesh(np.array(devices).reshape(shape), ("data", "model"))

    def sharded(*spec: str | None) -> NamedSharding:
        return NamedSharding(mesh, P(*spec))

    def mlp(x: jax.Array, w1: jax.Array, w2: jax.Array) -> jax.Array:
        h = jax.nn.gelu(x @ w1)
        return h @ w2

    model = meshjit.jit(
        mlp,
        in_shardings=(
            sharded("data", None),  # x: batch split over "data"
            sharded(None, "model"),  # w1: columns split over "model"
            sharded("model", None),  # w2: rows split over "model"
        ),
        out_shardings=sharded("data", None),
    )
    rng = np.random.default_rng(0)  # the same values in every process
    x = rng.standard_normal((32, 64), dtype=np.float32)
    w1 = rng.standard_normal((64, 256), dtype=np.float32) * 0.1
    w2 = rng.standard_normal((256, 64), dtype=np.float32) * 0.1
    h = x @ w1
    gelu = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h**3)))
    expected = gelu @ w2
    shardings = (sharded("data", None), sharded(None, "model"), sharded("model", None))
    args: list[Any] = [x, w1, w2]
    if jax.process_count() > 1:
        # Several processes: arguments are global arrays, each process
        # supplying the blocks its own devices hold.
        args = [
            jax.make_array_from_callback(v.shape, s.to_jax(), v.__getitem__)
            for v, s in zip(args, shardings, strict=True)
        ]
    out = model(*args)
    whole = np.asarray(multihost_utils.process_allgather(out, tiled=True))
    error = float(np.max(np.abs(whole - expected)))
    if jax.process_count() > 1:
        print(
            f"process {jax.process_index()} of {jax.process_count()}: "
            f"{len(out.addressable_shards)} of the result's {len(mesh.devices.flat)} "
            f"blocks here, max |meshjit - numpy| = {error:.2e}"
        )
        if jax.process_index() != 0:
            return
    print(f"== meshjit.jit(mlp) on {mesh} ==")
    print(f"result: {out.dtype}{list(out.shape)}, sharding {out.sharding.spec}")
    print(f"result[0, :4] = {whole[0, :4]}")
    print(f"max |meshjit - numpy| = {error:.2e}")
    info = model.cache_info()
    print(f"cache: {info.traces} trace, {info.compiles} compile")

    explanation = meshjit.explain(model, *args)
    print("\n== shardings meshjit chose for every value (meshjit.explain) ==")
    print(explanation.summary(), end="")
    why = explanation.propagation_text.split("\nresult of ")[0]
    print("\n== why, for the arguments (all values: explanation.propagation_text) ==")
    print(why.rstrip())
    print("\n== collectives inserted by meshjit's partitioner ==")
    print(explanation.collectives_text, end="")
    print("\n== the per-device program (Lowered.as_text(stage='partitioned')) ==")
    print(model.lower(*args).as_text(stage="partitioned"), end="")
    page = explanation.compiled.report(
        os.environ.get("MESHJIT_DEMO_REPORT", "meshjit-demo-report.html")
    )
    print("\n== the compiled program as one HTML page (Compiled.report) ==")
    print(f"report: {page}  (open it in a browser; nothing is fetched)")


def _auto() -> None:
    """A train step of the same MLP with every layout left to meshjit."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    import meshjit
    from meshjit import Mesh
    from meshjit.sharding import AUTO

    if jax.process_count() > 1 or jax.device_count() < 8:
        return
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("data", "model"))

    def step(w1: jax.Array, w2: jax.Array, x: jax.Array, y: jax.Array) -> Any:
        def loss(w1: jax.Array, w2: jax.Array) -> jax.Array:
            return jnp.mean((jax.nn.gelu(x @ w1) @ w2 - y) ** 2)

        g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2)
        return w1 - 0.1 * g1, w2 - 0.1 * g2

    rng = np.random.default_rng(1)
    w1 = rng.standard_normal((256, 1024), dtype=np.float32) * 0.05
    w2 = rng.standard_normal((1024, 256), dtype=np.float32) * 0.05
    x = rng.standard_normal((64, 256), dtype=np.float32)
    y = rng.standard_normal((64, 256), dtype=np.float32)
    auto = AUTO(mesh)
    # donated weights come back laid out as they went in (the next step's)
    train = meshjit.jit(
        step, in_shardings=auto, out_shardings=auto, donate_argnums=(0, 1)
    )
    compiled = train.lower(w1, w2, x, y).compile()
    print("\n== a train step with every layout AUTO (meshjit.sharding.AUTO) ==")
    (c1, c2, cx, cy), _ = compiled.input_shardings
    print(f"chosen: w1 {c1.spec}, w2 {c2.spec}, x {cx.spec}, y {cy.spec}")
    o1, o2 = compiled.output_shardings
    print(f"updated weights come out as: w1 {o1.spec}, w2 {o2.spec}")
    assert compiled.auto_shard is not None
    print(compiled.auto_shard.summary())
    print(compiled.collectives_text(), end="")
    got = compiled(w1, w2, x, y)
    want = jax.jit(step)(w1, w2, x, y)
    error = max(
        float(np.max(np.abs(np.asarray(g) - np.asarray(w))))
        for g, w in zip(got, want, strict=True)
    )
    print(f"max |meshjit AUTO - jax.jit| = {error:.2e}")


def _seed_examples() -> None:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental import multihost_utils

    import meshjit
    from meshjit.sharding import Mesh, PartitionSpec

    # Every process runs every program (the pjit below spans all of them);
    # process 0 prints.
    def say(*parts: object, end: str = "\n") -> None:
        if jax.process_index() == 0:
            print(*parts, end=end)

    say("\n== the seed pages' examples, run by meshjit ==")

    def selu(x: jax.Array, alpha: float = 1.67, lmbda: float = 1.05) -> jax.Array:
        return lmbda * jnp.where(x > 0, x, alpha * jnp.exp(x) - alpha)

    selu_jit = meshjit.jit(selu)
    say("selu_jit(jnp.arange(5.0)) =", selu_jit(jnp.arange(5.0)))

    def g(x: jax.Array, n: int) -> jax.Array:
        i = 0
        while i < n:
            i += 1
        return x + i

    g_jit = meshjit.jit(g, static_argnames=["n"])
    say("g_jit(10, 20) =", g_jit(10, 20))

    f = meshjit.pjit(
        lambda x: jnp.convolve(x, jnp.asarray([0.5, 1.0, 0.5]), mode="same"),
        in_shardings=None,
        out_shardings=PartitionSpec("devices"),
    )
    with Mesh(
        np.array(jax.devices()[:8] if jax.device_count() >= 8 else jax.devices()[:1]),
        ("devices",),
    ):
        data = f(jnp.arange(8 * 5))
    say("pjit convolve:", multihost_utils.process_allgather(data, tiled=True))
    say("  sharded as", data.sharding.spec, "with shards of shape", end=" ")
    say(data.addressable_shards[0].data.shape)


def main() -> None:
    from meshjit.launch import COORDINATOR

    if COORDINATOR in os.environ:  # started by python -m meshjit.launch
        import meshjit.distributed

        meshjit.distributed.initialize()
    _model()
    _auto()
    _seed_examples()
    import jax

    if jax.process_index() != 0:
        return
    from meshjit import native

    st = native.status()
    print(
        "\nmeshjit's compiled modules: "
        + ("on" if native.active() else "off")
        + f" ({st.reason}"
        + ("" if st.active else "; `meshjit-native build` makes the passes ~2x faster")
        + ")"
    )


if __name__ == "__main__":
    main()
