#!/usr/bin/env python3
"""Benchmark regressions caught: the tracked benchmarks against the figures recorded in the repository.

Times are compared as ratios to a reference computation run in the same process (BM_Reference, a fixed
arithmetic loop in bench/reference_bench.cc), never as absolute times: CI machines differ and this one
is shared, and a ratio cancels most of that. Each benchmark carries a noise band measured when it was
recorded (the spread of its ratio over several runs, band = min(cap, max(k x spread, floor))); a ratio
above recorded x (1 + band) fails.

  bench-check.py check  --bench BUILD/bench/gpuplan_bench   run the tracked benchmarks once, compare
  bench-check.py check  --results FILE.json                 compare Google Benchmark JSON already taken
  bench-check.py record --bench BIN [--runs N]              rewrite bench/recorded.json (N runs; bands)
  bench-check.py record --bench BIN --only NAME,...         re-record those benchmarks only, keep the rest
  bench-check.py docs [--check]                             regenerate (or check) the tables in docs/*.md

bench/tracked.json says what is tracked (the benchmarks, the reference, k, floor, cap, repetitions) and
which docs tables list which benchmarks; bench/recorded.json holds the recorded figures (written by
`record` only). The docs tables sit between `<!-- bench:begin NAME -->` and `<!-- bench:end -->`.

The market's benchmarks keep their SQLite store in a fresh folder under GPUPLAN_MARKET_BENCH_DIR, which
this script points at a temporary folder on tmpfs (/dev/shm) when there is one: an fsync there costs
no disk wait, so their CPU time is the market's own work and their ratio is as stable as the others'.
Names Google Benchmark suffixes (`/real_time`) are tracked under the benchmark's own name. Output: one
line per benchmark (`--verbose`, or VERBOSE=1, adds one per run).

Python 3 with the standard library only (Debian's python3): it parses Google Benchmark's JSON and
rewrites Markdown, which would be three times the code in C++ and needs no build.
"""

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRACKED = os.path.join(ROOT, "bench", "tracked.json")
RECORDED = os.path.join(ROOT, "bench", "recorded.json")
DOCS = os.path.join(ROOT, "docs")

# Google Benchmark's time units, in nanoseconds.
UNIT_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}

BEGIN = re.compile(r"^<!-- bench:begin (\S+) -->\s*$")
END = "<!-- bench:end -->"


def load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def write_json(path, data):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, sort_keys=True)
        f.write("\n")


# Where the market's benchmarks put their store: tmpfs when the machine has one (see the docstring).
TMPFS = "/dev/shm"


def bench_env():
    env = dict(os.environ)
    if "GPUPLAN_MARKET_BENCH_DIR" not in env and os.path.isdir(TMPFS) and os.access(TMPFS, os.W_OK):
        env["GPUPLAN_MARKET_BENCH_DIR"] = TMPFS
    return env


def run_bench(binary, tracked, names=None):
    """One process running every tracked benchmark (or `names`), repetitions interleaved at random so
    that a load change on the machine hits the reference and the others alike. Returns Google
    Benchmark's JSON."""
    names = [tracked["reference"]] + list(names if names is not None else tracked["benchmarks"])
    regex = "^(" + "|".join(re.escape(n) for n in names) + ")(/|$)"
    cmd = [
        binary,
        "--benchmark_filter=" + regex,
        "--benchmark_format=json",
        "--benchmark_repetitions=%d" % tracked["repetitions"],
        "--benchmark_enable_random_interleaving=true",
        "--benchmark_min_time=%g" % tracked["min_time_seconds"],
    ]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=bench_env())
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
        raise SystemExit("bench-check: %s exited with %d" % (binary, out.returncode))
    return json.loads(out.stdout)


# The fields of a Google Benchmark row that are not user counters.
STANDARD_FIELDS = {"name", "run_name", "run_type", "family_index", "per_family_instance_index", "repetitions",
                   "repetition_index", "threads", "iterations", "real_time", "cpu_time", "time_unit",
                   "aggregate_name", "aggregate_unit", "error_occurred", "error_message", "label"}


def run_name(row):
    return re.sub(r"(/iterations:\d+|/real_time)+$", "", row.get("run_name", row["name"]))


def medians(results):
    """Median CPU time in ns per benchmark (its run_name, without the repetition suffix)."""
    times = {}
    for b in results.get("benchmarks", []):
        if b.get("run_type", "iteration") != "iteration" or b.get("error_occurred"):
            continue
        times.setdefault(run_name(b), []).append(b["cpu_time"] * UNIT_NS[b.get("time_unit", "ns")])
    return {name: statistics.median(v) for name, v in times.items()}


