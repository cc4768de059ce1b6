#!/usr/bin/env python3
"""Turns the raw outputs of side_by_side.sh into benchmarks/results/side_by_side.md.

Raw files are <raw>/<impl>-<transport>-<coll>-np<N>.txt, impl in {tutti, ompi}; each holds one or more
sweeps in nccl-tests' format; a size swept more than once keeps its fastest row (this host is shared,
and a rank descheduled for a time slice can spoil one sweep). The out-of-place columns are compared (time = column 6,
busbw = column 8), as the MPI program passes separate buffers; but Broadcast, whose MPI call has one buffer: there
Tutti's in-place columns (time = column 10, busbw = column 12; out of place, the root also copies its input to its
output, a copy MPI_Bcast does not make).
usage: tabulate.py RAW_DIR HEADER_FILE OUT_MD
"""
import os
import sys

COLLS = [("allreduce", "AllReduce"), ("allgather", "AllGather"), ("reducescatter", "ReduceScatter"),
         ("broadcast", "Broadcast"), ("alltoall", "AlltoAll")]
PAIRS = [("shm", "tutti", "shm", "ompi", "shm"), ("net", "tutti", "socket", "ompi", "tcp")]
KEY_SIZES = [8, 64 << 10, 1 << 20, 16 << 20, 256 << 20]


def parse(path, in_place=False):
    """size -> (time_us, busbw, count) of the out-of-place (or in-place) columns; {} when the file is missing."""
    t_col, bw_col = (9, 11) if in_place else (5, 7)
    rows = {}
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for line in f:
            fields = line.split()
            if len(fields) <= bw_col or line.lstrip().startswith("#") or not fields[0].isdigit():
                continue
            try:
                size, row = int(fields[0]), (float(fields[t_col]), float(fields[bw_col]), int(fields[1]))
            except ValueError:
                continue
            # A size measured by several sweeps (repeats) keeps its fastest one.
            if size not in rows or row[0] < rows[size][0]:
                rows[size] = row
    return rows


def human(size):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} B"


def cell(row):
    return ("fail", "fail") if row is None else (f"{row[0]:.1f}", f"{row[1]:.3f}")


def empty(row):
    """A call with no element per rank (8 B of AllGather on 4 ranks): it moves nothing, and its time is the timer's
    resolution; such rows are listed but not compared."""
    return row is not None and row[2] == 0


def ratio(a, b):
    """Speed of Tutti relative to Open MPI for the same bytes: OMPI time / Tutti time (>1: Tutti faster)."""
    if empty(a) or empty(b):
        return "empty"
    if a is None or b is None or a[0] <= 0:
        return "-"
    return f"{b[0] / a[0]:.2f}"


def main():
    raw, header, out = sys.argv[1:4]
    data = {}
    for name in os.listdir(raw):
        if name.endswith(".txt"):
            # MPI_Bcast's one buffer against Tutti's in-place Broadcast (the module docstring).
            in_place = name.startswith("tutti-") and "-broadcast-" in name
            data[name[:-4]] = parse(os.path.join(raw, name), in_place)
    nps = sorted({int(k.rsplit("np", 1)[1]) for k in data if "np" in k})
    lines = [open(header).read().rstrip(), ""]

    lines += ["## Summary", "",
              "Ratio = Open MPI time / Tutti time at the same size (equal to the busbw ratio): above 1, Tutti "
              "is faster. 8 B compares latency; the other sizes compare busbw. An empty call (no element per rank: "
              "8 B of AllGather, ReduceScatter or AlltoAll on 4 ranks, 8 and 16 B on 8) moves nothing and is not compared.", ""]
    lines.append("| collective | ranks | path | " + " | ".join(human(s) for s in KEY_SIZES) + " |")
    lines.append("|---|---|---|" + "---|" * len(KEY_SIZES))
    for coll, title in COLLS:
        for np in nps:
            for _, timpl, ttr, oimpl, otr in PAIRS:
                t = data.get(f"{timpl}-{ttr}-{coll}-np{np}", {})
                o = data.get(f"{oimpl}-{otr}-{coll}-np{np}", {})
                cells = []
                for s in KEY_SIZES:
                    a, b = t.get(s), o.get(s)
                    if empty(a) or empty(b):
                        cells.append("empty call")
                    elif s == 8:
                        cells.append(f"{a[0]:.1f} / {b[0]:.1f} us" if a and b else "-")
                    else:
                        cells.append(f"{a[1]:.2f} / {b[1]:.2f} GB/s ({ratio(a, b)})" if a and b else "-")
                lines.append(f"| {title} | {np} | Tutti {ttr} / OMPI {otr} | " + " | ".join(cells) + " |")
    lines += ["", "(8 B: time Tutti / Open MPI; other sizes: busbw Tutti / Open MPI, ratio in parentheses.)", ""]

    for coll, title in COLLS:
        for np in nps:
            lines += [f"## {title}, {np} ranks", ""]
            lines.append("| size | Tutti shm us | Tutti shm busbw | OMPI shm us | OMPI shm busbw | ratio "
                         "| Tutti socket us | Tutti socket busbw | OMPI tcp us | OMPI tcp busbw | ratio |")
            lines.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
            sets = [data.get(f"{i}-{tr}-{coll}-np{np}", {}) for _, ti, tt, oi, ot in PAIRS
                    for i, tr in ((ti, tt), (oi, ot))]
            sizes = sorted(set().union(*[d.keys() for d in sets]))
            for s in sizes:
                ts, os_, tn, on = (d.get(s) for d in sets)
                lines.append(f"| {human(s)} | " + " | ".join(cell(ts)) + " | " + " | ".join(cell(os_)) +
                             f" | {ratio(ts, os_)} | " + " | ".join(cell(tn)) + " | " + " | ".join(cell(on)) +
                             f" | {ratio(tn, on)} |")
            lines.append("")
    with open(out, "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
