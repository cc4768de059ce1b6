#!/usr/bin/env python3
"""End to end: a 4-rank all_reduce_perf sweep with the trace profiler loaded (NCCL_PROFILER_PLUGIN=trace,
or a YAML config's plugins.profiler entry) writes one file per rank; `tutti-trace merge` makes one
timeline, `tutti-trace check` accepts every file, and the merged file has Coll slices for every rank."""

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--perf", required=True, help="all_reduce_perf binary")
    p.add_argument("--tool", required=True, help="tutti-trace script")
    p.add_argument("--mode", choices=["threads", "procs"], required=True)
    p.add_argument("--ranks", type=int, default=4)
    opts = p.parse_args()

    with tempfile.TemporaryDirectory(prefix="tutti-trace-e2e-") as tmp:
        env = dict(os.environ)
        for var in ("TUTTI_TRACE_FILE", "TUTTI_TRACE_MASK", "TUTTI_TRACE_MAX_EVENTS", "NCCL_PROFILER_PLUGIN",
                    "TUTTI_CONFIG"):
            env.pop(var, None)
        pattern = os.path.join(tmp, "trace-r%r.json")
        if opts.mode == "threads":
            env["NCCL_PROFILER_PLUGIN"] = "trace"
            env["TUTTI_TRACE_FILE"] = pattern
            launch = ["-g", str(opts.ranks)]
        else:
            # The file name travels as the plugin entry's option, as an operator would write it.
            cfg = os.path.join(tmp, "tutti.yaml")
            with open(cfg, "w") as f:
                f.write("plugins:\n  profiler:\n    - name: trace\n      required: true\n"
                        "      options: {TUTTI_TRACE_FILE: \"%s\"}\n" % pattern)
            env["TUTTI_CONFIG"] = cfg
            launch = ["-P", str(opts.ranks)]
        cmd = [opts.perf, "-b", "8", "-e", "4K", "-f", "8"] + launch + ["-n", "2", "-w", "1", "-c", "1"]
        run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
        if run.returncode != 0 or "Out of bounds values : 0 OK" not in run.stdout:
            fail("%s exited %d\n%s\n%s" % (" ".join(cmd), run.returncode, run.stdout, run.stderr))
        files = sorted(glob.glob(os.path.join(tmp, "trace-r*.json")))
        expected = [os.path.join(tmp, "trace-r%d.json" % r) for r in range(opts.ranks)]
        if files != sorted(expected):
            fail("expected one trace per rank %s, found %s\n%s" % (expected, files, run.stderr))
        merged = os.path.join(tmp, "merged.json")
        m = subprocess.run([sys.executable, opts.tool, "merge", "-o", merged] + files, capture_output=True,
                           text=True, timeout=120)
        if m.returncode != 0:
            fail("merge failed: %s%s" % (m.stdout, m.stderr))
        c = subprocess.run([sys.executable, opts.tool, "check", merged] + files, capture_output=True, text=True,
                           timeout=120)
        if c.returncode != 0:
            fail("check failed: %s%s" % (c.stdout, c.stderr))
        with open(merged) as f:
            data = json.load(f)
        colls = [e for e in data["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "coll"]
        by_rank = {}
        for e in colls:
            by_rank.setdefault(e["pid"], []).append(e)
        if sorted(by_rank) != list(range(opts.ranks)):
            fail("Coll slices for ranks %s, expected 0..%d" % (sorted(by_rank), opts.ranks - 1))
        # Sizes 8, 64, 512, 4096 B, (warmup + 2 iterations) x (out-of-place, in-place) each.
        for rank, evs in by_rank.items():
            if len(evs) < 4 * 2 * 2:
                fail("rank %d has only %d Coll slices" % (rank, len(evs)))
            for e in evs:
                a = e.get("args", {})
                for key in ("seq", "algo", "proto", "nChannels", "count", "datatype"):
                    if key not in a:
                        fail("rank %d: Coll slice without args.%s: %s" % (rank, key, e))
        if "per rank:" not in m.stdout or "collectives matched across ranks" not in m.stdout:
            fail("merge report incomplete:\n" + m.stdout)
        print(m.stdout)
        print("OK: %d ranks, %d Coll slices, merged trace valid" % (opts.ranks, len(colls)))


if __name__ == "__main__":
    main()
