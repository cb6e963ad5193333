"""The picomq_connect package outside the runtime: the spec's plane assertions, the refusals, and
the test helper's outcomes. Run by ctest (python_package) with PYTHONPATH=python:build/python:examples/python
and tools/venv's Python (pyarrow)."""
import unittest

import pyarrow as pa

import agora
import picomq_connect
from picomq_connect import (
    BaseSink,
    DataPlane,
    FatalError,
    MaybeWrittenError,
    RejectedRecord,
    RejectedRecords,
    RetryableError,
    SinkDefinitionError,
    sink_data_plane_spec,
)
from picomq_connect.testing import SinkTester, make_rows


class SpecExamples(unittest.TestCase):
    def test_minimum_shape_advertises_rows_only(self):
        import minimum_shape  # its own module-level assertions ran on import

        spec = sink_data_plane_spec(minimum_shape.MySink())
        self.assertEqual(spec.accepted_planes, (DataPlane.PYTHON_ROWS,))
        self.assertEqual(spec.native_planes, (DataPlane.PYTHON_ROWS,))
        self.assertEqual(spec.best_plane, DataPlane.PYTHON_ROWS)

    def test_native_batch_advertises_rows_and_batches(self):
        import native_batch

        for cls in (native_batch.MyBatchSink, native_batch.MyBatchSinkDemo):
            spec = sink_data_plane_spec(cls())
            self.assertEqual(spec.accepted_planes, (DataPlane.PYTHON_ROWS, DataPlane.PYTHON_BATCHES))
            self.assertEqual(spec.native_planes, (DataPlane.PYTHON_ROWS, DataPlane.PYTHON_BATCHES))
            self.assertEqual(spec.best_plane, DataPlane.PYTHON_BATCHES)
        # As the spec prints them: "accepted_planes = (python_rows, python_batches)".
        self.assertEqual(str(spec.accepted_planes), "(python_rows, python_batches)")

    def test_arrow_boundary_advertises_every_plane(self):
        import arrow_boundary

        spec = sink_data_plane_spec(arrow_boundary.MyArrowSink())
        all_planes = (DataPlane.PYTHON_ROWS, DataPlane.PYTHON_BATCHES, DataPlane.ARROW_BATCHES)
        self.assertEqual(spec.accepted_planes, all_planes)
        self.assertEqual(spec.native_planes, all_planes)
        self.assertEqual(spec.best_plane, DataPlane.ARROW_BATCHES)

    def test_agora_is_the_same_package(self):
        self.assertIs(agora.BaseSink, picomq_connect.BaseSink)
        self.assertIs(agora.sink_data_plane_spec, picomq_connect.sink_data_plane_spec)
        self.assertEqual([p.value for p in DataPlane], ["python_rows", "python_batches", "arrow_batches"])


class Refusals(unittest.TestCase):
    def refusal(self, cls):
        with self.assertRaises(SinkDefinitionError) as caught:
            sink_data_plane_spec(cls)
        return str(caught.exception)

    def test_a_legacy_bool_flag_is_refused(self):
        class Legacy(BaseSink[dict]):
            supports_batches = True

            async def write_batch(self, records):
                pass

        self.assertEqual(
            self.refusal(Legacy),
            "Legacy sets the legacy flag 'supports_batches' (in Legacy); "
            "planes are no longer inferred from bool flags: declare accepted_data_planes and native_data_planes instead")

    def test_a_native_plane_not_implemented_is_refused(self):
        class NoArrow(BaseSink[dict]):
            accepted_data_planes = (DataPlane.PYTHON_ROWS, DataPlane.ARROW_BATCHES)
            native_data_planes = accepted_data_planes

            async def write(self, record):
                pass

        self.assertEqual(self.refusal(NoArrow),
                         "NoArrow declares native data plane 'arrow_batches' but does not implement write_arrow_batch()")

        class NoBatch(BaseSink[dict]):
            accepted_data_planes = (DataPlane.PYTHON_ROWS, DataPlane.PYTHON_BATCHES)
            native_data_planes = accepted_data_planes

            async def write(self, record):
                pass

        self.assertEqual(self.refusal(NoBatch),
                         "NoBatch declares native data plane 'python_batches' but does not implement write_batch()")

    def test_a_native_plane_not_accepted_is_refused(self):
        class NotAccepted(BaseSink[dict]):
            native_data_planes = (DataPlane.PYTHON_ROWS, DataPlane.PYTHON_BATCHES)

            async def write_batch(self, records):
                pass

        self.assertEqual(self.refusal(NotAccepted),
                         "NotAccepted declares native data plane 'python_batches' but does not accept it")

    def test_a_rows_sink_without_any_write_is_refused(self):
        class Nothing(BaseSink[dict]):
            pass

        self.assertEqual(self.refusal(Nothing), "Nothing declares native data plane 'python_rows' but does not implement write()")

    def test_an_unknown_plane_is_refused(self):
        class Odd(BaseSink[dict]):
            accepted_data_planes = ("python_rows", "parquet_files")

            async def write(self, record):
                pass

        self.assertIn("names an unknown data plane 'parquet_files'", self.refusal(Odd))


