#!/usr/bin/env python3
"""CPU time per call of Tutti and Open MPI on given side-by-side rows: where the host's cores are the limit.

On a 2-core host with 4 or 8 ranks over TCP, both libraries keep both cores busy for a large call: every byte crosses
the kernel's loopback TCP path (copied into and out of a socket) on the same cores, and the ring's folds run there too.
Then a call cannot be faster than its CPU time divided by the cores, and the library that spends less CPU per call is
the one the host favours; per-call times that differ while the CPU per call does not are the host's scheduling.

For each row (collective/ranks/path/size) and each of ROUNDS interleaved rounds, each side runs twice, with FEW and
with MANY timed calls (the same warm-up); the difference of the two runs' CPU time (user and system, every process of
the run: resource.getrusage(RUSAGE_CHILDREN) around it) and wall time, divided by the difference in calls, is the
CPU and wall time of one call, start-up and connection set-up taken out. Tutti's perf tools time each size twice
(out of place, then in place; AlltoAll once), so a Tutti run makes twice the timed calls an Open MPI run makes; both
are counted.
Reports the medians per row: CPU ms per call (user + system), wall ms per call and cores busy (CPU / wall).

usage: ROWS="AllReduce/4/socket/4 MiB;..." benchmarks/cpu_per_call.py BUILD_DIR [ROUNDS [FEW MANY]]
   (ROUNDS: 3 by default; FEW and MANY: 5 and 45; a row's fifth field, "AllReduce/4/socket/4 MiB/205", is its own
   MANY). The timed calls between the two runs should take seconds, so that start-up's jitter does not weigh. Writes benchmarks/results/cpu_per_call.md (OUT=NAME:
   benchmarks/results/NAME.md) and the raw outputs under benchmarks/results/raw/<same name>/.
"""
import os
import resource
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from recheck_below import RESULTS, TOOL, empty_dir, median, open_mpi, size_arg, size_of  # noqa: E402

OUT = os.environ.get("OUT", "cpu_per_call")


