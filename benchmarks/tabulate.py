#!/usr/bin/env python3
"""Turns the raw outputs of side_by_side.sh into benchmarks/results/side_by_side.md.

Raw files are <raw>/<impl>-<transport>-<coll>-np<N>.txt, impl in {tutti, ompi}; each holds one or more
sweeps in nccl-tests' format; a size swept more than once keeps its fastest row (this host is shared,
and a rank descheduled for a time slice can spoil one sweep). The out-of-place columns are compared (time = column 6,
busbw = column 8), as the MPI program passes separate buffers; but Broadcast, whose MPI call has one buffer: there
Tutti's in-place columns (time = column 10, busbw = column 12; out of place, the root also copies its input to its
output, a copy MPI_Bcast does not make). After the summary, a count of the rows at or above 1.0 (in all, by rank
count, collective and path) and the same count with each side's median sweep in place of its fastest, then every
row below 1.0 with the fastest and slowest sweep of each side and the limit
measured on the host (host-limits.txt) it is held against: within a node the single-copy floor under Open MPI's
time, for a 2-rank Broadcast of a few bytes one cache line's or one TCP hop's trip, and over sockets from 1 MiB the
call's bytes through loopback TCP at the rate of a stream on every core.
With RECHECK_MD (benchmarks/recheck_below.py's output for the rows below of this same run), each row below also shows
what measuring it again found.
usage: tabulate.py RAW_DIR HEADER_FILE OUT_MD [RECHECK_MD]
"""
import os
import re
import sys

COLLS = [("allreduce", "AllReduce"), ("allgather", "AllGather"), ("reducescatter", "ReduceScatter"),
         ("broadcast", "Broadcast"), ("alltoall", "AlltoAll")]
PAIRS = [("shm", "tutti", "shm", "ompi", "shm"), ("net", "tutti", "socket", "ompi", "tcp")]
KEY_SIZES = [8, 64 << 10, 1 << 20, 16 << 20, 256 << 20]


def parse(path, in_place=False, spread=None, samples=None):
    """size -> (time_us, busbw, count) of the out-of-place (or in-place) columns; {} when the file is missing.
    With `spread` (a dict), also size -> (fastest, slowest) time over the sweeps; with `samples`, size -> every sweep's
    time."""
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
            if samples is not None:
                samples.setdefault(size, []).append(row[0])
            if spread is not None:
                lo, hi = spread.get(size, (row[0], row[0]))
                spread[size] = (min(lo, row[0]), max(hi, row[0]))
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


def limits(raw):
    """name -> value of the host's limits measured before the sweep (host-limits.txt: "limit: NAME VALUE UNIT")."""
    out = {}
    path = os.path.join(raw, "host-limits.txt")
    if os.path.exists(path):
        for line in open(path):
            f = line.split()
            if len(f) >= 3 and f[0] == "limit:":
                try:
                    out[f[1]] = float(f[2])
                except ValueError:
                    pass
    return out


