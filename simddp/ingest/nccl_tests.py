"""Read an nccl-tests log (all_reduce_perf, reduce_scatter_perf, all_gather_perf) as data.

What ``all_reduce_perf -b 8 -e 8G -f 2 -g 1`` prints, under mpirun or srun, is a table of
sizes with an out-of-place and an in-place group of columns (time µs, algbw, busbw, #wrong)::

    >>> log = parse_nccl_tests(open("tests/data/nccl-tests/a3mega-2x8xH100-all_reduce.md").read(),
    ...                        "a3mega")                                          # doctest: +SKIP
    >>> log.kind, log.ranks, log.nodes, log.placement, log.rows[17].time_us        # doctest: +SKIP
    ('all_reduce', 16, 2, 'out-of-place', 203.2)

What it reads, and why:

- the kind: the binary's name where the log shows it (the command line, or nccl-tests ≥ 2.14's
  ``# Collective test starting: all_reduce_perf``), else the table itself: redop ``none`` is an
  all-gather; ``sum`` with count = bytes / element size an all-reduce, count = bytes / element /
  ranks a reduce-scatter (nccl-tests prints a sharded kind's count per rank);
- the ranks from the ``#  Rank  N Group … on HOST device …`` lines, the nodes as the distinct
  hosts among them (without those lines: the header's nThread × nGpus, one node);
- a line prefix a launcher adds (mpirun's ``[1,0]<stdout>:``, srun -l's `` 0: ``) is taken
  off, and interleaved lines (``NCCL INFO``, warnings, shell text) are skipped;
- sizes as bytes or with K/M/G suffixes (2^10, 2^20, 2^30);
- the out-of-place time by default (``in_place=True`` for the other): a row whose #wrong in
  the used group is not 0 is refused (N/A only passes where the header says validation: 0).

Anything else is an :class:`~simddp.errors.InputError` with one line (exit 2 at the CLIs).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from simddp.errors import InputError

KINDS = ("all_reduce", "reduce_scatter", "all_gather")
_ELEMENT_BYTES = {"int8": 1, "uint8": 1, "f8e4m3": 1, "f8e5m2": 1, "half": 2, "float16": 2,
                  "bfloat16": 2, "int32": 4, "uint32": 4, "float": 4, "float32": 4,
                  "int64": 8, "uint64": 8, "double": 8, "float64": 8}
_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
# mpirun --tag-output "[1,0]<stdout>:", srun -l " 0: ", some MPIs "[0] "
_PREFIX = re.compile(r"^\s*(?:\[\d+,\d+\]<std(?:out|err)>:|\d+:(?=\s)|\[\d+\](?=\s))")
_RANK = re.compile(r"^#\s*Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device")
_HEADER = re.compile(r"^#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)\b")
_VALIDATION = re.compile(r"validation:\s*(\d+)")
_BINARY = re.compile(r"\b(all_reduce|reduce_scatter|all_gather|alltoall|broadcast|reduce|"
                     r"sendrecv|gather|scatter|hypercube)_perf\b")
_SIZE = re.compile(r"^(\d+)([KMG]?)$")
_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
# size count type redop [root] | time algbw busbw wrong | time algbw busbw wrong
_ROW = re.compile(r"^\s*(\d+[KMG]?)\s+(\d+)\s+([a-z0-9_]+)\s+([a-z_]+)\s+(?:(-?\d+)\s+)?"
                  rf"({_NUMBER})\s+({_NUMBER})\s+({_NUMBER})\s+(\S+)"
                  rf"(?:\s+({_NUMBER})\s+({_NUMBER})\s+({_NUMBER})\s+(\S+))?\s*$")


@dataclass(frozen=True)
class NcclTestsRow:
    """One size of the table: ``bytes`` (the full size, as nccl-tests counts it), ``count``
    (elements, per rank for the sharded kinds), the used group's ``time_us``, ``algbw_gbps``
    and ``busbw_gbps`` (GB/s = 1e9 B/s) and ``wrong`` (its #wrong: '0', or 'N/A')."""

    bytes: int
    count: int
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: str


@dataclass(frozen=True)
class NcclTestsLog:
    """A parsed log: its collective ``kind``, ``ranks`` and ``nodes``, which column group the
    rows hold (``placement``: 'out-of-place' or 'in-place'), the ``rows`` in ascending size,
    and ``source`` (what the caller called the text: a path)."""

    kind: str
    ranks: int
    nodes: int
    rows: tuple[NcclTestsRow, ...]
    in_place_used: bool = False
    source: str = ""
    dtype: str = "float"

    @property
    def placement(self) -> str:
        return "in-place" if self.in_place_used else "out-of-place"


def _strip(line: str) -> str:
    return _PREFIX.sub("", line, count=1).strip()


def _size_bytes(text: str) -> int:
    m = _SIZE.match(text)
    return int(m.group(1)) * _SUFFIX[m.group(2)]


def _kind_of(binary: str | None, redop: str, size: int, count: int, elem: int, ranks: int,
             where: str) -> str:
    if binary is not None:
        if binary not in KINDS:
            raise InputError(f"{where}: a {binary}_perf log; simddp reads all_reduce_perf, "
                             "reduce_scatter_perf and all_gather_perf")
        return binary
    if redop == "none":
        return "all_gather"
    if count * elem == size:
        return "all_reduce"
    if count * elem * ranks == size:
        return "reduce_scatter"
    raise InputError(f"{where}: cannot tell the collective from the table (size {size}, count "
                     f"{count}); keep the all_reduce_perf/reduce_scatter_perf/all_gather_perf "
                     "line in the log")


def parse_nccl_tests(text: str, source: str = "log", in_place: bool = False) -> NcclTestsLog:
    """The log in ``text`` (``source`` names it in messages) as a :class:`NcclTestsLog`."""
    hosts: dict[int, str] = {}
    header = None
    validation = None
    binary = None
    error_column = False   # nccl-tests before 2.10 printed a max error, not a #wrong count
    raw = []
    for number, line in enumerate(text.splitlines(), 1):
        line = _strip(line)
        if not line:
            continue
        if line.startswith("#"):
            if re.search(r"\bbusbw\s+error\b", line):
                error_column = True
            m = _RANK.match(line)
            if m:
                hosts[int(m.group(1))] = m.group(2)
            m = _HEADER.match(line)
            if m:
                header = (int(m.group(1)), int(m.group(2)))
                v = _VALIDATION.search(line)
                validation = int(v.group(1)) if v else None
        m = _BINARY.search(line)
        if m and binary is None and "NCCL INFO" not in line:
            binary = m.group(1)
        if line.startswith("#"):
            continue
        m = _ROW.match(line)
        if m:
            raw.append((number, m))
    if header is None and not hosts:
        raise InputError(f"{source}: not nccl-tests output (no '# nThread … nGpus …' header "
                         "and no '#  Rank  N … on HOST device …' lines)")
    if not raw:
        raise InputError(f"{source}: an nccl-tests log without result rows (size count type "
                         "redop … time algbw busbw #wrong)")
    ranks = len(hosts) if hosts else header[0] * header[1]
    nodes = len(set(hosts.values())) if hosts else 1
    if ranks < 2:
        raise InputError(f"{source}: a log of {ranks} rank; a collective needs at least 2")
    rows = {}
    kind = dtype = None
    for number, m in raw:
        size = _size_bytes(m.group(1))
        count, dtype_here, redop = int(m.group(2)), m.group(3), m.group(4)
        if dtype_here not in _ELEMENT_BYTES:
            raise InputError(f"{source}: line {number}: unknown data type {dtype_here!r}")
        if dtype is not None and dtype_here != dtype:
            raise InputError(f"{source}: line {number}: rows of {dtype} and {dtype_here} in one "
                             "log (nccl-tests -d all); run one data type per log")
        dtype = dtype_here
        here = _kind_of(binary, redop, size, count, _ELEMENT_BYTES[dtype], ranks, source)
        kind = kind or here
        group = m.groups()[9:13] if in_place else m.groups()[5:9]
        if group[0] is None:
            raise InputError(f"{source}: line {number}: no in-place columns to use")
        time_us, algbw, busbw, wrong = float(group[0]), float(group[1]), float(group[2]), group[3]
        checked = validation != 0
        if not error_column and wrong != "0" and not (wrong == "N/A" and not checked):
            what = "unchecked (N/A) although validation was on" if wrong == "N/A" else \
                f"{wrong} wrong elements"
            raise InputError(f"{source}: line {number}: size {size} has {what} "
                             f"({'in' if in_place else 'out-of'}-place); refusing a log with "
                             "failed results")
        if time_us <= 0:
            raise InputError(f"{source}: line {number}: time {time_us} µs is not > 0")
        if size in rows:
            raise InputError(f"{source}: line {number}: size {size} appears twice (two runs "
                             "in one file?); keep one table per log")
        rows[size] = NcclTestsRow(size, count, time_us, algbw, busbw, wrong)
    return NcclTestsLog(kind, ranks, nodes, tuple(rows[n] for n in sorted(rows)),
                        in_place, source, dtype)


def read_nccl_tests(path, in_place: bool = False) -> NcclTestsLog:
    """:func:`parse_nccl_tests` on a file; an unreadable one is an InputError."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror or e})") from None
    return parse_nccl_tests(text, str(path), in_place)
