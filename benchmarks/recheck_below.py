#!/usr/bin/env python3
"""Measures again, one at a time, every row that benchmarks/results/side_by_side.md lists below 1.0.

A side-by-side row keeps the fastest of the sweeps of each side (three to five); where the two sides' sweeps overlap, that one
run does not say which library is faster. This tool runs each such row (collective, ranks, path, size) again in
ROUNDS interleaved pairs, Tutti then Open MPI in one round and the other way round in the next, with the calls and
warm-up of the row's segment in side_by_side.sh, and compares the two sets of per-call times:
  - the medians and the spread of each side, and the ratio of the medians (Open MPI / Tutti: above 1, Tutti faster);
  - the exact two-sided Mann-Whitney U test of the two sets (no distribution assumed): p < 0.05 and a ratio below 1
    is a row where Tutti is slower; p < 0.05 and above 1, faster; otherwise the row's two libraries are not separated
    by this many rounds on this host.
Writes benchmarks/results/side_by_side_recheck.md and the raw outputs under benchmarks/results/raw/recheck/.

usage: benchmarks/recheck_below.py BUILD_DIR [ROUNDS]     (ROUNDS: 7 by default, 4 to 10)
   ROWS="AllReduce/4/socket/64 B;..." takes those rows instead of the file's list; OUT=NAME writes
   benchmarks/results/NAME.md and raw/NAME/ instead (a recheck of a few rows beside the full one).
"""
import itertools
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "results")
TOOL = {"AllReduce": ("all_reduce", "allreduce"), "AllGather": ("all_gather", "allgather"),
        "ReduceScatter": ("reduce_scatter", "reducescatter"), "Broadcast": ("broadcast", "broadcast"),
        "AlltoAll": ("alltoall", "alltoall")}
OUT = os.environ.get("OUT", "side_by_side_recheck")
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def size_of(text):
    number, unit = text.split()
    return int(number) * UNITS[unit]


def size_arg(size):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift}{unit}"
    return str(size)


def rows_below(md):
    """(collective, ranks, path, size text) of the section 'Rows below Open MPI', and the segments of its command."""
    rows, segments = [], []
    with open(md) as f:
        text = f.read()
    m = re.search(r"sweep segments: ([^)]*)\)", text)
    if not m:
        sys.exit("recheck_below.py: no sweep segments in the command line of " + md)
    for seg in m.group(1).split(";"):
        fields = seg.split()
        if len(fields) == 7:
            lo, hi = (size_of(f.replace("K", " KiB").replace("M", " MiB")) if f[-1] in "KM" else int(f)
                      for f in fields[:2])
            segments.append((lo, hi, int(fields[3]), int(fields[4])))
    section = text.split("## Rows below Open MPI", 1)
    if len(section) < 2:
        return rows, segments
    for line in section[1].split("\n## ", 1)[0].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and cells[0] in TOOL and cells[1].isdigit():
            rows.append((cells[0], int(cells[1]), cells[2].split(" /")[0], cells[3]))
    return rows, segments


def segment_of(segments, size):
    for lo, hi, iters, warmup in segments:
        if lo <= size <= hi:
            return iters, warmup
    sys.exit(f"recheck_below.py: no segment holds {size} B")


def parse_time(out, size, column):
    for line in out.splitlines():
        fields = line.split()
        if len(fields) > column and fields[0] == str(size) and not line.lstrip().startswith("#"):
            try:
                return float(fields[column])
            except ValueError:
                return None
    return None


def mann_whitney_p(a, b):
    """Exact two-sided p-value of the Mann-Whitney U test (ties get half ranks; every split enumerated)."""
    pooled = sorted(a + b)
    def rank(v):
        first = pooled.index(v)
        last = len(pooled) - 1 - pooled[::-1].index(v)
        return (first + last) / 2 + 1
    ranks = [rank(v) for v in a + b]
    n, total = len(a), len(a) + len(b)
    mean = n * (total + 1) / 2
    observed = abs(sum(ranks[:n]) - mean)
    extreme = count = 0
    for pick in itertools.combinations(range(total), n):
        count += 1
        if abs(sum(ranks[i] for i in pick) - mean) >= observed - 1e-9:
            extreme += 1
    return extreme / count