def timed(cmd, env, log):
    """Runs cmd; returns (user and system CPU seconds of every process it waited for, wall seconds, its standard
    output), or None if it failed or timed out."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        log.write("## timed out after 600 s\n")
        return None
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    log.write(p.stdout + p.stderr)
    user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    log.write(f"## exit {p.returncode}, wall {wall:.3f} s, user {user:.3f} s, system {system:.3f} s\n")
    return (user, system, wall, p.stdout) if p.returncode == 0 else None


def timed_loops(out, size):
    """How many timed loops a perf tool's row ran: 2 where its in-place column holds a time (Tutti's tools time out of
    place, then in place, as nccl-tests do; not AlltoAll), else 1 (Open MPI's tool; Tutti's AlltoAll)."""
    for line in out.splitlines():
        fields = line.split()
        if len(fields) > 9 and fields[0] == str(size) and not line.lstrip().startswith("#"):
            try:
                float(fields[9])
                return 2
            except ValueError:
                return 1
    return 1


def main():
    if len(sys.argv) < 2 or not os.environ.get("ROWS"):
        sys.exit(__doc__)
    build = os.path.abspath(sys.argv[1])
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    few, many = (int(sys.argv[3]), int(sys.argv[4])) if len(sys.argv) > 4 else (5, 45)
    if rounds < 1 or not 0 < few < many:
        sys.exit("cpu_per_call.py: ROUNDS >= 1 and 0 < FEW < MANY")
    mpi, shm_btl = open_mpi(build, "cpu_per_call.py")
    raw = empty_dir(os.path.join(RESULTS, "raw", OUT))
    load_before = open("/proc/loadavg").read().split()[:3]
    start = time.time()
    results = []
    for spec in os.environ["ROWS"].split(";"):
        fields = spec.split("/")
        if len(fields) not in (4, 5) or fields[0] not in TOOL or fields[2] not in ("shm", "socket") or \
                (len(fields) == 5 and not (fields[4].isdigit() and int(fields[4]) > few)):
            sys.exit(f"cpu_per_call.py: bad row {spec!r} (collective/ranks/shm|socket/size[/MANY], e.g. "
                     "AllReduce/4/socket/4 MiB/205)")
        coll, ranks, path, size_text = fields[:4]
        row_many = int(fields[4]) if len(fields) == 5 else many
        size = size_of(size_text)
        tool, mpi_name = TOOL[coll]
        env = dict(os.environ)
        if path == "socket":
            env.update({"NCCL_SHM_DISABLE": "1", "NCCL_P2P_DISABLE": "1", "NCCL_SOCKET_IFNAME": "lo"})
        btl = ["--mca", "btl", f"self,{shm_btl}"] if path == "shm" else \
              ["--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo"]

        def command(impl, n):
            sweep = ["-b", size_arg(size), "-e", size_arg(size), "-n", str(n), "-w", "2", "-c", "0"]
            if impl == "tutti":
                return [os.path.join(build, "bin", f"{tool}_perf"), "-P", ranks] + sweep
            return ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "--mca", "pml", "ob1",
                    "-np", ranks] + btl + [mpi, "-C", mpi_name] + sweep

        per = {"tutti": [], "ompi": []}
        log_path = os.path.join(raw, f"{mpi_name}-np{ranks}-{path}-{size_arg(size)}.txt")
        with open(log_path, "w") as log:
            for r in range(rounds):
                for impl in (("tutti", "ompi") if r % 2 == 0 else ("ompi", "tutti")):
                    runs = []
                    for n in (few, row_many):
                        cmd = command(impl, n)
                        log.write(f"## round {r} {impl} -n {n}: {' '.join(cmd)}\n")
                        log.flush()
                        runs.append(timed(cmd, env if impl == "tutti" else os.environ, log))
                    if None in runs:
                        continue
                    (u0, s0, w0, _), (u1, s1, w1, out) = runs
                    calls = (row_many - few) * timed_loops(out, size)
                    per[impl].append(((u1 - u0) / calls, (s1 - s0) / calls, (w1 - w0) / calls))
        results.append((coll, ranks, path, size_text, row_many, per))
        print(f"{spec}: " + ", ".join(f"{k} " + " ".join(f"{(u + s) * 1e3:.2f}/{w * 1e3:.2f}" for u, s, w in v)
                                      for k, v in per.items()), file=sys.stderr)
    write(results, rounds, few, many, load_before, time.time() - start)


def write(results, rounds, few, many, load_before, elapsed):
    commit = subprocess.run(["git", "-C", os.path.dirname(RESULTS), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    lines = ["# CPU time per call, Tutti and Open MPI", "",
             f"- command: `ROWS=\"{os.environ['ROWS']}\" {'OUT=' + OUT + ' ' if OUT != 'cpu_per_call' else ''}"
             f"benchmarks/cpu_per_call.py {' '.join(sys.argv[1:])}` ({rounds} rounds, each side run with {few} and "
             f"{many} timed calls (a row's fifth field: its own), 2 warm-up calls, the first side of a round alternating)",
             f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, run time {elapsed:.0f} s, "
             f"{os.cpu_count()} CPUs, load average before: {' '.join(load_before)}, after: "
             f"{' '.join(open('/proc/loadavg').read().split()[:3])}",
             f"- Tutti: commit {commit}; socket rows with NCCL_SHM_DISABLE=1 NCCL_P2P_DISABLE=1 NCCL_SOCKET_IFNAME=lo; "
             "Open MPI as side_by_side.sh runs it",
             "- per call: (the run with more calls - the run with fewer) / the calls between them (Tutti: out of place "
             "and in place, twice Open MPI's, but AlltoAll out of place only); CPU: user + system time of every process of the run; cores busy: CPU / "
             "wall; medians of the rounds", "",
             "| collective | ranks | path | size | calls | Tutti CPU ms (user + system) | Tutti wall ms | Tutti cores busy | "
             "Open MPI CPU ms (user + system) | Open MPI wall ms | Open MPI cores busy | CPU ratio (Open MPI / Tutti) |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for coll, ranks, path, size_text, row_many, per in results:
        cells = []
        for impl in ("tutti", "ompi"):
            v = per[impl]
            if not v:
                cells += ["failed", "-", "-"]
                continue
            user, system, wall = (median([x[i] for x in v]) for i in range(3))
            cpu = median([x[0] + x[1] for x in v])
            cells += [f"{cpu * 1e3:.2f} ({user * 1e3:.2f} + {system * 1e3:.2f})", f"{wall * 1e3:.2f}",
                      f"{cpu / wall:.2f}" if wall > 0 else "-"]
        ratio = "-"
        if per["tutti"] and per["ompi"]:
            ratio = f"{median([x[0] + x[1] for x in per['ompi']]) / median([x[0] + x[1] for x in per['tutti']]):.2f}"
        lines.append(f"| {coll} | {ranks} | {path} | {size_text} | {few} / {row_many} | " + " | ".join(cells) +
                     f" | {ratio} |")
    lines.append("")
    with open(os.path.join(RESULTS, OUT + ".md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines[-len(results) - 1:]))


if __name__ == "__main__":
    main()
