"""Read nccl-tests and rccl-tests logs as data, the way people publish them.

What ``all_reduce_perf -b 8 -e 8G -f 2 -g 1`` prints, under mpirun or srun, is a table of
sizes with an out-of-place and an in-place group of columns (time µs, algbw, busbw, #wrong)::

    >>> tables = read_tables("tests/data/nccl-tests/a3mega-2x8xH100-all_reduce.md")
    >>> t = tables[0]; t.kind, t.ranks, t.nodes, t.placement, t.rows[17].time_us
    ('all_reduce', 16, 2, 'out-of-place', 203.2)

Logs come pasted into READMEs and issues, cut, prefixed and mixed with other output; what is
read and set aside, and how kind, ranks and nodes are found: docs/FORMATS.md, "nccl-tests
logs". Anything that is not such a log is a one-line :class:`~simddp.errors.InputError`.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from simddp.errors import InputError, unreadable

KINDS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all")
_BINARY_KIND = {"all_reduce": "all_reduce", "reduce_scatter": "reduce_scatter",
                "all_gather": "all_gather", "alltoall": "all_to_all"}
_ELEMENT_BYTES = {"int8": 1, "uint8": 1, "f8e4m3": 1, "f8e5m2": 1, "half": 2, "float16": 2,
                  "bfloat16": 2, "int32": 4, "uint32": 4, "float": 4, "float32": 4,
                  "int64": 8, "uint64": 8, "double": 8, "float64": 8}
_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
# mpirun --tag-output "[1,0]<stdout>:", srun -l " 0: ", some MPIs "[0] "; SkyPilot's
# "(head, rank=0, pid=3808) " before them
_PREFIX = re.compile(r"^\s*(?:\([^)]*\)\s*)?(?:\[\d+,\d+\]<std(?:out|err)>:|\d+:(?=\s)|"
                     r"\[\d+\](?=\s))")
_RANK = re.compile(r"^#?\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device")
_HEADER = re.compile(r"^#?\s*nThread\s+(\d+)\s+nGpus\s+(\d+)\b")
_VALIDATION = re.compile(r"validation:\s*(\d+)")
_BINARY = re.compile(r"\b(all_reduce|reduce_scatter|all_gather|alltoall|broadcast|reduce|"
                     r"sendrecv|gather|scatter|hypercube)_perf\b")
_SIZE = re.compile(r"^(\d+)([KMG]?)$")
_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
# size count type [redop] [root] | time algbw busbw wrong | time algbw busbw wrong
_ROW = re.compile(r"^\s*(\d+[KMG]?)\s+(\d+)\s+([a-z][a-z0-9_]*)\s+(?:([a-z_]+)\s+)?"
                  rf"(?:(-?\d+)\s+)?({_NUMBER})\s+({_NUMBER})\s+({_NUMBER})\s+(\S+)"
                  rf"(?:\s+({_NUMBER})\s+({_NUMBER})\s+({_NUMBER})\s+(\S+))?\s*$")
# A line that separates one run from the next in a pasted log (markdown, egrep, shell), and
# one that names the next run's nodes ("====== 2-node ======", "#### 4 nodes").
_SEPARATOR = re.compile(r"^(```|={3,}|-{3,}|#{1,6}\s|\$\s|\S*[#$]\s*\w*_perf)")
_NODES_LINE = re.compile(r"^[\W_]*(\d+)[- ]nodes?[\W_]*$", re.IGNORECASE)


@dataclass(frozen=True)
class NcclTestsRow:
    """One size of the table: ``bytes`` the full size, ``count`` per rank for the sharded
    kinds, the used group's time and bandwidths, ``wrong`` its #wrong ('0' or 'N/A')."""

    bytes: int
    count: int
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: str