def median(v):
    s = sorted(v)
    return s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2


def open_mpi(build, prog):
    """Checks that Open MPI's tools are here and builds BUILD/bench/mpi_coll_perf where it is missing; returns its path
    and the name of Open MPI's shared-memory BTL (vader in Open MPI 4, sm in 5)."""
    for tool in ("mpicc", "mpirun", "ompi_info"):
        if not shutil.which(tool):
            sys.exit(f"{prog}: {tool} not found: install openmpi-bin and libopenmpi-dev "
                     "(benchmarks/side_by_side.sh does when run as root)")
    mpi = os.path.join(build, "bench", "mpi_coll_perf")
    if not os.path.exists(mpi):
        os.makedirs(os.path.dirname(mpi), exist_ok=True)
        subprocess.run(["mpicc", "-O2", "-Wall", "-o", mpi, os.path.join(ROOT, "benchmarks", "mpi", "mpi_coll_perf.c")],
                       check=True)
    btls = subprocess.run(["ompi_info", "--parsable"], capture_output=True, text=True).stdout
    return mpi, "vader" if "mca:btl:vader:" in btls else "sm"


def empty_dir(path):
    """Creates the folder or removes the files in it (a tool's raw outputs of its run before); returns it."""
    os.makedirs(path, exist_ok=True)
    for name in os.listdir(path):
        os.remove(os.path.join(path, name))
    return path


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    build = os.path.abspath(sys.argv[1])
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    if not 4 <= rounds <= 10:
        sys.exit("recheck_below.py: 4 to 10 rounds (with fewer, no split of the two sets reaches p < 0.05; with more, "
                 "the exact test's enumeration of every split grows past a few seconds a row)")
    md = os.path.join(RESULTS, "side_by_side.md")
    rows, segments = rows_below(md)
    if os.environ.get("ROWS"):
        rows = []
        for spec in os.environ["ROWS"].split(";"):
            coll, ranks, path, size = spec.split("/")
            rows.append((coll, int(ranks), path, size))
    mpi, shm_btl = open_mpi(build, "recheck_below.py")
    raw = empty_dir(os.path.join(RESULTS, "raw", "recheck" if OUT == "side_by_side_recheck" else OUT))
    load_before = open("/proc/loadavg").read().split()[:3]
    start = time.time()
    results = []
    for coll, ranks, path, size_text in rows:
        size = size_of(size_text)
        iters, warmup = segment_of(segments, size)
        tool, mpi_name = TOOL[coll]
        sweep = ["-b", size_arg(size), "-e", size_arg(size), "-n", str(iters), "-w", str(warmup), "-c", "0"]
        tutti_env = dict(os.environ)
        socket_env = {"NCCL_SHM_DISABLE": "1", "NCCL_P2P_DISABLE": "1", "NCCL_SOCKET_IFNAME": "lo"}
        if path == "socket":
            tutti_env.update(socket_env)
        tutti_prefix = " ".join(f"{k}={v}" for k, v in socket_env.items()) + " " if path == "socket" else ""
        tutti_cmd = [os.path.join(build, "bin", f"{tool}_perf"), "-P", str(ranks)] + sweep
        btl = ["--mca", "btl", f"self,{shm_btl}"] if path == "shm" else \
              ["--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo"]
        ompi_cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "--mca", "pml", "ob1",
                    "-np", str(ranks)] + btl + [mpi, "-C", mpi_name] + sweep
        # Broadcast: Tutti's in-place column, as side_by_side compares it (MPI_Bcast has one buffer).
        tutti_col = 9 if coll == "Broadcast" else 5
        times = {"tutti": [], "ompi": []}
        log = os.path.join(raw, f"{mpi_name}-np{ranks}-{path}-{size_arg(size)}.txt")
        with open(log, "w") as out:
            for r in range(rounds):
                order = [("tutti", tutti_cmd, tutti_env, tutti_col, tutti_prefix), ("ompi", ompi_cmd, os.environ, 5, "")]
                for impl, cmd, env, col, prefix in (order if r % 2 == 0 else order[::-1]):
                    out.write(f"## round {r} {impl}: {prefix}{' '.join(cmd)}\n")
                    try:
                        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
                        text = p.stdout + p.stderr
                    except subprocess.TimeoutExpired:
                        text = "## timed out after 300 s\n"
                    out.write(text)
                    t = parse_time(text, size, col)
                    if t is not None:
                        times[impl].append(t)
        results.append((coll, ranks, path, size_text, times))
        print(f"{coll} {ranks} {path} {size_text}: Tutti {times['tutti']} Open MPI {times['ompi']}", file=sys.stderr)
    elapsed = time.time() - start
    write(results, rounds, build, load_before, elapsed)


