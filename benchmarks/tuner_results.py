#!/usr/bin/env python3
"""Turns the raw outputs of calibrate_tuner.sh and tuner_sweep.sh into the default tuner's constants and
into benchmarks/results/tuner_calibration.md / tuner_sweep.md. Standard library only.

usage: tuner_results.py fit   RAW_DIR HEADER_FILE OUT_MD OPTIONS_CC
       tuner_results.py sweep RAW_DIR HEADER_FILE OUT_MD
       tuner_results.py best RAW_DIR          (every row's best forced pair: "path ranks size algo/proto iters
                                               warmup limit")
       tuner_results.py doubtful RAW_DIR      (the same for rows whose head-to-head auto/best is above 1.10)
       tuner_results.py keep RAW_DIR PATH RANKS SIZE FACTOR   (pairs within FACTOR of the best at SIZE)

Raw files hold nccl-tests-format output (several sweeps may be appended; a size measured more than once
keeps its fastest row: this host is shared, and one descheduled rank spoils a run). A file that holds no
row for a size means the run failed there: the pair is not supported by the engine (reported as "n/a").

fit: files <link>-<proto>-lat-np<N>.txt (8 B, N = 2 and 4) and <link>-<proto>-bw.txt (two large sizes,
2 ranks). The model of plugins/tuner-default (ring AllReduce, k ranks):
    time = overhead + latency x 2(k-1) + 2(k-1)/k x bytes / (bandwidth x 1e3)      [us, bytes, GB/s]
8 B at 2 and 4 ranks (2 and 6 steps) gives latency = (t4 - t2) / 4 and overhead = t2 - 2 latency; the
bandwidth is the slope between the two large sizes: traffic x (S2 - S1) / (t2 - t1) / 1e3.

sweep: files <path>-np<N>-<algo>-<proto>.txt (forced pairs), <path>-np<N>-auto.txt (automatic),
<path>-np<N>-auto-log.txt (the TUNING log of a short automatic run: the pick per size) and the head-to-head
runs h2h-<path>-np<N>-auto.txt / h2h-<path>-np<N>-<algo>-<proto>.txt (auto and each row's best pair measured
again alternately; the row's auto/best comes from these).
"""
import os
import re
import sys

PROTOS = ["LL", "LL128", "Simple"]  # the order of the TUTTI_TUNER_* lists
LINKS = ["process", "shm", "net"]
ALGOS = ["ring", "tree"]
FLAG = 1.10  # auto/best above this is a tuning defect worth fixing


def parse(path):
    """size -> out-of-place time (us); {} when the file is missing or holds no row."""
    rows = {}
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for line in f:
            fields = line.split()
            if len(fields) < 8 or not fields[0].isdigit():
                continue
            try:
                size, t = int(fields[0]), float(fields[5])
            except ValueError:
                continue
            if t > 0 and (size not in rows or t < rows[size]):
                rows[size] = t
    return rows


def human(size):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} B"


def num(x):
    """A constant as the options want it: few significant digits, no exponent."""
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}".rstrip("0").rstrip(".")
    return f"{x:.3g}"


def current_defaults(options_cc):
    """name -> default text from the kOptions table of plugins/tuner-default/options.cc."""
    out = {}
    with open(options_cc) as f:
        # Table rows are {"NAME", "default", "meaning"}; the first match of a name is its row (name arrays
        # further down also pair names in braces).
        for m in re.finditer(r'\{"(TUTTI_TUNER_[A-Z_]+)",\s*"([^"]*)"', f.read()):
            out.setdefault(m.group(1), m.group(2))
    return out


