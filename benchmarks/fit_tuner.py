#!/usr/bin/env python3
"""Fits the default tuner's constants for one link (shm or net) to a forced-pair sweep, through the plugin
itself: the built libtutti-tuner-default.so is loaded with ctypes and asked for its cost table under
candidate TUTTI_TUNER_* values, so the fit can never drift from the model the core runs. Standard library
only.

usage: fit_tuner.py PLUGIN_SO RAW_DIR OUT_MD [LINK ...]      (LINK: shm, net; default both)

RAW_DIR holds tuner_sweep.sh's raw outputs (<path>-np<N>-<algo>-<proto>.txt, each size's fastest run
counts). The links are fitted together: per link 13 constants (per-call overhead, per-step latency and
bandwidth for LL/LL128/Simple; the tree's latency, bandwidth and pipeline-fill factors and its depth-1
traffic), plus the two
oversubscription constants they share, in two passes of Nelder-Mead (restarted) over their logarithms:
  1. least squares of log(predicted / measured) over every measured (ranks, size, algo, proto): the model
     right to a ratio, at small and large sizes alike;
  2. the same plus a penalty for every (ranks, size) whose cheapest predicted pair is measured slower than
     the best pair (log of the ratio, weighted): what the core's choice pays for a wrong ranking, smoothed
     (a softmin over the predicted times) so that the simplex can follow it.
Prints the constants as environment variables and writes OUT_MD (fit errors and the choice the fitted
model would make on the fitting data; the honest check is a fresh sweep with the new defaults).
"""
import ctypes
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tuner_results import PROTOS, current_defaults, parse, human, num  # noqa: E402

ALGOS = {"tree": 0, "ring": 1}  # NCCL_ALGO_TREE, NCCL_ALGO_RING
NUM_PROTO = 3
ALLREDUCE = 4  # ncclFuncAllReduce
LINK_VAR = {"shm": "SHM", "net": "NET"}
LINK_INDEX = {"process": 0, "shm": 1, "net": 2}
PENALTY = 4.0  # pass 2: weight of a wrong ranking against the squared log error of one point
SOFTMIN = 0.03  # pass 2: predicted log-time scale over which pairs share the pick
DEFAULTS = current_defaults(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "plugins",
                                         "tuner-default", "options.cc"))


