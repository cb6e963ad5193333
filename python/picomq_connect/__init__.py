"""picomq-connect sinks in Python: subclass BaseSink, declare data planes, raise outcome errors.

The module `agora` is an alias of this package, so code written as
`from agora import BaseSink, DataPlane, sink_data_plane_spec` runs unchanged."""
from ._planes import DataPlane, DataPlaneSpec, SinkDefinitionError, sink_data_plane_spec
from .errors import (
    FatalError,
    MaybeWrittenError,
    RejectedRecord,
    RejectedRecords,
    RetryableError,
    SinkError,
)
from .sink import BaseSink

__all__ = [
    "BaseSink",
    "DataPlane",
    "DataPlaneSpec",
    "FatalError",
    "MaybeWrittenError",
    "RejectedRecord",
    "RejectedRecords",
    "RetryableError",
    "SinkDefinitionError",
    "SinkError",
    "sink_data_plane_spec",
]
__version__ = "0.1.0"