# Inside a node Open MPI's vader moves a message past its 4 KiB eager limit as a first fragment of up to 32 KiB
# through its FIFO (btl_vader_rndv_eager_limit) and the rest with one copy out of the peer's buffer
# (process_vm_readv); Tutti reads the peers' buffers where its init log says "single-copy" (thresholds that depend on
# what a read costs on the host), and elsewhere copies twice through FIFOs that stay in cache. The messages a rank
# receives from other processes for a call of `size` bytes (nccl-tests' size: AllGather the output, AlltoAll a rank's
# input, Broadcast the buffer): (count, bytes each).
SINGLE_COPY = {"allgather": lambda s, n: (n - 1, s // n), "alltoall": lambda s, n: (n - 1, s // n),
               "broadcast": lambda s, n: (1, s)}
VADER_FIRST_FRAGMENT = 32 << 10
# Within a node a 2-rank Broadcast of one cache line a call is a line handed from the root's core to the receiver's.
CACHE_LINE_BYTES = 64
# Over sockets a 2-rank Broadcast of up to this many bytes is one message a call, one segment or two over loopback:
# a call sent as soon as it is posted costs a hop.
TCP_HOP_MAX_BYTES = 16 << 10
# Over sockets, from this size a call's time is mostly its bytes: every byte that leaves a rank crosses the kernel's
# TCP path over loopback, held against the host's streams on every core at once (tcp_loopback_stream_all_cores).
TCP_STREAM_MIN_BYTES = 1 << 20


def wire_bytes(coll, size, np):
    """The fewest bytes all ranks together send to other ranks in one call of `size` (nccl-tests' size: the total
    buffer of AllGather, ReduceScatter and AlltoAll, the message of AllReduce and Broadcast): each rank's share of the
    result reaches n - 1 others, twice for AllReduce (reduce-scatter, then all-gather, 2 (n-1)/n of the message a
    rank, the least a bandwidth-optimal AllReduce sends)."""
    return (2 if coll == "allreduce" else 1) * (np - 1) * size


def tcp_floor(coll, size, np, lim):
    """The time the call's fewest bytes take through loopback TCP at the rate of every core streaming at once (us),
    a reference both libraries are held against over sockets (not a bound: back-to-back calls have beaten it), or
    None."""
    rate = lim.get("tcp_loopback_stream_all_cores")
    if size < TCP_STREAM_MIN_BYTES or not rate:
        return None
    return wire_bytes(coll, size, np) / (rate * 1e9) * 1e6


def copy_floor(coll, size, np, lim, cores):
    """The time the ranks' reads from one another take at the host's measured cross-memory-attach rate, each message
    less its first fragment, the readers sharing the cores: a floor Open MPI's vader does not go below (us), or None."""
    if coll not in SINGLE_COPY:
        return None
    count, each = SINGLE_COPY[coll](size, np)
    read = count * max(0, each - VADER_FIRST_FRAGMENT)
    rate = lim.get("cma_read_1MiB_one_core" if read <= 4 << 20 else "cma_read_16MiB_one_core")
    if not read or not rate:
        return None
    readers = np - 1 if coll == "broadcast" else np
    return readers * read / (min(readers, cores) * rate * 1e9) * 1e6


def median(v):
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2


def counts(data, nps, samples):
    """The section counting the compared rows at or above 1.0: in all, by rank count, collective and path; then the
    same count with each side's median sweep instead of its fastest, and the rows that it puts below 1.0."""
    tally = {}  # key -> [at or above, compared]
    by_median, median_below = [0, 0], []
    for coll, title in COLLS:
        for np in nps:
            for _, timpl, ttr, oimpl, otr in PAIRS:
                t, o = data.get(f"{timpl}-{ttr}-{coll}-np{np}", {}), data.get(f"{oimpl}-{otr}-{coll}-np{np}", {})
                for s in sorted(set(t) & set(o)):
                    r = ratio(t[s], o[s])
                    if r in ("empty", "-"):
                        continue
                    for key in ("all", f"{np} ranks", title, "within a node (shm)" if ttr == "shm" else "over sockets"):
                        c = tally.setdefault(key, [0, 0])
                        c[0] += float(r) >= 1.0
                        c[1] += 1
                    tm = median(samples[f"{timpl}-{ttr}-{coll}-np{np}"][s])
                    om = median(samples[f"{oimpl}-{otr}-{coll}-np{np}"][s])
                    rm = f"{om / tm:.2f}"
                    by_median[0] += float(rm) >= 1.0
                    by_median[1] += 1
                    if float(rm) < 1.0:
                        median_below.append(f"{title} {np} ranks {ttr} {human(s)} {rm}")
    if "all" not in tally:
        return []
    order = [f"{np} ranks" for np in nps] + [t for _, t in COLLS] + ["within a node (shm)", "over sockets"]
    parts = [f"{k}: {tally[k][0]} of {tally[k][1]}" for k in order if k in tally]
    return ["## Count", "",
            f"{tally['all'][0]} of the {tally['all'][1]} compared rows of the detailed tables are at or above 1.0 "
            "(" + "; ".join(parts) + ").", "",
            f"With each side's median sweep instead of its fastest (the same raw outputs): {by_median[0]} of "
            f"{by_median[1]} at or above 1.0" + (": below, " + "; ".join(median_below) if median_below else "") +
            ". The tables keep the fastest sweep: other work on a shared host can only slow a sweep down. The "
            "median shows how much that choice moves the count.", ""]


def read_recheck(path):
    """(collective, ranks, path, size text) -> (ratio, p, verdict) of benchmarks/recheck_below.py's table; {} without
    the file."""
    out = {}
    if not path or not os.path.exists(path):
        return out
    text = open(path).read()
    rounds = re.search(r"(\d+) rounds a row", text)
    out["rounds"] = rounds.group(1) if rounds else "several"
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 9 and cells[1].isdigit():
            out[(cells[0], int(cells[1]), cells[2], cells[3])] = (cells[6], cells[7], cells[8])
    return out


def below(data, spreads, lim, nps, recheck=None):
    """The section listing every compared row where Tutti is slower, with the spread of each side's sweeps and, where
    it applies, the copy floor both are bound by."""
    cores = os.cpu_count() or 1
    rows, overlap, verdicts = [], 0, {}
    for coll, title in COLLS:
        for np in nps:
            for _, timpl, ttr, oimpl, otr in PAIRS:
                tk, ok = f"{timpl}-{ttr}-{coll}-np{np}", f"{oimpl}-{otr}-{coll}-np{np}"
                t, o = data.get(tk, {}), data.get(ok, {})
                for s in sorted(set(t) & set(o)):
                    a, b = t[s], o[s]
                    r = ratio(a, b)
                    if r in ("empty", "-") or float(r) >= 1.0:
                        continue
                    (tlo, thi), (olo, ohi) = spreads[tk][s], spreads[ok][s]
                    within = tlo <= ohi
                    overlap += within
                    line = (lim.get("shm_cacheline_one_way")
                            if ttr == "shm" and coll == "broadcast" and np == 2 and s <= CACHE_LINE_BYTES else None)
                    if line:
                        bound = f"line {line:.2f} us: Tutti {tlo / line:.2f}x, Open MPI {olo / line:.2f}x"
                    elif ttr == "shm":
                        floor = copy_floor(coll, s, np, lim, cores)
                        bound = (f"copy {floor:.0f} us: Tutti {tlo / floor:.2f}x, Open MPI {olo / floor:.2f}x"
                                 if floor else "-")
                    else:
                        hop = (lim.get("tcp_loopback_one_way_polling")
                               if coll == "broadcast" and np == 2 and s <= TCP_HOP_MAX_BYTES else None)
                        stream = tcp_floor(coll, s, np, lim)
                        bound = (f"hop {hop:.1f} us: Tutti {tlo / hop:.2f}x, Open MPI {olo / hop:.2f}x" if hop
                                 else f"tcp {stream:.0f} us: Tutti {tlo / stream:.2f}x, Open MPI {olo / stream:.2f}x"
                                 if stream else "-")
                    row = (f"| {title} | {np} | {ttr} / {otr} | {human(s)} | {tlo:.1f} / {thi:.1f} | "
                           f"{olo:.1f} / {ohi:.1f} | {r} | {'yes' if within else 'no'} | {bound} |")
                    if recheck is not None:
                        again = recheck.get((title, np, ttr, human(s)))
                        row += (f" {again[0]}, p {again[1]}: {again[2]} |" if again else " not measured |")
                        if again:
                            verdicts[again[2]] = verdicts.get(again[2], 0) + 1
                    rows.append(row)
    lines = ["## Rows below Open MPI", ""]
    if not rows:
        return lines + ["None: every compared row is at or above 1.0.", ""]
    lines += [f"{len(rows)} rows below 1.0. In {overlap} of them the two sides' sweeps overlap: Tutti's fastest sweep "
              "is no slower than Open MPI's slowest, so this run does not separate the two there. Single-copy floor: "
              "the bytes every rank reads from the other processes, each message less its first 32 KiB, at the "
              "cross-memory-attach rate measured before the sweep (cma_read_1MiB_one_core up to 4 MiB a rank, "
              "cma_read_16MiB_one_core past it), the readers sharing the cores. Open MPI's vader moves those bytes "
              "that way (the first 32 KiB of a message through its FIFO), so it does not go below the floor; Tutti reads them only where its init log says single-copy, and elsewhere "
              "copies twice through FIFOs in cache, which may. Within a node, Broadcast on 2 ranks up to 64 B: one "
              "cache line handed from one core to the other (shm_cacheline_one_way), a reference as the hop is. Over "
              "sockets, Broadcast on 2 ranks up to 16 KiB (one message a call): one TCP hop over loopback with the receiver polling (tcp_loopback_one_way_polling, "
              "measured before the sweep), the trip of one segment: the sender's system call and, over loopback, the "
              "kernel's receive path on the sender's core. A reference rather than a bound: on a quiet host both "
              "libraries ran 6-9 us a call at 1.3-1.5 segments a call, and Open MPI 3.5-3.9 us only with 4 to 50 "
              "calls' messages in a segment, its receiver behind its root (benchmarks/results/socket_regimes.md). "
              "Over sockets from 1 MiB: the fewest bytes all ranks together send one another in a call ((n-1) x "
              "size, 2 (n-1) x size for AllReduce) at the rate loopback TCP moved with a stream on every core at "
              "once (tcp_loopback_stream_all_cores): every byte crosses the kernel's TCP path on these cores. A "
              "reference rather than a bound: calls of 1 to 4 MiB back to back have run below it, both libraries' "
              "(Broadcast on 2 ranks at 1 MiB at 0.66-0.70x on one host), where the stream moves 128 MiB a "
              "connection in 1 MiB writes. The multiples show where each ran against it.",
              ""]
    if recheck is not None:
        lines += [f"The last column: the row measured again after the sweep, {recheck.get('rounds')} interleaved runs a side "
                  "(benchmarks/recheck_below.py, benchmarks/results/side_by_side_recheck.md): the ratio of the medians, "
                  "the p-value of the Mann-Whitney U test of the two sets of runs, the verdict at p < 0.05. Of the "
                  f"{len(rows)}: Tutti slower in {verdicts.get('Tutti slower', 0)}, faster in {verdicts.get('Tutti faster', 0)}, "
                  f"not separated in {verdicts.get('not separated', 0)}.", ""]
    lines += ["| collective | ranks | path | size | Tutti us, fastest / slowest sweep | Open MPI us, fastest / slowest "
              "| ratio | sweeps overlap | measured floor |" + (" measured again |" if recheck is not None else ""),
              "|---|---:|---|---:|---:|---:|---:|---|---|" + ("---|" if recheck is not None else "")]
    return lines + rows + [""]


def main():
    raw, header, out = sys.argv[1:4]
    recheck = read_recheck(sys.argv[4]) if len(sys.argv) > 4 else None
    data, spreads, samples = {}, {}, {}
    for name in os.listdir(raw):
        if name.endswith(".txt") and (name.startswith("tutti-") or name.startswith("ompi-")):
            # MPI_Bcast's one buffer against Tutti's in-place Broadcast (the module docstring).
            in_place = name.startswith("tutti-") and "-broadcast-" in name
            spreads[name[:-4]], samples[name[:-4]] = {}, {}
            data[name[:-4]] = parse(os.path.join(raw, name), in_place, spreads[name[:-4]], samples[name[:-4]])
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
    lines += counts(data, nps, samples)
    lines += below(data, spreads, limits(raw), nps, recheck)

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
