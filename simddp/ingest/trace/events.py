"""One rank's Chrome trace, loaded: its complete events in seconds, and who wrote it.

torch.profiler writes a Chrome trace (``export_chrome_trace``, ``tensorboard_trace_handler``,
plain or ``.gz``): a JSON object whose ``traceEvents`` hold complete events (``"ph": "X"``,
``ts`` and ``dur`` in µs) for CPU ops, ``record_function`` ranges, and on CUDA the kernels
of each stream; ``distributedInfo`` says the rank and world size::

    trace = load_trace("traces/rank0.json")        # InputError (one line) if it is not one
    trace.rank, trace.world_size, trace.device      # (0, 2, 'cpu')
    [e.name for e in trace.events][:2]              # sorted by start, outermost first

Only what the import reads is kept: name, category, start and end in seconds, pid, tid and
args; and, on CUDA, the ``ac2g`` flow arrows (``"ph": "s"`` at a launch call, ``"f"`` at the
kernel it launched), which tie a kernel to its launch where ``args.correlation`` does not. Tensor sizes come from ``Input Dims`` and ``Input type`` (recorded with
``record_shapes=True``) or, for NCCL, from ``In msg nelems`` and ``dtype``:
:func:`nbytes_of` turns either into bytes.
"""
from __future__ import annotations

import gzip
import json
import math
import os
from dataclasses import dataclass, field
from typing import Any

from simddp.errors import InputError, unreadable

# Bytes per element, by the names torch writes: C++ type names in "Input type" (CPU ops,
# record_shapes=True) and c10 ScalarType names in record_param_comms / NCCL kernels' "dtype".
DTYPE_BYTES = {
    "float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "long int": 8, "int": 4,
    "short int": 2, "signed char": 1, "unsigned char": 1, "bool": 1,
    "c10::complex<float>": 8, "c10::complex<double>": 16, "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1,
    "Float": 4, "Double": 8, "Half": 2, "BFloat16": 2, "Long": 8, "Int": 4, "Short": 2,
    "Char": 1, "Byte": 1, "Bool": 1, "ComplexFloat": 8, "ComplexDouble": 16,
    "Float8_e4m3fn": 1, "Float8_e5m2": 1,
}
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


@dataclass(frozen=True)
class Event:
    """One complete event: [start_s, end_s) on thread ``tid`` of process ``pid``."""

    name: str
    cat: str
    start_s: float
    end_s: float
    pid: Any
    tid: Any
    args: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def dur_s(self) -> float:
        return self.end_s - self.start_s

    def contains(self, other: "Event") -> bool:
        return self.start_s <= other.start_s and other.end_s <= self.end_s


@dataclass(frozen=True)
class Flow:
    """One end of an ``ac2g`` flow arrow: ``"s"`` at a launch call on the host, ``"f"`` at
    the kernel on the GPU; both ends share ``id`` (Kineto uses the correlation id)."""

    id: Any
    phase: str
    at_s: float
    pid: Any
    tid: Any


@dataclass(frozen=True)
class RankTrace:
    """One rank's trace: its complete events sorted by (start, longest first)."""

    path: str
    rank: int | None
    world_size: int | None
    backend: str | None
    host: str | None
    events: tuple[Event, ...]
    flows: tuple[Flow, ...] = ()     # ac2g arrows, CUDA only

    @property
    def device(self) -> str:
        """"cuda" when the trace holds GPU activity (kernels, copies), else "cpu"."""
        return "cuda" if any(e.cat in GPU_CATEGORIES for e in self.events) else "cpu"

    @property
    def label(self) -> str:
        return os.path.basename(self.path)


def load_trace(path: str | os.PathLike) -> RankTrace:
    """Read one Chrome trace (``.json`` or ``.json.gz``); InputError if it is not one."""
    path = str(path)
    try:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise unreadable(path, e) from None
    except (UnicodeDecodeError, EOFError) as e:
        raise InputError(f"{path}: cannot read ({e.__class__.__name__}: {e})") from None
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not valid JSON (line {e.lineno}: {e.msg})") from None
    return parse_trace(data, path)