def fit(raw, header, out_md, options_cc):
    defaults = current_defaults(options_cc)
    lines = [open(header).read().rstrip(), ""]
    lines += ["## Measurements", "",
              "Ring AllReduce forced per protocol (`NCCL_ALGO=ring NCCL_PROTO=<p>`), fastest of the repeats. "
              "n/a: the engine refused the pair.", "",
              "| link | protocol | 8 B, 2 ranks (us) | 8 B, 4 ranks (us) | large sizes, 2 ranks (us) |",
              "|---|---|---:|---:|---|"]
    fitted = {}  # (link, proto) -> (overhead, latency, bandwidth)
    notes = []
    for link in LINKS:
        for proto in PROTOS:
            t2 = parse(os.path.join(raw, f"{link}-{proto}-lat-np2.txt")).get(8)
            t4 = parse(os.path.join(raw, f"{link}-{proto}-lat-np4.txt")).get(8)
            bw = sorted(parse(os.path.join(raw, f"{link}-{proto}-bw.txt")).items())
            big = ", ".join(f"{human(s)}: {t:.1f}" for s, t in bw) or "n/a"
            lines.append(f"| {link} | {proto} | {t2:.2f} |" if t2 else f"| {link} | {proto} | n/a |")
            lines[-1] += f" {t4:.2f} | {big} |" if t4 else f" n/a | {big} |"
            if t2 is None or len(bw) < 2:
                continue
            # Two ranks: 2 steps, traffic 1; four ranks: 6 steps.
            if t4 is not None and t4 > t2:
                lat = (t4 - t2) / 4
                over = max(t2 - 2 * lat, 0.0)
            else:
                lat, over = t2 / 2, 0.0
                notes.append(f"{link}/{proto}: no usable 4-rank latency, overhead 0 and latency = t(8 B) / 2")
            (s1, a), (s2, b) = bw[0], bw[-1]
            if b <= a:
                notes.append(f"{link}/{proto}: {human(s2)} not slower than {human(s1)}; bandwidth from {human(s2)} alone")
                gbs = s2 / max(b - over - 2 * lat, 1e-3) / 1e3
            else:
                gbs = (s2 - s1) / (b - a) / 1e3
            fitted[(link, proto)] = (over, lat, gbs)

    lines += ["", "## Fitted constants", "",
              "Per link, lists are LL,LL128,Simple. A protocol the engine does not run keeps the plugin's current "
              "default (marked *).", ""]
    env = []
    yaml = []
    for what, idx, var in (("OVERHEAD", 0, "overhead (us per call)"), ("LATENCY", 1, "latency (us per step)"),
                           ("BANDWIDTH", 2, "bandwidth (GB/s)")):
        for link in LINKS:
            name = f"TUTTI_TUNER_{what}_{link.upper()}"
            old = defaults.get(name, "").split(",")
            vals = []
            for i, proto in enumerate(PROTOS):
                if (link, proto) in fitted:
                    vals.append(num(fitted[(link, proto)][idx]))
                elif len(old) == 3:
                    vals.append(old[i] + "*")
                else:
                    vals.append("?")
            env.append(f"{name}={','.join(v.rstrip('*') for v in vals)}")
            yaml.append(f'        {name}: "{",".join(v.rstrip("*") for v in vals)}"')
            lines.append(f"- {name} ({var}): `{','.join(vals)}` (default before: `{defaults.get(name, 'none')}`)")
    lines += [""] + [f"- note: {n}" for n in notes] + ([""] if notes else [])
    lines += ["### As environment variables", "", "```"] + env + ["```", "",
              "### As a configuration snippet", "", "```yaml", "plugins:", "  tuner:", "    - name: default",
              "      options:"] + yaml + ["```", ""]
    with open(out_md, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(env))
    print("plugins:\n  tuner:\n    - name: default\n      options:")
    print("\n".join(yaml))


def picks(path):
    """size -> 'algo/proto' chosen by the tuner, from a TUNING log (the most frequent line per size)."""
    counts = {}
    if not os.path.exists(path):
        return {}
    pat = re.compile(r"AllReduce: (\d+) bytes -> algo (\w+) proto (\w+)")
    with open(path) as f:
        for line in f:
            m = pat.search(line)
            if m:
                key = (int(m.group(1)), f"{m.group(2).lower()}/{m.group(3)}")
                counts[key] = counts.get(key, 0) + 1
    best = {}
    for (size, pick), n in counts.items():
        if size not in best or n > best[size][1]:
            best[size] = (pick, n)
    return {s: p for s, (p, _) in best.items()}