@dataclass(frozen=True)
class NcclTestsLog:
    """One table of a log, its ``rows`` in ascending size; ``source`` is the caller's name
    for the text ("#2" for its second table), ``notes`` what was skipped or inferred."""

    kind: str
    ranks: int
    nodes: int
    rows: tuple[NcclTestsRow, ...]
    in_place_used: bool = False
    source: str = ""
    dtype: str = "float"
    notes: tuple[str, ...] = ()

    @property
    def placement(self) -> str:
        return "in-place" if self.in_place_used else "out-of-place"

    @property
    def peak_busbw_gbps(self) -> float:
        """The highest busbw the table prints: the figure the log itself supports."""
        return max(r.busbw_gbps for r in self.rows)


@dataclass
class _Table:
    """A table being read: its rows' matches and what the lines before it said."""

    rows: list
    binary: str | None
    hosts: dict[int, str]
    header: tuple[int, int] | None
    validation: int | None
    error_column: bool
    nodes: int | None = None   # what a separator line before the table said


def _strip(line: str) -> str:
    return _PREFIX.sub("", line, count=1).strip()


def _size_bytes(text: str) -> int:
    m = _SIZE.match(text)
    return int(m.group(1)) * _SUFFIX[m.group(2)]


def _tables(text: str) -> list[_Table]:
    """The log's tables in order, each with the context its lines set."""
    tables: list[_Table] = []
    hosts: dict[int, str] = {}
    header = validation = binary = nodes = None
    error_column = False
    current: _Table | None = None
    for number, raw_line in enumerate(text.splitlines(), 1):
        line = _strip(raw_line)
        if not line:
            continue
        m = _ROW.match(line)
        if m and not line.startswith("#"):
            size = _size_bytes(m.group(1))
            last = max((r[1] for r in current.rows), default=0) if current else 0
            if current is None or (size and last and size <= last):   # sizes start again
                current = _Table([], binary, dict(hosts), header, validation, error_column,
                                 nodes)
                tables.append(current)
                nodes = None
            current.rows.append((number, size, m))
            continue
        ends_table = current is not None and current.rows
        if re.search(r"\bbusbw\s+error\b", line):
            error_column = True
        rank = _RANK.match(line)
        if rank:
            if ends_table or (hosts and int(rank.group(1)) <= max(hosts)):
                hosts = {}   # a new device block: a new run
            hosts[int(rank.group(1))] = rank.group(2)
        head = _HEADER.match(line)
        if head:
            if ends_table:
                hosts = {}
            header = (int(head.group(1)), int(head.group(2)))
            v = _VALIDATION.search(line)
            validation = int(v.group(1)) if v else None
        found = _BINARY.search(line)
        if found and "NCCL INFO" not in line:
            binary = found.group(1)
        named = _NODES_LINE.match(line)
        if named:
            nodes = int(named.group(1))
        if ends_table and (rank or head or found or named or _SEPARATOR.match(line)):
            current = None
    return tables


def _ranks_from_rows(kind: str, rows: list[tuple[int, int, re.Match]]) -> int | None:
    """The rank count busbw/algbw pins (2(n−1)/n for an all-reduce, (n−1)/n for the others):
    at 0.01 GB/s each row allows a range of n; the one integer every row allows, else None."""
    low, high = 2.0, float("inf")
    for _, _, m in rows:
        algbw, busbw = float(m.group(7)), float(m.group(8))
        if algbw <= 0.01:
            continue
        for ratio, bound in (((busbw - 0.005) / (algbw + 0.005), "low"),
                             ((busbw + 0.005) / (algbw - 0.005), "high")):
            gap = (2.0 - ratio) / 2.0 if kind == "all_reduce" else 1.0 - ratio
            n = float("inf") if gap <= 0 else 1.0 / gap
            if bound == "low":
                low = max(low, n)
            else:
                high = min(high, n)
    candidates = range(math.ceil(low), math.floor(high) + 1) if high < float("inf") else ()
    return candidates[0] if len(candidates) == 1 else None


def _kind_of(binary: str | None, redop: str | None, size: int, count: int, elem: int,
             where: str) -> str:
    if binary is not None:
        if binary not in _BINARY_KIND:
            raise InputError(f"{where}: a {binary}_perf log; simddp reads all_reduce_perf, "
                             "reduce_scatter_perf, all_gather_perf and alltoall_perf")
        return _BINARY_KIND[binary]
    if redop in (None, "none"):
        return "all_gather"
    if count * elem == size:
        return "all_reduce"
    return "reduce_scatter"