def parse_trace(data: Any, path: str = "trace") -> RankTrace:
    """A RankTrace from the JSON of a Chrome trace (an object with ``traceEvents``, or the
    bare list of events some tools write)."""
    if isinstance(data, list):
        data = {"traceEvents": data}
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise InputError(f"{path}: not a Chrome trace (no \"traceEvents\" list); export it "
                         "with prof.export_chrome_trace(...) or tensorboard_trace_handler")
    events, flows = [], []
    for raw in data["traceEvents"]:
        event = _event(raw)
        if event is not None:
            events.append(event)
        elif isinstance(raw, dict) and raw.get("cat") == "ac2g" and raw.get("ph") in ("s", "f") \
                and _finite(raw.get("ts")) and raw.get("id") is not None:
            flows.append(Flow(raw["id"], raw["ph"], float(raw["ts"]) * 1e-6, raw.get("pid"),
                              raw.get("tid")))
    if not events:
        raise InputError(f"{path}: the trace holds no complete events (\"ph\": \"X\"); was "
                         "the profiler active during the steps?")
    events.sort(key=lambda e: (e.start_s, -e.end_s))
    info = data.get("distributedInfo") if isinstance(data.get("distributedInfo"), dict) else {}
    return RankTrace(path=path, rank=_int_or_none(info.get("rank")),
                     world_size=_int_or_none(info.get("world_size")),
                     backend=info.get("backend"), host=data.get("host_name"),
                     events=tuple(events), flows=tuple(flows))


def _event(raw: Any) -> Event | None:
    if not isinstance(raw, dict) or raw.get("ph") != "X":
        return None
    ts, dur = raw.get("ts"), raw.get("dur", 0.0)
    if not _finite(ts) or not _finite(dur) or dur < 0:
        return None
    args = raw.get("args") if isinstance(raw.get("args"), dict) else {}
    start_s = float(ts) * 1e-6  # Chrome traces count µs
    return Event(str(raw.get("name", "")), str(raw.get("cat", "")), start_s,
                 start_s + float(dur) * 1e-6, raw.get("pid"), raw.get("tid"), args)


def nbytes_of(event: Event, which: int = 0) -> int | None:
    """Bytes of tensor input ``which`` of ``event`` (None if the trace does not say).

    CPU ops recorded with ``record_shapes=True`` carry ``Input Dims`` and ``Input type``;
    NCCL kernels and ``record_param_comms`` carry ``In msg nelems`` and ``dtype``. A
    TensorList (``c10d::allreduce_``) has no recorded dtype: see :func:`numel_of`.
    """
    args = event.args
    if "In msg nelems" in args:
        nelems, size = args.get("In msg nelems"), DTYPE_BYTES.get(str(args.get("dtype")))
        if _finite(nelems) and nelems > 0 and size:
            return int(nelems) * size
        return None
    types = args.get("Input type")
    kind = types[which] if isinstance(types, list) and len(types) > which else None
    size, numel = DTYPE_BYTES.get(str(kind)), numel_of(event, which)
    return None if size is None or not numel else numel * size


def numel_of(event: Event, which: int = 0) -> int | None:
    """Elements of input ``which`` from ``Input Dims``: a shape, or a TensorList's shapes."""
    dims = event.args.get("Input Dims")
    if not isinstance(dims, list) or len(dims) <= which or not isinstance(dims[which], list):
        return None
    shape = dims[which]
    shapes = shape if shape and all(isinstance(s, list) for s in shape) else [shape]
    if not all(isinstance(d, int) for s in shapes for d in s):
        return None
    total = sum(math.prod(s) for s in shapes)
    return total if total > 0 else None


def shape_of(event: Event, which: int = 0) -> tuple[int, ...] | None:
    """The shape of tensor input ``which`` (``Input Dims``), if recorded."""
    dims = event.args.get("Input Dims")
    if isinstance(dims, list) and len(dims) > which and isinstance(dims[which], list) \
            and all(isinstance(d, int) for d in dims[which]):
        return tuple(dims[which])
    return None


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _int_or_none(x: Any) -> int | None:
    return int(x) if isinstance(x, int) and not isinstance(x, bool) else None
