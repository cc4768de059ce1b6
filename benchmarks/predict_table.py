#!/usr/bin/env python3
"""Predicted vs measured table from perf-tool outputs made with --predict (benchmarks/predict.sh).

usage: predict_table.py HEADER.md OUT.md "LABEL=FILE" ...

Each FILE holds one or more runs of a perf tool in the nccl-tests format with the extra `predict` column.
Per size the fastest out-of-place time is kept (repeats guard against a rank losing its core); the
prediction is the same in every run. Missing files or rows become "-" (a run that failed is named in the
raw file). Only the standard library is used.
"""
import math
import os
import statistics
import sys


def parse(path):
    """{size: (measured_us, predicted_us)} from every data row of `path` that has a predict column."""
    rows = {}
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            cols = line.split()
            # size count type redop root | time algbw busbw wrong | time algbw busbw wrong | predict
            if len(cols) != 14:
                continue
            try:
                size, measured, predicted = int(cols[0]), float(cols[5]), float(cols[13])
            except ValueError:
                continue
            old = rows.get(size)
            if old is None or measured < old[0]:
                rows[size] = (measured, predicted)
    return rows


def human(n):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    header_path, out_path = sys.argv[1], sys.argv[2]
    series = []
    for arg in sys.argv[3:]:
        label, _, path = arg.partition("=")
        series.append((label, parse(path)))
    sizes = sorted({s for _, rows in series for s in rows})
    if not sizes:
        sys.exit("predict_table.py: no rows with a predict column in " + ", ".join(a for a in sys.argv[3:]))

    lines = [open(header_path).read().rstrip("\n"), ""]
    lines.append("| size | " + " | ".join(f"{label}: predicted / measured (us), error" for label, _ in series) + " |")
    lines.append("|---:|" + "---:|" * len(series))
    for size in sizes:
        cells = []
        for _, rows in series:
            if size not in rows or rows[size][0] <= 0:
                cells.append("-")
                continue
            m, p = rows[size]
            cells.append(f"{p:.1f} / {m:.1f}, {100 * (p - m) / m:+.0f}%")
        lines.append(f"| {human(size)} | " + " | ".join(cells) + " |")

    lines += ["", "Summary per configuration (|error| over all sizes; factor = max(p/m, m/p)):", ""]
    lines.append("| configuration | sizes | median abs error | worst abs error | within 2x | geo-mean p/m |")
    lines.append("|---|---:|---:|---:|---:|---:|")
    for label, rows in series:
        errs = [abs(p - m) / m for m, p in rows.values() if m > 0 and p > 0]
        ratios = [p / m for m, p in rows.values() if m > 0 and p > 0]
        if not errs:
            lines.append(f"| {label} | 0 | - | - | - | - |")
            continue
        within = sum(1 for r in ratios if 0.5 <= r <= 2.0)
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        lines.append(f"| {label} | {len(errs)} | {100 * statistics.median(errs):.0f}% | {100 * max(errs):.0f}% | "
                     f"{within}/{len(ratios)} | {geo:.2f} |")
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