def sweep_rows(raw):
    """[(path, np, [row])] with row = (size, {pair: time or None}, auto time, pick, best pair, best time,
    (head-to-head auto time, head-to-head best pair time))."""
    names = os.listdir(raw)
    groups = sorted({re.match(r"(\w+)-np(\d+)-", n).groups() for n in names if re.match(r"\w+-np\d+-", n)},
                    key=lambda g: (g[0] != "shm", int(g[1])))
    pairs = [f"{a}/{p}" for a in ALGOS for p in PROTOS]
    out = []
    for path, np in groups:
        forced = {ap: parse(os.path.join(raw, f"{path}-np{np}-{ap.replace('/', '-')}.txt")) for ap in pairs}
        auto = parse(os.path.join(raw, f"{path}-np{np}-auto.txt"))
        pick = picks(os.path.join(raw, f"{path}-np{np}-auto-log.txt"))
        h2h_auto = parse(os.path.join(raw, f"h2h-{path}-np{np}-auto.txt"))
        h2h = {ap: parse(os.path.join(raw, f"h2h-{path}-np{np}-{ap.replace('/', '-')}.txt")) for ap in pairs}
        rows = []
        for s in sorted(set(auto).union(*[set(d) for d in forced.values()])):
            # None: no row at all (the engine refused the pair); 0: rows elsewhere only (run hit its limit).
            times = {ap: forced[ap].get(s, 0 if forced[ap] else None) for ap in pairs}
            measured = [(t, ap) for ap, t in times.items() if t]
            best_t, best = min(measured) if measured else (None, None)
            confirm = (h2h_auto.get(s), h2h[best].get(s)) if best else (None, None)
            rows.append((s, times, auto.get(s), pick.get(s, "?"), best, best_t, confirm))
        out.append((path, np, rows))
    return pairs, out


def ratio_of(row):
    """auto / best from the head-to-head runs (None until both sides have a time there)."""
    auto, best = row[6]
    return auto / best if auto and best else None


