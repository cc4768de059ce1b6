#!/usr/bin/env python3
"""tutti-trace check rejects broken traces (bad JSON, missing fields, partial overlap, unmatched B/E) and
accepts good ones; merge lines ranks up on one clock and reports which rank arrived last."""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import unittest

TOOL = None


def run(*args):
    p = subprocess.run([sys.executable, TOOL] + list(args), capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def meta(pid, name):
    return {"ph": "M", "name": "process_name", "pid": pid, "args": {"name": name}}


def x(name, ts, dur, pid=0, tid=1, cat="coll", args=None):
    return {"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args or {}}


def rank_file(rank, base_us, colls, comm="0x00000000000000aa"):
    events = [meta(rank, "rank %d (h)" % rank)]
    for seq, ts, dur in colls:
        events.append(x("AllReduce", ts, dur, pid=rank, args={"seq": seq, "comm": comm, "count": 8,
                                                              "datatype": "ncclFloat32", "algo": "RING",
                                                              "proto": "LL"}))
        events.append(x("step 0", ts + 0.5, dur / 2, pid=rank, tid=400, cat="proxystep"))
    return {"otherData": {"rank": rank, "nRanks": 2, "commId": comm, "clockBaseUs": base_us},
            "traceEvents": events}


class ToolTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, content):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w") as f:
            f.write(content if isinstance(content, str) else json.dumps(content))
        return path

    def assert_rejected(self, content, *needles):
        path = self.write("bad.json", content)
        rc, out, err = run("check", path)
        self.assertEqual(rc, 1, "check accepted a broken file: %s" % out)
        for n in needles:
            self.assertIn(n, err)
        return err

    def test_accepts_well_nested_trace_and_bare_array(self):
        good = {"traceEvents": [meta(0, "rank 0"), x("A", 0, 10), x("B", 0, 10), x("C", 2, 3), x("D", 10, 5),
                                {"ph": "B", "name": "b", "pid": 0, "tid": 2, "ts": 1},
                                {"ph": "E", "pid": 0, "tid": 2, "ts": 4}, x("in-b", 2, 1, tid=2)]}
        rc, out, err = run("check", self.write("good.json", good))
        self.assertEqual(rc, 0, err)
        self.assertIn("ok (7 events)", out)
        rc, _, err = run("check", self.write("arr.json", [x("A", 0, 1)]))
        self.assertEqual(rc, 0, err)

    def test_rejects_partial_overlap_naming_both_events(self):
        err = self.assert_rejected({"traceEvents": [x("outer", 0, 10), x("straddler", 5, 10)]},
                                   "'straddler'", "'outer'", "partly overlaps", "tid 1")
        self.assertIn("ts=5", err)
        # The same two slices on different tracks are fine.
        rc, _, err = run("check", self.write("ok.json", {"traceEvents": [x("a", 0, 10), x("b", 5, 10, tid=2)]}))
        self.assertEqual(rc, 0, err)

    def test_rejects_overlap_between_b_e_pair_and_x(self):
        self.assert_rejected({"traceEvents": [{"ph": "B", "name": "b", "pid": 0, "tid": 1, "ts": 0},
                                              x("x", 5, 10), {"ph": "E", "pid": 0, "tid": 1, "ts": 8}]},
                             "partly overlaps")

    def test_rejects_bad_json_with_position(self):
        self.assert_rejected('{"traceEvents": [\n{"ph": "X",,}]}', "invalid JSON", "bad.json:2:")
        self.assert_rejected("", "invalid JSON")

    def test_rejects_missing_fields_and_bad_types(self):
        self.assert_rejected({"events": []}, 'missing "traceEvents"')
        ev = x("nodur", 0, 1)
        del ev["dur"]
        self.assert_rejected({"traceEvents": [ev]}, 'missing "dur"', "'nodur'")
        ev = x("nots", 0, 1)
        del ev["ts"]
        self.assert_rejected({"traceEvents": [ev]}, 'missing "ts"')
        self.assert_rejected({"traceEvents": [x("s", "12", 1)]}, '"ts" is not a number')
        self.assert_rejected({"traceEvents": [x("neg", 0, -1)]}, 'negative "dur"')
        self.assert_rejected({"traceEvents": [{"ph": "Q", "name": "q", "pid": 0}]}, 'unknown "ph"')
        self.assert_rejected({"traceEvents": [{"ph": "M", "name": "thread_name", "pid": 0, "args": {}}]},
                             "metadata without args.name")
        self.assert_rejected({"traceEvents": [42]}, "not an object")

    def test_rejects_unmatched_begin_end(self):
        self.assert_rejected({"traceEvents": [{"ph": "E", "pid": 0, "tid": 1, "ts": 3}]}, "without a matching")
        self.assert_rejected({"traceEvents": [{"ph": "B", "name": "open", "pid": 0, "tid": 1, "ts": 3}]},
                             "never ended", "'open'")

    def test_missing_file_is_an_error_not_a_traceback(self):
        rc, _, err = run("check", os.path.join(self.tmp.name, "nope.json"))
        self.assertEqual(rc, 1)
        self.assertIn("cannot read", err)
        self.assertNotIn("Traceback", err)

    def test_merge_aligns_clocks_and_reports_last_rank(self):
        # Rank 1's clock base is 10 us later than rank 0's: merged times are on rank 0's (the earliest) base.
        a = self.write("r0.json", rank_file(0, 5_000_000, [(1, 100.0, 20.0), (2, 300.0, 20.0)]))
        b = self.write("r1.json", rank_file(1, 5_000_010, [(1, 95.0, 30.0), (2, 250.0, 60.0)]))
        merged = os.path.join(self.tmp.name, "m.json")
        rc, out, err = run("merge", "-o", merged, a, b)
        self.assertEqual(rc, 0, err)
        with open(merged) as f:
            data = json.load(f)
        colls = [e for e in data["traceEvents"] if e.get("cat") == "coll"]
        self.assertEqual(sorted({e["pid"] for e in colls}), [0, 1])
        r1_seq1 = [e for e in colls if e["pid"] == 1 and e["args"]["seq"] == 1][0]
        self.assertAlmostEqual(r1_seq1["ts"], 105.0)  # 95 us on a base 10 us later
        self.assertEqual(data["otherData"]["clockBaseUs"], 5_000_000)
        # seq 1: rank 0 at 100, rank 1 at 105 -> rank 1 last by 5 us; seq 2: rank 0 at 300, rank 1 at 260.
        lines = [l for l in out.splitlines() if "AllReduce" in l]
        self.assertEqual(len(lines), 2, out)
        self.assertIn("rank 1", lines[0])
        self.assertIn("5.000", lines[0])
        self.assertIn("rank 0", lines[1])
        self.assertIn("40.000", lines[1])
        self.assertIn("per rank:", out)
        rc, _, err = run("check", merged)
        self.assertEqual(rc, 0, err)
        rc, out, _ = run("merge", "--top", "1", "-o", merged, a, b)
        self.assertEqual(rc, 0)
        self.assertEqual(len([l for l in out.splitlines() if "AllReduce" in l]), 1)
        self.assertIn("40.000", out)

    def test_merge_refuses_duplicate_rank_and_bad_input(self):
        a = self.write("r0.json", rank_file(0, 0, [(1, 1.0, 1.0)]))
        merged = os.path.join(self.tmp.name, "m.json")
        rc, _, err = run("merge", "-o", merged, a, a)
        self.assertEqual(rc, 1)
        self.assertIn("appears twice", err)
        bad = self.write("bad.json", "{")
        rc, _, err = run("merge", "-o", merged, a, bad)
        self.assertEqual(rc, 1)
        self.assertIn("invalid JSON", err)

    def test_merge_of_two_communicators_keeps_them_apart(self):
        a = self.write("a.json", rank_file(0, 0, [(1, 1.0, 1.0)], comm="0x1"))
        b = self.write("b.json", rank_file(0, 0, [(1, 2.0, 1.0)], comm="0x2"))
        merged = os.path.join(self.tmp.name, "m.json")
        rc, out, err = run("merge", "-o", merged, a, b)
        self.assertEqual(rc, 0, err)
        with open(merged) as f:
            data = json.load(f)
        names = sorted(e["args"]["name"] for e in data["traceEvents"] if e.get("name") == "process_name")
        self.assertEqual(names, ["rank 0 (h) comm 0x1", "rank 0 (h) comm 0x2"])
        self.assertIn("0 collectives matched", out)  # one rank per communicator: nothing to compare


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--tool", required=True)
    opts, rest = parser.parse_known_args()
    TOOL = opts.tool
    unittest.main(argv=[sys.argv[0]] + rest)