class Tuner:
    """The plugin's v6 table, called as the core calls it."""

    class Table(ctypes.Structure):
        _fields_ = [("name", ctypes.c_char_p), ("init", ctypes.c_void_p), ("getCollInfo", ctypes.c_void_p),
                    ("finalize", ctypes.c_void_p), ("getChunkSize", ctypes.c_void_p)]

    def __init__(self, path):
        lib = ctypes.CDLL(os.path.abspath(path))
        t = self.Table.in_dll(lib, "ncclTunerPlugin_v6")
        self.init = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint64, ctypes.c_size_t,
                                     ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(t.init)
        self.get = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_int,
                                    ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                    ctypes.POINTER(ctypes.c_int))(t.getCollInfo)
        self.fin = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(t.finalize)

    def costs(self, env, nranks, sizes, channels=2):
        """{size: {(algo, proto): us}} under the TUTTI_TUNER_* values in env (set in os.environ: the plugin
        reads getenv at init)."""
        for k, v in env.items():
            os.environ[k] = v
        ctx = ctypes.c_void_p()
        if self.init(ctypes.byref(ctx), 1, nranks, 1, None, None, None) != 0:
            raise RuntimeError(f"tuner init refused {env}")
        out = {}
        table = (ctypes.c_float * (2 * NUM_PROTO))()
        for s in sizes:
            for i in range(len(table)):
                table[i] = 0.0
            ch = ctypes.c_int(min(channels, max(1, -(-s // (256 * 1024)))))
            self.get(ctx, ALLREDUCE, s, 1, ctypes.cast(table, ctypes.c_void_p), 2, NUM_PROTO, 0,
                     ctypes.byref(ch))
            out[s] = {(a, p): table[ai * NUM_PROTO + pi]
                      for a, ai in ALGOS.items() for pi, p in enumerate(PROTOS)}
        self.fin(ctx)
        return out


def load(raw, link):
    """{nranks: {size: {(algo, proto): us}}} from the sweep's forced-pair files of one path."""
    data = {}
    for f in sorted(os.listdir(raw)):
        parts = f[:-4].split("-") if f.endswith(".txt") else []
        if len(parts) != 4 or parts[0] != link or parts[2] not in ALGOS or parts[3] not in PROTOS:
            continue
        nranks = int(parts[1][2:])
        for size, t in parse(os.path.join(raw, f)).items():
            data.setdefault(nranks, {}).setdefault(size, {})[(parts[2], parts[3])] = t
    return data


# Parameter vector: per link overhead[3], latency[3], bandwidth[3], tree latency, tree bandwidth, tree fill,
# depth-1 tree traffic (13 each), then the oversubscription latency factor and bandwidth exponent (shared by
# the links), all as logarithms. Overheads and the exponent may be zero: fitted as log(0.05 + x), clipped at 0.
PER_LINK = 13
TREE_TERMS = (("TUTTI_TUNER_TREE_LATENCY_FACTOR", 9), ("TUTTI_TUNER_TREE_BANDWIDTH_FACTOR", 10),
              ("TUTTI_TUNER_TREE_FILL_FACTOR", 11), ("TUTTI_TUNER_TREE_SHALLOW_TRAFFIC", 12))


def to_env(links, x):
    env = {}
    factors = {}
    for var, _ in TREE_TERMS:
        cur = DEFAULTS.get(var, "1").split(",")
        factors[var] = cur * 3 if len(cur) == 1 else cur
    for i, link in enumerate(links):
        v = [math.exp(t) for t in x[i * PER_LINK:(i + 1) * PER_LINK]]
        over = [max(0.0, o - 0.05) for o in v[0:3]]
        env[f"TUTTI_TUNER_OVERHEAD_{LINK_VAR[link]}"] = ",".join(num(o) if o >= 0.01 else "0" for o in over)
        env[f"TUTTI_TUNER_LATENCY_{LINK_VAR[link]}"] = ",".join(num(a) for a in v[3:6])
        env[f"TUTTI_TUNER_BANDWIDTH_{LINK_VAR[link]}"] = ",".join(num(b) for b in v[6:9])
        for var, i in TREE_TERMS:
            factors[var][LINK_INDEX[link]] = num(v[i])
    env.update({k: ",".join(v) for k, v in factors.items()})
    lat, expo = math.exp(x[-2]), max(0.0, math.exp(x[-1]) - 0.05)
    env["TUTTI_TUNER_OVERSUBSCRIBED"] = f"{num(lat)},{num(expo) if expo >= 0.01 else '0'}"
    return env


def evaluate(tuner, links, datas, x, penalty):
    env = to_env(links, x)
    err, n, wrong, rowsets, regret = 0.0, 0, [], 0, 0.0
    for link, data in zip(links, datas):
        env["TUTTI_TUNER_INTRA_LINK"] = link
        for nranks, rows in data.items():
            rowsets += 1
            pred = tuner.costs(env, nranks, sorted(rows))
            for size, meas in rows.items():
                for pair, t in meas.items():
                    err += math.log(max(pred[size][pair], 1e-3) / t) ** 2
                    n += 1
                best = min(meas.values())
                worst = 2 * max(meas.values())  # an unmeasured pair was > 2x slower: no pick
                pick = min(pred[size], key=lambda p: pred[size][p])
                got = meas.get(pick, worst)
                if got > best * 1.0001:
                    wrong.append((link, nranks, size, pick, got / best))
                if penalty:
                    # What the pick costs, smoothed: each pair weighted by a softmin of its predicted log
                    # time (pairs predicted within a few % share the weight), so the penalty moves with the
                    # constants instead of in steps that a simplex cannot follow.
                    lp = {p: math.log(max(c, 1e-3)) for p, c in pred[size].items()}
                    lo = min(lp.values())
                    w = {p: math.exp(-(v - lo) / SOFTMIN) for p, v in lp.items()}
                    regret += sum(w[p] * math.log(meas.get(p, worst) / best) for p in w) / sum(w.values())
    loss = err / max(n, 1) + penalty * regret / max(rowsets, 1)
    return loss, err / max(n, 1), wrong


def nelder_mead(f, x0, step=0.3, iters=3000, tol=1e-7):
    n = len(x0)
    pts = [list(x0)] + [[x0[j] + (step if j == i else 0) for j in range(n)] for i in range(n)]
    vals = [f(p) for p in pts]
    for _ in range(iters):
        order = sorted(range(n + 1), key=lambda i: vals[i])
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        if abs(vals[-1] - vals[0]) < tol * (1 + abs(vals[0])):
            break
        c = [sum(p[j] for p in pts[:-1]) / n for j in range(n)]
        xr = [c[j] + (c[j] - pts[-1][j]) for j in range(n)]
        fr = f(xr)
        if fr < vals[0]:
            xe = [c[j] + 2 * (c[j] - pts[-1][j]) for j in range(n)]
            fe = f(xe)
            pts[-1], vals[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = xr, fr
        else:
            xc = [c[j] + 0.5 * (pts[-1][j] - c[j]) for j in range(n)]
            fc = f(xc)
            if fc < vals[-1]:
                pts[-1], vals[-1] = xc, fc
            else:
                for i in range(1, n + 1):
                    pts[i] = [pts[0][j] + 0.5 * (pts[i][j] - pts[0][j]) for j in range(n)]
                    vals[i] = f(pts[i])
    i = min(range(n + 1), key=lambda k: vals[k])
    return pts[i], vals[i]


def start_point(data):
    """One link's start, from the data: latency from the smallest size, bandwidth from the largest."""
    small = [t for rows in data.values() for t in rows[min(rows)].values()]
    lat = max(0.1, sorted(small)[len(small) // 2] / 4)
    big = []
    for rows in data.values():
        s = max(rows)
        big += [s * 1.5 / (t * 1e3) for t in rows[s].values()]
    bw = max(0.05, sorted(big)[len(big) // 2])
    return [math.log(0.05 + 1.0)] * 3 + [math.log(lat)] * 3 + [math.log(bw)] * 3 + [0.0, 0.0, 0.0, 0.0]


def fit(tuner, links, datas, restarts=4):
    x = [v for d in datas for v in start_point(d)] + [math.log(2.0), math.log(0.55)]
    for penalty in (0, PENALTY):
        for r in range(restarts):
            x, _ = nelder_mead(lambda y: evaluate(tuner, links, datas, y, penalty)[0], x,
                               step=0.4 if r == 0 and penalty == 0 else 0.1, iters=4000)
        yield penalty, x


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    so, raw, out_md = sys.argv[1:4]
    links = sys.argv[4:] or ["shm", "net"]
    tuner = Tuner(so)
    datas = [load(raw, link) for link in links]
    for link, d in zip(links, datas):
        if not d:
            sys.exit(f"fit_tuner.py: no {link} data in {raw}")
    lines = ["# Default tuner: constants fitted to a forced-pair sweep", "",
             f"- command: `benchmarks/fit_tuner.py {so} {raw} {out_md} {' '.join(links)}`",
             f"- data: the forced-pair files of `{raw}` (fastest run of each size), links {', '.join(links)}",
             f"- cores the model assumed: TUTTI_TUNER_CORES={os.environ.get('TUTTI_TUNER_CORES', 'auto')} "
             f"({os.cpu_count()} here)", ""]
    x = None
    for penalty, x in fit(tuner, links, datas):
        _, mse, wrong = evaluate(tuner, links, datas, x, PENALTY)
        rows = sum(len(r) for d in datas for r in d.values())
        lines.append(f"## {'least squares' if penalty == 0 else 'least squares and the ranking penalty'}")
        lines.append("")
        lines.append(f"- rms error of log(predicted/measured): {math.sqrt(mse):.3f} "
                     f"(a factor of {math.exp(math.sqrt(mse)):.2f})")
        lines.append(f"- (path, ranks, size) rows where the model's cheapest pair is not the fastest measured: "
                     f"{len(wrong)} of {rows}; worst {max((r[-1] for r in wrong), default=1):.2f}")
        for link, nranks, size, pick, r in sorted(wrong):
            lines.append(f"  - {link}, {nranks} ranks, {human(size)}: picks {pick[0]}/{pick[1]}, "
                         f"{r:.2f}x the best")
        lines.append("")
    env = to_env(links, x)
    lines += ["## Constants", "", "```"] + [f"{k}={v}" for k, v in env.items()] + ["```", ""]
    with open(out_md, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(f"{k}={v}" for k, v in env.items()))


if __name__ == "__main__":
    main()
