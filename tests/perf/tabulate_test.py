#!/usr/bin/env python3
"""benchmarks/tabulate.py on made-up raw outputs whose counts are known: the count with the fastest sweeps, the count
with the median sweeps, and the rows below 1.0 with and without a recheck file beside them.

usage: tabulate_test.py TABULATE_PY
"""
import os
import subprocess
import sys
import tempfile

# Out-of-place time is column 6 and busbw column 8 of nccl-tests' rows (Tutti's in-place pair follows).
ROW = "{size:>10} {count:>10}  float  sum  -1  {t:10.2f}  1.00  1.00  0  {t:10.2f}  1.00  1.00  0\n"


def write_raw(path, sweeps):
    """sweeps: one {size: time} per sweep, written as consecutive sweeps of one file."""
    with open(path, "w") as f:
        for sweep in sweeps:
            f.write("## command: made up\n#       size      count  type redop root  time algbw busbw #wrong\n")
            for size, t in sweep.items():
                f.write(ROW.format(size=size, count=size // 4, t=t))


def run(tabulate, raw, header, out, *extra):
    subprocess.run([sys.executable, tabulate, raw, header, out, *extra], check=True)
    with open(out) as f:
        return f.read()


def expect(text, needle, what):
    if needle not in text:
        sys.exit(f"tabulate_test: {what}: '{needle}' not found in\n{text}")


def main():
    tabulate = sys.argv[1]
    MiB = 1 << 20
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "raw")
        os.mkdir(raw)
        # AllReduce, 2 ranks, shm. 1 MiB: fastest 100 against 95 (0.95, below), medians 100 against 130 (1.30).
        # 4 MiB: fastest 100 against 110 (1.10), medians 200 against 150 (0.75, below by medians only).
        write_raw(os.path.join(raw, "tutti-shm-allreduce-np2.txt"),
                  [{MiB: 100, 4 * MiB: 100}, {MiB: 100, 4 * MiB: 200}, {MiB: 100, 4 * MiB: 200}])
        write_raw(os.path.join(raw, "ompi-shm-allreduce-np2.txt"),
                  [{MiB: 95, 4 * MiB: 110}, {MiB: 130, 4 * MiB: 150}, {MiB: 130, 4 * MiB: 150}])
        # Over sockets, 1 MiB: 100 against 120 every sweep (1.20 both ways); 4 MiB: 100 against 90 (0.90 both ways).
        write_raw(os.path.join(raw, "tutti-socket-allreduce-np2.txt"), [{MiB: 100, 4 * MiB: 100}])
        write_raw(os.path.join(raw, "ompi-tcp-allreduce-np2.txt"), [{MiB: 120, 4 * MiB: 90}])
        header = os.path.join(tmp, "header.md")
        with open(header, "w") as f:
            f.write("# made up\n")
        out = os.path.join(tmp, "out.md")

        plain = run(tabulate, raw, header, out)
        expect(plain, "2 of the 4 compared rows of the detailed tables are at or above 1.0", "count, fastest sweeps")
        expect(plain, "(the same raw outputs): 2 of 4 at or above 1.0: below, AllReduce 2 ranks shm 4 MiB 0.75; "
               "AllReduce 2 ranks socket 4 MiB 0.90.", "count, median sweeps")
        expect(plain, "2 rows below 1.0.", "rows below")
        expect(plain, "| AllReduce | 2 | shm / shm | 1 MiB | 100.0 / 100.0 | 95.0 / 130.0 | 0.95 | yes |", "shm row")
        if "measured again" in plain:
            sys.exit("tabulate_test: a recheck column without a recheck file")

        recheck = os.path.join(tmp, "recheck.md")
        with open(recheck, "w") as f:
            f.write("- command: `benchmarks/recheck_below.py build` (5 rounds a row, made up)\n\n"
                    "| collective | ranks | path | size | Tutti | Open MPI | ratio | p | verdict |\n"
                    "|---|---:|---|---:|---:|---:|---:|---:|---|\n"
                    "| AllReduce | 2 | shm | 1 MiB | 100.00 (99 - 101) | 131.00 (95 - 140) | 1.31 | 0.008 | "
                    "Tutti faster |\n")
        again = run(tabulate, raw, header, out, recheck)
        expect(again, "5 interleaved runs a side", "rounds from the recheck file")
        expect(again, "Of the 2: Tutti slower in 0, faster in 1, not separated in 0.", "verdict tally")
        expect(again, "| 0.95 | yes | - | 1.31, p 0.008: Tutti faster |", "recheck of the shm row")
        # No host-limits.txt in the raw folder: no floor; a row the recheck file lacks says so.
        expect(again, "| AllReduce | 2 | socket / tcp | 4 MiB | 100.0 / 100.0 | 90.0 / 90.0 | 0.90 | no | - | "
               "not measured |", "socket row, not in the recheck file")
    print("tabulate_test: OK")


if __name__ == "__main__":
    main()