def counters(results):
    """Median of each user counter (configs_per_s, gpus, ...) per benchmark, for the docs tables."""
    values = {}
    for b in results.get("benchmarks", []):
        if b.get("run_type", "iteration") != "iteration" or b.get("error_occurred"):
            continue
        for k, v in b.items():
            if k not in STANDARD_FIELDS and isinstance(v, (int, float)) and not isinstance(v, bool):
                values.setdefault(run_name(b), {}).setdefault(k, []).append(float(v))
    return {n: {k: statistics.median(v) for k, v in c.items()} for n, c in values.items()}


def ratios(results, tracked):
    """(reference ns, {benchmark: (ns, ratio to the reference)}) of one run."""
    m = medians(results)
    ref = m.get(tracked["reference"])
    if not ref or ref <= 0:
        raise SystemExit("bench-check: the reference benchmark %s did not run" % tracked["reference"])
    return ref, {n: (t, t / ref) for n, t in m.items() if n != tracked["reference"]}


def check(results, tracked, recorded):
    ref, measured = ratios(results, tracked)
    failures, lines = [], []
    for name in tracked["benchmarks"]:
        rec = recorded["benchmarks"].get(name)
        if rec is None:
            failures.append("%s: not recorded in bench/recorded.json; run `make bench-record`" % name)
            continue
        if name not in measured:
            failures.append("%s: did not run (renamed or removed? update bench/tracked.json)" % name)
            continue
        ns, ratio = measured[name]
        limit = rec["ratio"] * (1 + rec["band"])
        change = ratio / rec["ratio"] - 1
        line = "%-44s recorded ratio %10.4g  measured %10.4g  (%+6.1f%%, band +%.0f%%)" % (
            name, rec["ratio"], ratio, 100 * change, 100 * rec["band"])
        lines.append(line)
        if ratio > limit:
            failures.append(
                "%s is slower than recorded: measured ratio %.4g to %s, recorded %.4g, band %.0f%% "
                "(limit %.4g; %s now, %s recorded)" % (name, ratio, tracked["reference"], rec["ratio"],
                                                       100 * rec["band"], limit, fmt_ns(ns), fmt_ns(rec["ns"])))
        elif ratio < rec["ratio"] / (1 + rec["band"]):
            lines.append("  note: %s is faster than its band; `make bench-record` keeps the gain" % name)
    print("bench-check: reference %s = %s (recorded %s)" % (tracked["reference"], fmt_ns(ref),
                                                             fmt_ns(recorded["reference_ns"])))
    for line in lines:
        print("  " + line)
    if failures:
        for f in failures:
            print("bench-check: FAIL: " + f, file=sys.stderr)
        return 1
    print("bench-check: %d benchmarks within their bands" % len(tracked["benchmarks"]))
    return 0


def record(binary, tracked, runs, only=None, previous=None, verbose=False):
    """Measure `runs` runs of the tracked benchmarks (or of `only`, keeping the other figures of
    `previous`) and return the new bench/recorded.json, printing one line per benchmark."""
    names = list(only) if only else list(tracked["benchmarks"])
    per_run, per_run_counters = [], []
    context = None
    for i in range(runs):
        results = run_bench(binary, tracked, names)
        context = results.get("context", {})
        per_run.append(ratios(results, tracked))
        per_run_counters.append(counters(results))
        if verbose:
            print("bench-check: record run %d of %d done" % (i + 1, runs), file=sys.stderr)
    reference_ns = statistics.median(r[0] for r in per_run)
    if only and previous:
        out = dict(previous)
        out["benchmarks"] = dict(previous["benchmarks"])
    else:
        out = {
            "reference": tracked["reference"],
            "reference_ns": reference_ns,
            "runs": runs,
            "recorded": datetime.date.today().isoformat(),
            "machine": "%s CPUs at %s MHz" % (context.get("num_cpus", "?"), context.get("mhz_per_cpu", "?")),
            "benchmarks": {},
        }
    k, floor, cap = tracked["band_k"], tracked["band_floor"], tracked["band_cap"]
    for name in names:
        rs = [r[1][name][1] for r in per_run if name in r[1]]
        ns = [r[1][name][0] for r in per_run if name in r[1]]
        if len(rs) != runs:
            raise SystemExit("bench-check: %s did not run in every run" % name)
        mid = statistics.median(rs)
        spread = (max(rs) - min(rs)) / mid
        out["benchmarks"][name] = {
            "ratio": mid,
            "ns": statistics.median(ns),
            "spread": spread,
            "band": min(cap, max(k * spread, floor)),
        }
        cs = [c[name] for c in per_run_counters if name in c]
        if cs:
            out["benchmarks"][name]["counters"] = {
                key: statistics.median(c[key] for c in cs if key in c) for key in sorted(cs[0])}
        rec = out["benchmarks"][name]
        print("  %-44s %10s  ratio %10.4g  spread %5.1f%%  band +%.0f%%" % (
            name, fmt_ns(rec["ns"]), rec["ratio"], 100 * rec["spread"], 100 * rec["band"]))
    return out


