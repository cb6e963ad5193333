# The custom-sink spec's "Native batch support", verbatim below the line. The spec's class uses
# self._client without saying where it comes from; MyBatchSinkDemo (after the spec's code) opens
# the demo destination of demo_client.py and changes nothing else.
# Run it: [plugin_config] class = "native_batch:MyBatchSinkDemo", python_path = ["examples/python"].
from demo_client import connect

# ---------------------------------------------------------------- the spec, verbatim
from agora import BaseSink, DataPlane


class MyBatchSink(BaseSink[dict]):
    sink_name = "my_batch_sink"
    accepted_data_planes = (
        DataPlane.PYTHON_ROWS,
        DataPlane.PYTHON_BATCHES,
    )
    native_data_planes = accepted_data_planes

    async def write_batch(self, records: list[dict]) -> None:
        await self._client.send_many(records)

# ---------------------------------------------------------------- the client the spec leaves out


class MyBatchSinkDemo(MyBatchSink):
    async def open(self) -> None:
        self._client = await connect()

    async def close(self) -> None:
        await self._client.close()