def _read_table(t: _Table, source: str, in_place: bool, ranks: int | None,
                nodes: int | None) -> NcclTestsLog:
    notes = []
    number0, _, m0 = t.rows[0]
    dtype = m0.group(3)
    if dtype not in _ELEMENT_BYTES:
        raise InputError(f"{source}: line {number0}: unknown data type {dtype!r}")
    elem = _ELEMENT_BYTES[dtype]
    zero = [r for r in t.rows if r[1] == 0]
    rows = [r for r in t.rows if r[1] > 0]
    if zero:
        notes.append(f"skipped {len(zero)} row(s) of size 0 (a per-rank count rounded down "
                     "to 0)")
    if not rows:
        raise InputError(f"{source}: an nccl-tests table without rows of size > 0")
    _, size1, m1 = rows[0]
    kind = _kind_of(t.binary, m1.group(4), size1, int(m1.group(2)), elem, source)
    n_ranks, n_nodes = _world(t, kind, rows, source, ranks, nodes, notes)
    if kind == "reduce_scatter" and t.binary is None and \
            int(m1.group(2)) * elem * n_ranks != size1:
        raise InputError(f"{source}: cannot tell the collective from the table (size "
                         f"{size1}, count {m1.group(2)}); keep the all_reduce_perf/"
                         "reduce_scatter_perf/all_gather_perf line in the log")
    out = {}
    for number, size, m in rows:
        if m.group(3) != dtype:
            raise InputError(f"{source}: line {number}: rows of {dtype} and {m.group(3)} in "
                             "one table (nccl-tests -d all); run one data type per log")
        group = m.groups()[9:13] if in_place else m.groups()[5:9]
        if group[0] is None:
            raise InputError(f"{source}: line {number}: no in-place columns to use")
        time_us, algbw, busbw, wrong = float(group[0]), float(group[1]), float(group[2]), group[3]
        checked = t.validation not in (0, None)   # N/A passes where validation was off
        if not t.error_column and wrong != "0" and not (wrong == "N/A" and not checked):
            what = "unchecked (N/A) although validation was on" if wrong == "N/A" else \
                f"{wrong} wrong elements"
            raise InputError(f"{source}: line {number}: size {size} has {what} "
                             f"({'in' if in_place else 'out-of'}-place); refusing a log with "
                             "failed results")
        if time_us <= 0:
            raise InputError(f"{source}: line {number}: time {time_us} µs is not > 0")
        if size in out:
            raise InputError(f"{source}: line {number}: size {size} appears twice in one table")
        out[size] = NcclTestsRow(size, int(m.group(2)), time_us, algbw, busbw, wrong)
    return NcclTestsLog(kind, n_ranks, n_nodes, tuple(out[n] for n in sorted(out)), in_place,
                        source, dtype, tuple(notes))


def _world(t: _Table, kind: str, rows: list, source: str, ranks: int | None,
           nodes: int | None, notes: list[str]) -> tuple[int, int]:
    """(ranks, nodes) of a table and where they came from."""
    from_rows = _ranks_from_rows(kind, rows)
    if ranks is not None:
        n = ranks
        if from_rows not in (None, ranks):
            notes.append(f"--ranks {ranks}, though busbw/algbw reads {from_rows}")
    elif t.hosts:
        n = max(t.hosts) + 1
        if from_rows not in (None, n):
            notes.append(f"{n} ranks from the device lines, though busbw/algbw reads "
                         f"{from_rows}")
    elif from_rows is not None:
        n = from_rows
        notes.append(f"{n} ranks from busbw/algbw (the log lists no devices)")
    elif t.header is not None and t.header[0] * t.header[1] >= 2:
        n = t.header[0] * t.header[1]
        notes.append(f"{n} ranks from the header's nThread x nGpus")
    else:
        raise InputError(f"{source}: cannot tell the rank count (no device lines, and "
                         "busbw/algbw does not pin it); give it: --ranks N [--nodes M]")
    if n < 2:
        raise InputError(f"{source}: a log of {n} rank; a collective needs at least 2")
    if nodes is not None:
        m = nodes
    elif t.hosts and len(t.hosts) == n:
        m = len(set(t.hosts.values()))
    elif t.nodes is not None:
        m = t.nodes
        notes.append(f"{m} node(s) from the line before the table")
    else:
        m = 1
        notes.append("the nodes are not in the log: counted as 1")
    if n % m:
        raise InputError(f"{source}: {n} ranks do not split over {m} nodes")
    return n, m