def fmt_count(v):
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= scale:
            return "%.3g %s" % (v / scale, unit)
    return "%.3g" % v


def fmt_ns(ns):
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= scale:
            return "%.3g %s" % (ns / scale, unit)
    return "%.3g ns" % ns


def table(name, tracked, recorded):
    spec = tracked["tables"].get(name)
    if spec is None:
        raise SystemExit("bench-check: docs name table '%s', which bench/tracked.json does not declare" % name)
    rows = ["| benchmark | CPU time | counters | x %s | band | what |" % tracked["reference"],
            "|---|---|---|---|---|---|"]
    for b in spec:
        rec = recorded["benchmarks"].get(b)
        if rec is None:
            raise SystemExit("bench-check: table '%s' lists %s, which is not recorded" % (name, b))
        cs = ", ".join("%s %s" % (k, fmt_count(v)) for k, v in sorted(rec.get("counters", {}).items()))
        rows.append("| `%s` | %s | %s | %.4g | +%.0f%% | %s |" % (b, fmt_ns(rec["ns"]), cs, rec["ratio"],
                                                             100 * rec["band"], tracked["notes"].get(b, "")))
    rows.append("")
    rows.append("Recorded %s (%s, median of %d runs; %s = %s) by `make bench-record`; `make bench-check` fails a "
                "ratio above its band." % (recorded["recorded"], recorded["machine"], recorded["runs"],
                                           recorded["reference"], fmt_ns(recorded["reference_ns"])))
    return rows


def render(text, tracked, recorded):
    out, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        m = BEGIN.match(lines[i])
        out.append(lines[i])
        i += 1
        if not m:
            continue
        while i < len(lines) and lines[i].strip() != END:
            i += 1
        if i == len(lines):
            raise SystemExit("bench-check: <!-- bench:begin %s --> has no <!-- bench:end -->" % m.group(1))
        out.extend(table(m.group(1), tracked, recorded))
        out.append(lines[i])
        i += 1
    return "\n".join(out)


def docs(tracked, recorded, docs_dir, check_only):
    stale = []
    for fn in sorted(os.listdir(docs_dir)):
        if not fn.endswith(".md"):
            continue
        path = os.path.join(docs_dir, fn)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        new = render(text, tracked, recorded)
        if new == text:
            continue
        stale.append(fn)
        if not check_only:
            with open(path, "w", encoding="utf-8") as f:
                f.write(new)
    if check_only and stale:
        print("bench-check: the speed tables in docs/%s are stale against bench/recorded.json; run "
              "`scripts/bench-check.py docs` (make bench-record does)" % ", docs/".join(stale), file=sys.stderr)
        return 1
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("mode", choices=["check", "record", "docs"])
    p.add_argument("--bench", help="the gpuplan_bench binary")
    p.add_argument("--results", help="check: Google Benchmark JSON to compare instead of running")
    p.add_argument("--runs", type=int, default=None, help="record: runs to measure the noise band over")
    p.add_argument("--check", action="store_true", help="docs: fail when a table is stale, change nothing")
    p.add_argument("--only", help="record: comma-separated benchmarks to re-record, keeping the others")
    p.add_argument("--verbose", action="store_true", default=os.environ.get("VERBOSE") == "1",
                   help="record: a line per run too (also VERBOSE=1)")
    p.add_argument("--tracked", default=TRACKED)
    p.add_argument("--recorded", default=RECORDED)
    p.add_argument("--docs", default=DOCS)
    a = p.parse_args()
    tracked = load_json(a.tracked)
    if a.mode == "check":
        if a.results:
            results = load_json(a.results)
        elif a.bench:
            results = run_bench(a.bench, tracked)
        else:
            p.error("check needs --bench or --results")
        rc = check(results, tracked, load_json(a.recorded))
        if rc and a.bench:
            # A slowdown must show in two runs: one noisy moment on a shared CI machine is not a regression.
            print("bench-check: a benchmark was beyond its band; running the set once more to confirm",
                  file=sys.stderr)
            rc = check(run_bench(a.bench, tracked), tracked, load_json(a.recorded))
        return rc
    if a.mode == "record":
        if not a.bench:
            p.error("record needs --bench")
        only = [n for n in (a.only or "").split(",") if n]
        unknown = [n for n in only if n not in tracked["benchmarks"]]
        if unknown:
            p.error("--only names benchmarks bench/tracked.json does not track: " + ", ".join(unknown))
        previous = load_json(a.recorded) if only and os.path.exists(a.recorded) else None
        recorded = record(a.bench, tracked, a.runs or tracked["record_runs"], only, previous, a.verbose)
        write_json(a.recorded, recorded)
        print("bench-check: wrote %s" % os.path.relpath(a.recorded, ROOT))
        return docs(tracked, recorded, a.docs, False)
    return docs(tracked, load_json(a.recorded), a.docs, a.check)


if __name__ == "__main__":
    sys.exit(main())
