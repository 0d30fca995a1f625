"""Exceptions every meshjit layer raises; pure Python, imported by all of them."""

from __future__ import annotations


class MeshjitError(Exception):
    """Base class of meshjit's own errors."""


class ShardingError(MeshjitError, ValueError):
    """A sharding, mesh or partition spec that cannot be used as written."""


class JitArgumentError(ShardingError, TypeError):
    """An argument `jit` cannot take as written: unhashable static, not an array."""


class IndivisibleDimError(ShardingError):
    """A dim the mesh axes sharding it do not divide (where jax raises its
    IndivisibleError, the frontend raises a subclass of both)."""


class DuplicateAxisError(ShardingError):
    """A mesh axis used by two dims of one spec (where jax raises its
    DuplicateSpecError, the frontend raises a subclass of both)."""


class MissingMeshError(ShardingError, RuntimeError):
    """A bare PartitionSpec with no mesh context to resolve it against (a
    RuntimeError, as jax's "requires a non-empty mesh in context")."""


class DeletedArgumentError(ShardingError, RuntimeError):
    """An argument whose buffer is gone (donated to an earlier call, or
    deleted) or would be (donated and passed again in the same call); a
    RuntimeError as jax's, and a ShardingError."""


class PipelineError(MeshjitError, ValueError):
    """A pass pipeline text that names an unknown pass or a bad option."""


class ReportError(MeshjitError, ValueError):
    """An HTML report cannot be made from this module or pipeline."""


class ProcessMismatchError(MeshjitError, RuntimeError):
    """Processes of one jax.distributed job about to run different programs
    (or one of them gone): running on would hang in a collective."""


class InternalError(MeshjitError, RuntimeError):
    """A bug in meshjit itself, not in the user's input."""

    def __init__(self, message: str) -> None:
        super().__init__(
            f"{message}\nThis is a bug in meshjit; please report it with the input "
            "that caused it."
        )


class UnsupportedJaxError(MeshjitError, ImportError):
    """The installed jax or jaxlib is outside the versions meshjit supports
    (raised when meshjit is imported)."""