def parse_tables(text: str, source: str = "log", in_place: bool = False,
                 ranks: int | None = None, nodes: int | None = None) -> list[NcclTestsLog]:
    """Every table of the log in ``text`` (``source`` names it in messages), in order;
    ``ranks``/``nodes``: the world, where the log does not say (they apply to every table)."""
    tables = [t for t in _tables(text) if t.rows]
    if not tables:
        raise InputError(f"{source}: not an nccl-tests log (no result rows: size count type "
                         "… time algbw busbw #wrong)")
    names = [source] if len(tables) == 1 else [f"{source}#{i + 1}" for i in range(len(tables))]
    return [_read_table(t, name, in_place, ranks, nodes) for t, name in zip(tables, names)]


def parse_nccl_tests(text: str, source: str = "log", in_place: bool = False,
                     ranks: int | None = None, nodes: int | None = None,
                     kind: str | None = None) -> NcclTestsLog:
    """The log's one table of ``kind`` (any kind where None): where several answer, the one
    with the most sizes (the later on a tie), and a note says which (:func:`choose`)."""
    return choose(parse_tables(text, source, in_place, ranks, nodes), kind, source)


def choose(tables: list[NcclTestsLog], kind: str | None = None, where: str = "log",
           ranks: int | None = None) -> NcclTestsLog:
    """The table of ``kind`` (and ``ranks``) to use among ``tables``: the one with the most
    sizes, the later on a tie; a note names it and the others."""
    fits = [t for t in tables if (kind is None or t.kind == kind)
            and (ranks is None or t.ranks == ranks)]
    if not fits:
        have = ", ".join(sorted({f"{t.kind} at {t.ranks} ranks" for t in tables}))
        want = " at ".join(str(x) for x in (kind or "a table", ranks and f"{ranks} ranks") if x)
        raise InputError(f"{where}: no {want} in the log (it has {have})")
    kinds = {(t.kind, t.ranks) for t in fits}
    if len(kinds) > 1 and (kind is None or ranks is None):
        have = ", ".join(sorted(f"{k} at {r} ranks" for k, r in kinds))
        raise InputError(f"{where}: several tables ({have}); say which: --kind and/or "
                         "--world-size")
    best = max(enumerate(fits), key=lambda it: (len(it[1].rows), it[0]))[1]
    if len(fits) == 1:
        return best
    others = ", ".join(t.source for t in fits if t is not best)
    return replace(best, notes=best.notes + (f"used {best.source} ({len(best.rows)} sizes) of "
                                             f"{len(fits)} {best.kind} tables at "
                                             f"{best.ranks} ranks; not {others}",))


def read_tables(path, in_place: bool = False, ranks: int | None = None,
                nodes: int | None = None) -> list[NcclTestsLog]:
    """:func:`parse_tables` on a file; an unreadable one is an InputError."""
    return parse_tables(_read(path), str(path), in_place, ranks, nodes)


def read_nccl_tests(path, in_place: bool = False, ranks: int | None = None,
                    nodes: int | None = None, kind: str | None = None) -> NcclTestsLog:
    """:func:`parse_nccl_tests` on a file; an unreadable one is an InputError."""
    return parse_nccl_tests(_read(path), str(path), in_place, ranks, nodes, kind)


def _read(path) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError as e:
        raise unreadable(path, e) from None