def best_pairs(raw, only_doubtful=False):
    """Prints 'path np size algo/proto iters warmup limit' for every row with a best forced pair, for the
    head-to-head runs: iterations for about 0.3 s of timed calls (2..2000; a single-size run has no earlier
    sizes to warm it up, and a few calls of a few microseconds measure the start, not the steady state),
    warm-up a fifth of that, limit four times the expected run plus 20 s. only_doubtful: just the rows whose
    head-to-head auto/best is above the flag so far."""
    for path, np, rows in sweep_rows(raw)[1]:
        for row in rows:
            r = ratio_of(row)
            if row[4] and (not only_doubtful or (r is not None and r > FLAG)):
                t = row[5]  # us
                iters = max(2, min(2000, int(3e5 / t)))
                warm = max(1, iters // 5)
                limit = int(4 * (iters + warm) * t / 1e6) + 20
                print(path, np, row[0], row[4], iters, warm, limit)


def keep(raw, path, np, size, factor):
    """Prints the pairs worth measuring past SIZE: those within FACTOR of the fastest pair at SIZE (a pair
    with no row at SIZE is dropped: it failed or hit its time limit there)."""
    size, factor = int(size), float(factor)
    times = {}
    for a in ALGOS:
        for p in PROTOS:
            t = parse(os.path.join(raw, f"{path}-np{np}-{a}-{p}.txt")).get(size)
            if t:
                times[f"{a}/{p}"] = t
    if times:
        best = min(times.values())
        print(" ".join(ap for ap, t in times.items() if t <= factor * best))


def sweep(raw, header, out_md):
    pairs, groups = sweep_rows(raw)
    body, ratios, choice, available = [], [], [], set()
    for path, np, rows in groups:
        body += [f"## AllReduce over {path}, {np} ranks", "",
                 "| size | " + " | ".join(pairs) + " | auto | auto pick | best forced | h2h auto | h2h best "
                 "| auto/best |",
                 "|---:|" + "---:|" * len(pairs) + "---:|---|---|---:|---:|---:|"]
        for row in rows:
            s, times, auto, pick, best, _, (h_auto, h_best) = row
            cells = [f"{t:.1f}" if t else "n/a" if t is None else "-" for t in times.values()]
            available.update(ap for ap, t in times.items() if t)
            r = ratio_of(row)
            flag = ""
            # The choice alone, free of the automatic run's own noise: the picked pair's forced time / best.
            if times.get(pick) and best:
                choice.append((times[pick] / times[best], path, np, s))
            if r is not None:
                ratios.append((r, path, np, s, pick == best))
                if r > FLAG:
                    # Same pair as the best forced run: the gap is noise between runs, not a wrong choice.
                    flag = " (same pair)" if pick == best else " **!**"
            fmt = lambda t: f"{t:.1f}" if t else "-"
            body.append(f"| {human(s)} | " + " | ".join(cells) + f" | {f'{auto:.1f}' if auto else 't/o'} | "
                        f"{pick} | {best or '-'} | {fmt(h_auto)} | {fmt(h_best)} | "
                        f"{f'{r:.2f}' if r is not None else '-'}{flag} |")
        body.append("")
    summary = "no rows"
    if ratios:
        worst = max(ratios)
        over5 = sum(1 for r in ratios if r[0] > 1.05)
        over10 = sum(1 for r in ratios if r[0] > FLAG)
        wrong10 = sum(1 for r in ratios if r[0] > FLAG and not r[4])
        summary = (f"worst auto/best {worst[0]:.2f} ({worst[1]}, {worst[2]} ranks, {human(worst[3])}); "
                   f"{over5} of {len(ratios)} rows above 1.05, {over10} above 1.10 "
                   f"({wrong10} of them with a pick other than the best forced pair)")
    if choice:
        worst = max(choice)
        summary2 = (f"picked pair's forced time / best: worst {worst[0]:.2f} ({worst[1]}, {worst[2]} ranks, "
                    f"{human(worst[3])}); {sum(1 for c in choice if c[0] > 1.05)} of {len(choice)} rows above "
                    f"1.05, {sum(1 for c in choice if c[0] > FLAG)} above 1.10")
        summary += "\n- " + summary2
    lines = [open(header).read().rstrip(), "", "## Summary", "", f"- {summary}",
             f"- pairs the engine ran: {', '.join(sorted(available)) or 'none'} (n/a: refused at init or on the "
             "first call; -: not measured, because the run hit its time limit or the pair was more than 2x "
             "slower than the fastest at the last size before the largest segment)",
             "- times: slowest rank's average per call (us), out-of-place, fastest of the repeats; auto pick: the "
             "TUNING log of a separate short run (logging every call would slow the timed one); best forced: the "
             "fastest pair of the sweep; h2h auto / h2h best: auto and that pair measured again head to head, "
             "alternately and equally often, fastest run of each (rows still above 1.10 after CONFIRM rounds get "
             "EXTRA more; the sweep's best is the luckiest of six pairs, so it is not compared with auto "
             "directly); auto/best = h2h auto / h2h best; **!**: above 1.10 with a pick other than the best "
             "forced pair; (same pair): above 1.10 although auto ran the best pair", ""] + body
    with open(out_md, "w") as f:
        f.write("\n".join(lines))
    print(f"summary: {summary}")


def main():
    if len(sys.argv) == 6 and sys.argv[1] == "fit":
        fit(*sys.argv[2:6])
    elif len(sys.argv) == 3 and sys.argv[1] == "best":
        best_pairs(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "doubtful":
        best_pairs(sys.argv[2], True)
    elif len(sys.argv) == 7 and sys.argv[1] == "keep":
        keep(*sys.argv[2:7])
    elif len(sys.argv) == 5 and sys.argv[1] == "sweep":
        sweep(*sys.argv[2:5])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
