"""Data planes and the normalised data-plane contract of a sink.

sink_data_plane_spec() computes its answer with pmq_sink_plane_spec() of the sink ABI (through
the _picomq_abi module), the function the runtime's loader and planner use: what a test asserts
is what the runtime does.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

try:
    import _picomq_abi as _abi
except ImportError as e:  # pragma: no cover - only without a build of the package
    raise ImportError(
        "picomq_connect needs its _picomq_abi extension (the sink ABI's plane normalisation): "
        "install the package with `pip install ./python`, or run inside libpicomq_connector_python_sink"
    ) from e


class DataPlane(str, enum.Enum):
    """How a batch of records reaches a sink."""

    PYTHON_ROWS = "python_rows"  # write(record: dict), one record per call
    PYTHON_BATCHES = "python_batches"  # write_batch(records: list[dict])
    ARROW_BATCHES = "arrow_batches"  # write_arrow_batch(batch: pyarrow.RecordBatch)

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return self.value


_BITS = {
    DataPlane.PYTHON_ROWS: _abi.PLANE_ROWS,
    DataPlane.PYTHON_BATCHES: _abi.PLANE_BATCHES,
    DataPlane.ARROW_BATCHES: _abi.PLANE_ARROW,
}
_ORDER = (DataPlane.PYTHON_ROWS, DataPlane.PYTHON_BATCHES, DataPlane.ARROW_BATCHES)
# The ABI names its planes and write functions in C terms; a Python author reads these.
_ABI_WORDS = (
    ("'rows'", "'python_rows'"),
    ("'batches'", "'python_batches'"),
    ("'arrow'", "'arrow_batches'"),
    ("write_record", "write()"),
    ("write_batch", "write_batch()"),
    ("write_arrow", "write_arrow_batch()"),
)

# Flags of earlier versions from which planes were inferred. In 0.4.0 nothing is inferred from
# them: a class that sets one is refused, so that it states its planes explicitly.
LEGACY_FLAGS = (
    "supports_batches",
    "supports_batch",
    "supports_arrow",
    "batch_native",
    "arrow_native",
    "native_batches",
    "native_arrow",
    "accepts_batches",
    "accepts_arrow",
    "is_batch_sink",
    "is_arrow_sink",
)


class SinkDefinitionError(TypeError):
    """A sink class whose data-plane contract the runtime refuses."""


@dataclass(frozen=True)
class DataPlaneSpec:
    accepted_planes: tuple[DataPlane, ...]
    native_planes: tuple[DataPlane, ...]
    best_plane: DataPlane  # the plane the runtime delivers batches on: arrow > batches > rows


def _bits(cls: type, attribute: str) -> int:
    planes = getattr(cls, attribute)
    if isinstance(planes, (str, DataPlane)) or not isinstance(planes, (tuple, list, frozenset, set)):
        raise SinkDefinitionError(
            f"{cls.__name__}.{attribute} must be a tuple of DataPlane values, not {planes!r}"
        )
    bits = 0
    for p in planes:
        try:
            bits |= _BITS[DataPlane(p)]
        except ValueError:
            raise SinkDefinitionError(
                f"{cls.__name__}.{attribute} names an unknown data plane {p!r} "
                f"(known: {', '.join(d.value for d in _ORDER)})"
            ) from None
    return bits


def _overrides(cls: type, name: str) -> bool:
    from .sink import BaseSink

    method = getattr(cls, name, None)
    return method is not None and method is not getattr(BaseSink, name)


def _planes(bits: int) -> tuple[DataPlane, ...]:
    return tuple(p for p in _ORDER if bits & _BITS[p])


def sink_data_plane_spec(sink) -> DataPlaneSpec:
    """The accepted and native planes of a sink (an instance or its class), normalised by the sink
    ABI's pmq_sink_plane_spec(), as the runtime does. Raises SinkDefinitionError for a contract
    the runtime refuses, saying why."""
    cls = sink if isinstance(sink, type) else type(sink)
    for flag in LEGACY_FLAGS:
        for klass in cls.__mro__:
            if flag in vars(klass):
                raise SinkDefinitionError(
                    f"{cls.__name__} sets the legacy flag '{flag}' (in {klass.__name__}); planes are no "
                    "longer inferred from bool flags: declare accepted_data_planes and native_data_planes instead"
                )
    accepted = _bits(cls, "accepted_data_planes")
    native = _bits(cls, "native_data_planes")
    # write() of BaseSink hands one record to write_batch(), so either one implements the rows plane.
    has_write = _overrides(cls, "write") or _overrides(cls, "write_batch")
    has_batch = _overrides(cls, "write_batch")
    has_arrow = _overrides(cls, "write_arrow_batch")
    try:
        a, n, best = _abi.plane_spec(accepted, native, has_write, has_batch, has_arrow)
    except ValueError as e:
        reason = str(e)
        for c_word, py_word in _ABI_WORDS:
            reason = reason.replace(c_word, py_word)
        raise SinkDefinitionError(f"{cls.__name__} {reason}") from None
    return DataPlaneSpec(_planes(a), _planes(n), _planes(best)[0])