class Collect(BaseSink[dict]):
    accepted_data_planes = (DataPlane.PYTHON_ROWS, DataPlane.PYTHON_BATCHES)
    native_data_planes = accepted_data_planes

    def __init__(self, **options):
        super().__init__(**options)
        self.batches = []
        self.fail = None

    async def write_batch(self, records):
        if self.fail:
            raise self.fail
        self.batches.append(records)


class Rows(BaseSink[dict]):
    def __init__(self, **options):
        super().__init__(**options)
        self.rows = []

    async def write(self, record):
        if record.get("n") == "bad":
            raise RejectedRecord("n is not a number")
        if record.get("n") == "down":
            raise ConnectionError("destination down")
        self.rows.append(record)


class Outcomes(unittest.TestCase):
    def test_every_exception_maps_to_its_outcome(self):
        sink = Collect()
        with SinkTester(sink) as t:
            self.assertEqual(t.plane, DataPlane.PYTHON_BATCHES)
            self.assertEqual(t.write([{"n": 1}, {"n": 2}]).status, "ok")
            self.assertEqual(sink.batches[0][1]["n"], 2)
            self.assertEqual(sink.batches[0][1]["pico_offset"], 1)
            cases = [
                (ConnectionError("refused"), "retry", "ConnectionError: refused"),
                (RetryableError("busy"), "retry", "RetryableError: busy"),
                (MaybeWrittenError("timeout after send"), "maybe_written", "MaybeWrittenError: timeout after send"),
                (FatalError("no such table"), "fatal", "FatalError: no such table"),
                (KeyboardInterrupt(), "fatal", "KeyboardInterrupt"),
            ]
            for error, status, message in cases:
                sink.fail = error
                outcome = t.write([{"n": 3}])
                self.assertEqual((outcome.status, outcome.message), (status, message))
            sink.fail = RejectedRecords({1: "too big"})
            outcome = t.write([{"n": 1}, {"n": 2}])
            self.assertEqual((outcome.status, outcome.rejected), ("rejected", [(1, "too big")]))
            sink.fail = RejectedRecords({5: "nope"})
            outcome = t.write([{"n": 1}])
            self.assertEqual(outcome.status, "fatal")
            self.assertIn("names record 5, but the batch has 1 records", outcome.message)

    def test_rows_plane_rejects_one_record_and_a_failure_after_a_written_record_is_maybe_written(self):
        sink = Rows()
        with SinkTester(sink) as t:
            outcome = t.write([{"n": 1}, {"n": "bad"}, {"n": 3}])
            self.assertEqual((outcome.status, outcome.rejected), ("rejected", [(1, "n is not a number")]))
            self.assertEqual([r["n"] for r in sink.rows], [1, 3])
            self.assertEqual(t.write([{"n": "down"}]).status, "retry")
            outcome = t.write([{"n": 4}, {"n": "down"}], first_offset=7)
            self.assertEqual(outcome.status, "maybe_written")
            self.assertEqual(outcome.message, "record 1 (offset 8): ConnectionError: destination down")

    def test_rows_carry_the_payload_and_the_metadata(self):
        rows, refused = make_rows([{"a": 1}, [1, 2], None, {"pico_offset": 3}], topic="t", first_offset=10,
                                  keys=[b"k", None, None, None], headers=[(("h", b"v"),), (), (), ()])
        self.assertEqual(rows[0], {"a": 1, "pico_topic": "t", "pico_partition": 0, "pico_offset": 10,
                                   "pico_timestamp": None, "pico_key": b"k", "pico_headers": (("h", b"v"),)})
        self.assertEqual(rows[1]["payload"], [1, 2])
        self.assertIsNone(rows[2]["payload"])
        self.assertEqual(refused, [(3, "field 'pico_offset' collides with a metadata column")])

    def test_an_arrow_sink_gets_a_record_batch(self):
        import arrow_boundary

        got = []

        class Arrow(arrow_boundary.MyArrowSink):
            async def write_arrow_batch(self, batch):
                got.append(batch)

        with SinkTester(Arrow()) as t:
            self.assertEqual(t.write([{"n": 1}, {"n": None}]).status, "ok")
        self.assertIsInstance(got[0], pa.RecordBatch)
        self.assertEqual(got[0].column("n").to_pylist(), [1, None])


if __name__ == "__main__":
    unittest.main()
