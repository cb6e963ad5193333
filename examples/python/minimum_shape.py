# The custom-sink spec's "Minimum shape" and its data-plane assertion, verbatim below the line.
# The spec leaves connect() to the reader: here it is the demo destination of demo_client.py.
# Run it: [plugin_config] class = "minimum_shape:MySink", python_path = ["examples/python"].
from demo_client import connect

# ---------------------------------------------------------------- the spec, verbatim
from agora import BaseSink


class MySink(BaseSink[dict]):
    sink_name = "my_sink"

    async def open(self) -> None:
        self._client = await connect()

    async def write(self, record: dict) -> None:
        await self._client.send(record)

    async def close(self) -> None:
        await self._client.close()

from agora import DataPlane, sink_data_plane_spec

spec = sink_data_plane_spec(MySink())
assert spec.accepted_planes == (DataPlane.PYTHON_ROWS,)
assert spec.native_planes == (DataPlane.PYTHON_ROWS,)
