"""The Python side of the host plugin libpicomq_connector_python_sink: one interpreter, one asyncio
loop thread for every Python sink of the process. Internal: the plugin calls these functions."""
from __future__ import annotations

import asyncio
import importlib
import json
import os
import site
import sys
import threading

from ._dispatch import FATAL, run_write
from ._planes import DataPlane, _abi, sink_data_plane_spec
from .sink import BaseSink

_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()
# The host's Arrow export starts with these columns (docs/arrow.md, "Metadata columns").
METADATA_COLUMNS = ("pico_topic", "pico_partition", "pico_offset", "pico_timestamp", "pico_key", "pico_headers")
_PLANE_BITS = {
    DataPlane.PYTHON_ROWS: _abi.PLANE_ROWS,
    DataPlane.PYTHON_BATCHES: _abi.PLANE_BATCHES,
    DataPlane.ARROW_BATCHES: _abi.PLANE_ARROW,
}


def loop() -> asyncio.AbstractEventLoop:
    """The process's one asyncio loop, running on its own thread."""
    global _loop
    with _loop_lock:
        if _loop is None:
            new = asyncio.new_event_loop()
            threading.Thread(target=new.run_forever, name="picomq-python", daemon=True).start()
            _loop = new
        return _loop


def _add_paths(python_path: list[str], virtualenv: str) -> None:
    for p in reversed(python_path):
        p = os.path.abspath(p)
        if not os.path.isdir(p):
            raise ValueError(f"python_path: {p} is not a directory")
        if p not in sys.path:
            sys.path.insert(0, p)
    if virtualenv:
        version = f"python{sys.version_info.major}.{sys.version_info.minor}"
        packages = os.path.join(os.path.abspath(virtualenv), "lib", version, "site-packages")
        if not os.path.isdir(packages):
            raise ValueError(
                f"virtualenv: {packages} does not exist (the virtualenv must be made with {sys.executable or 'python3'} "
                f"{sys.version_info.major}.{sys.version_info.minor}, the Python this plugin embeds)"
            )
        if packages not in sys.path:
            site.addsitedir(packages)
            # addsitedir appends; the virtualenv's packages win over the system's, as in the venv itself.
            sys.path.remove(packages)
            sys.path.insert(0, packages)


def load_class(class_spec: str) -> type:
    module_name, sep, qualname = class_spec.partition(":")
    if not sep or not module_name or not qualname:
        raise ValueError(f"class: '{class_spec}' is not 'module:Class'")
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # noqa: BLE001 - reported as the reason the sink cannot start
        raise ValueError(f"class: cannot import module '{module_name}': {type(e).__name__}: {e}") from None
    obj = module
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise ValueError(f"class: module '{module_name}' ({module.__file__}) has no '{qualname}'")
    if not isinstance(obj, type) or not issubclass(obj, BaseSink):
        raise ValueError(f"class: '{class_spec}' is not a subclass of picomq_connect.BaseSink (agora.BaseSink)")
    return obj


def _loadable(class_spec: str, python_path: list[str], virtualenv: str):
    """The class and its best plane, as an instance would take them, without making one."""
    _add_paths(python_path, virtualenv)
    cls = load_class(class_spec)
    plane = sink_data_plane_spec(cls).best_plane  # refuses what the runtime refuses, saying why
    if plane is DataPlane.ARROW_BATCHES:
        try:
            import pyarrow  # noqa: F401
        except ImportError as e:
            raise ValueError(f"class: {class_spec} takes arrow_batches, but pyarrow cannot be imported ({e}); "
                             "install it in the sink's virtualenv") from None
    return cls, plane


def check(class_spec: str, python_path: list[str], virtualenv: str) -> str:
    """The plugin's validate() (and so `picomq-connect --check`): what starting the sink would refuse
    before the class is called: python_path, virtualenv, the module's import, the class and its
    planes. Imports the module (its top-level code runs, as at start); makes no instance. Returns the
    problem as "<option>: <message>", or "" when there is none."""
    try:
        _loadable(class_spec, python_path, virtualenv)
    except Exception as e:  # noqa: BLE001 - reported as the option's problem
        message = str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"
        option = message.split(":", 1)[0]
        return message if option in ("class", "python_path", "virtualenv") else f"class: {class_spec}: {message}"
    return ""


class Instance:
    """One sink instance: the user's object, its plane, and its writes."""

    def __init__(self, class_spec: str, options_json: str, python_path: list[str], virtualenv: str, complete):
        cls, self.plane = _loadable(class_spec, python_path, virtualenv)
        self.plane_bit = _PLANE_BITS[self.plane]
        self.class_spec = class_spec
        if self.plane is DataPlane.ARROW_BATCHES:
            import pyarrow

            self._import_arrow = pyarrow.RecordBatch._import_from_c
        options = json.loads(options_json) if options_json else {}
        try:
            self.sink = cls(**options)
        except Exception as e:  # noqa: BLE001
            raise ValueError(f"{class_spec}({', '.join(options)}) failed: {type(e).__name__}: {e}") from None
        self._complete = complete
        self._loop = loop()

    def _wait(self, coro, timeout):
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout)  # waits without the GIL
        except TimeoutError:
            future.cancel()
            raise

    def open(self) -> None:
        self._wait(self.sink.open(), None)

    def import_arrow(self, array_address: int, schema_address: int, with_metadata: bool = True):
        # Moves the C structs into pyarrow (zero-copy: the buffers stay the exporter's). The
        # host's export puts the six pico_* columns first (docs/arrow.md); include_metadata =
        # false drops them here, zero-copy too.
        batch = self._import_arrow(array_address, schema_address)
        if not with_metadata:
            batch = batch.select(list(range(len(METADATA_COLUMNS), batch.num_columns)))
        return batch

    def submit(self, data, token: int) -> None:
        """Starts one write; its outcome goes to complete(token, status, message, rejections)."""
        self._loop.call_soon_threadsafe(self._start, data, token)

    def _start(self, data, token):
        self._loop.create_task(self._run(data, token))

    async def _run(self, data, token):
        try:
            status, message, rejected = await run_write(self.sink, self.plane, data)
        except BaseException as e:  # noqa: BLE001 - run_write never raises; belt and braces
            status, message, rejected = FATAL, f"{type(e).__name__}: {e}", []
        del data
        self._complete(token, status, message, rejected)

    def close(self, timeout_ms: int) -> str:
        """Awaits close(); returns "" or why it did not finish."""
        try:
            self._wait(self.sink.close(), timeout_ms / 1000.0)
            return ""
        except TimeoutError:
            return f"close() of {self.class_spec} did not finish within close_timeout ({timeout_ms} ms); it was cancelled"
        except BaseException as e:  # noqa: BLE001
            return f"close() of {self.class_spec} failed: {type(e).__name__}: {e}"