def write(results, rounds, build, load_before, elapsed):
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", ROOT, "diff", "--quiet", "HEAD", "--", "core", "plugins"]).returncode != 0
    prefix = (f'ROWS="{os.environ["ROWS"]}" ' if os.environ.get("ROWS") else "") + \
             (f"OUT={OUT} " if OUT != "side_by_side_recheck" else "")
    lines = ["# Rows below 1.0 in side_by_side.md, measured again", "",
             f"- command: `{prefix}benchmarks/recheck_below.py {sys.argv[1]}{' ' + sys.argv[2] if len(sys.argv) > 2 else ''}`"
             f" ({rounds} rounds a row, Tutti and Open MPI in turn, the first of a round alternating)",
             f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, run time {elapsed:.0f} s, load average "
             f"before: {' '.join(load_before)}, after: {' '.join(open('/proc/loadavg').read().split()[:3])}",
             f"- Tutti: commit {commit}{' (+ local changes)' if dirty else ''}; the rows and each row's calls and "
             "warm-up are those of side_by_side.md (its section Rows below Open MPI and its sweep segments)",
             "- time: the slowest rank's average per call (us) of one run; Broadcast: Tutti in place, as side_by_side",
             "- ratio: Open MPI's median / Tutti's median (above 1, Tutti faster); p: exact two-sided Mann-Whitney U test "
             "of the two sets of runs; verdict at p < 0.05", "",
             "| collective | ranks | path | size | Tutti us, median (fastest - slowest) | Open MPI us, median (fastest - "
             "slowest) | ratio | p | verdict |",
             "|---|---:|---|---:|---:|---:|---:|---:|---|"]
    counts = {"Tutti slower": 0, "Tutti faster": 0, "not separated": 0, "failed": 0}
    for coll, ranks, path, size_text, times in results:
        a, b = times["tutti"], times["ompi"]
        if len(a) < 4 or len(b) < 4:
            counts["failed"] += 1
            lines.append(f"| {coll} | {ranks} | {path} | {size_text} | {len(a)} runs | {len(b)} runs | - | - | failed |")
            continue
        ratio = median(b) / median(a)
        p = mann_whitney_p(a, b)
        verdict = "not separated" if p >= 0.05 else "Tutti faster" if ratio > 1 else "Tutti slower"
        counts[verdict] += 1
        lines.append(f"| {coll} | {ranks} | {path} | {size_text} | {median(a):.2f} ({min(a):.2f} - {max(a):.2f}) | "
                     f"{median(b):.2f} ({min(b):.2f} - {max(b):.2f}) | {ratio:.2f} | {p:.3f} | {verdict} |")
    summary = (f"Of {len(results)} rows: Tutti slower in {counts['Tutti slower']}, faster in {counts['Tutti faster']}, "
               f"not separated in {counts['not separated']}" + (f", failed in {counts['failed']}" if counts["failed"]
                                                                else "") + ".")
    lines += ["", summary, ""]
    with open(os.path.join(RESULTS, OUT + ".md"), "w") as f:
        f.write("\n".join(lines))
    print(summary)


if __name__ == "__main__":
    main()
