"""The partitioner's builder writes each distinct pure op once per region."""

from meshjit.passes.partitioner.builder import Builder, Ty, Val, canonical_region

F32 = Ty((4,), "f32")


def test_the_same_pure_op_is_written_once() -> None:
    b = Builder()
    x = Val("%x", F32)
    first = b.unary("stablehlo.tanh", x)
    again = b.unary("stablehlo.tanh", x)
    other = b.unary("stablehlo.exponential", x)
    assert again == first
    assert other != first
    assert sum("stablehlo.tanh" in line for line in b.lines) == 1


def test_constants_compare_by_value_and_type() -> None:
    b = Builder()
    assert b.splat(F32, "0.0") == b.splat(F32, "0.0")
    assert b.splat(F32, "0.0") != b.splat(F32, "1.0")
    assert b.splat(F32, "0.0") != b.splat(Ty((8,), "f32"), "0.0")


def test_regions_compare_by_what_they_compute() -> None:
    b = Builder()
    x = Val("%x", F32)
    zero = b.splat(Ty((), "f32"), "0.0")
    first = b.reduce(x, zero, [0], "stablehlo.add")
    again = b.reduce(x, zero, [0], "stablehlo.add")
    other = b.reduce(x, zero, [0], "stablehlo.maximum")
    assert again == first
    assert other != first


def test_canonical_region_keeps_names_from_outside() -> None:
    one = ["^bb0(%v1: tensor<f32>):", "  %v2 = stablehlo.add %v1, %v9 : tensor<f32>"]
    two = ["^bb0(%v5: tensor<f32>):", "  %v6 = stablehlo.add %v5, %v9 : tensor<f32>"]
    far = ["^bb0(%v5: tensor<f32>):", "  %v6 = stablehlo.add %v5, %v8 : tensor<f32>"]
    assert canonical_region(one) == canonical_region(two)
    assert canonical_region(one) != canonical_region(far)


def test_a_region_shares_nothing_with_the_one_around_it() -> None:
    b = Builder()
    x = Val("%x", F32)
    outer = b.unary("stablehlo.tanh", x)
    saved = b.capture()
    inner = b.unary("stablehlo.tanh", x)
    body = b.restore(saved)
    assert inner != outer
    assert any("stablehlo.tanh" in line for line in body)
    assert b.unary("stablehlo.tanh", x) == outer


def test_effects_random_bits_and_collectives_are_never_shared() -> None:
    b = Builder()
    x = Val("%x", F32)
    groups = "dense<[[0, 1]]> : tensor<1x2xi64>"
    assert b.all_reduce(x, groups, "stablehlo.add") != b.all_reduce(
        x, groups, "stablehlo.add"
    )
    # A program's own collective written without a channel: still one each.
    plain = {"all_gather_dim": "0 : i64", "replica_groups": groups}
    assert b.op1("stablehlo.all_gather", [x], F32, plain) != b.op1(
        "stablehlo.all_gather", [x], F32, plain
    )
    call = {"call_target_name": '"f"', "has_side_effect": "true"}
    assert b.op1("stablehlo.custom_call", [x], F32, call) != b.op1(
        "stablehlo.custom_call", [x], F32, call
    )
    shape = b.constant(Ty((1,), "i64"), "dense<4> : tensor<1xi64>")
    assert b.op1("stablehlo.rng", [x, x, shape], F32, {}) != b.op1(
        "stablehlo.rng", [x, x, shape], F32, {}
    )


def test_zeros_are_the_constant_a_program_prints() -> None:
    # MLIR prints a float zero as 0.000000e+00: a zero read from the program
    # and one the builder makes (a mask's fill) are one op
    b = Builder()
    scalar = Ty((), "f32")
    assert b.zeros(scalar) == b.constant(scalar, "dense<0.000000e+00> : tensor<f32>")
    assert b.zeros(Ty((), "i32")) == b.constant(Ty((), "i32"), "dense<0> : tensor<i32>")


def test_a_pad_of_nothing_is_its_operand() -> None:
    b = Builder()
    x = Val("%x", F32)
    zero = b.zeros(Ty((), "f32"))
    assert b.pad(x, zero, [0], [0]) == x
    assert b.pad(x, zero, [0], [0], [0]) == x
    padded = b.pad(x, zero, [1], [0])
    assert padded.ty == Ty((5,), "f32")
    assert sum("stablehlo.pad" in line for line in b.lines) == 1


def test_major_gathers_gather_along_dim_0_between_transposes() -> None:
    # modules with an FFT (XLA's CPU FFT thunk refuses the layout a gather
    # along a middle dim gives its neighbours)
    b = Builder()
    groups = "dense<[[0, 1]]> : tensor<1x2xi64>"
    x = Val("%x", Ty((4, 1, 8), "f32"))
    plain = b.all_gather(x, 1, groups, Ty((4, 2, 8), "f32"))
    assert plain.ty == Ty((4, 2, 8), "f32")
    assert sum("stablehlo.transpose" in line for line in b.lines) == 0
    b.major_gathers = True
    moved = b.all_gather(x, 1, groups, Ty((4, 2, 8), "f32"))
    assert moved.ty == Ty((4, 2, 8), "f32")
    text = "\n".join(b.lines)
    assert text.count("stablehlo.transpose") == 2
    assert "all_gather_dim = 0" in text
    # nothing bigger than 1 before the gathered dim: the gather stays as it is
    y = Val("%y", Ty((1, 4, 8), "f32"))
    b.all_gather(y, 1, groups, Ty((1, 8, 8), "f32"))
    assert "\n".join(b.lines).count("stablehlo.transpose") == 2
