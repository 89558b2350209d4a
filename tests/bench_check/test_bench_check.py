#!/usr/bin/env python3
"""scripts/bench-check.py must be able to fail: fed Google Benchmark JSON fabricated from the recorded
figures, it passes when every benchmark is at its recorded ratio, and fails, naming the benchmark, the
recorded ratio, the measured ratio and the band, when one is 3x slower (or missing). Its docs mode
rewrites a stale table and, with --check, fails on one. Runs on the repository's own bench/tracked.json
and bench/recorded.json, so a tracked benchmark that is not recorded fails here too."""

import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "bench-check.py")
REFERENCE_NS = 12345.0  # any reference time: only ratios are compared


def fabricate(tracked, recorded, slow=None, factor=3.0, drop=None):
    rows = []
    for rep in range(3):
        rows.append({"name": tracked["reference"], "run_name": tracked["reference"], "run_type": "iteration",
                     "repetition_index": rep, "cpu_time": REFERENCE_NS / 1e3, "time_unit": "us"})
        for name in tracked["benchmarks"]:
            if name == drop:
                continue
            ns = recorded["benchmarks"][name]["ratio"] * REFERENCE_NS * (factor if name == slow else 1.0)
            rows.append({"name": name + "/iterations:7", "run_name": name + "/iterations:7",
                         "run_type": "iteration", "repetition_index": rep, "cpu_time": ns, "time_unit": "ns"})
        # Aggregates are ignored (the checker takes its own median of the iterations).
        rows.append({"name": tracked["reference"] + "_median", "run_name": tracked["reference"],
                     "run_type": "aggregate", "cpu_time": 1e12, "time_unit": "ns"})
    return {"context": {"num_cpus": 2}, "benchmarks": rows}


def run(args):
    return subprocess.run([sys.executable, SCRIPT] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def check_with(results):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(results, f)
        path = f.name
    try:
        return run(["check", "--results", path])
    finally:
        os.unlink(path)


def expect(cond, message, proc=None):
    if not cond:
        print("FAIL: " + message)
        if proc is not None:
            print(proc.stdout)
            print(proc.stderr)
        sys.exit(1)
    print("ok: " + message)


def main():
    tracked = json.load(open(os.path.join(ROOT, "bench", "tracked.json"), encoding="utf-8"))
    recorded = json.load(open(os.path.join(ROOT, "bench", "recorded.json"), encoding="utf-8"))
    for name in tracked["benchmarks"]:
        expect(name in recorded["benchmarks"], "%s is recorded" % name)
        expect(recorded["benchmarks"][name]["band"] < 2.0, "%s's band is below 200%% (a 3x slowdown fails)" % name)

    p = check_with(fabricate(tracked, recorded))
    expect(p.returncode == 0, "every benchmark at its recorded ratio passes", p)

    slow = "BM_FitAllTargets"
    rec = recorded["benchmarks"][slow]
    p = check_with(fabricate(tracked, recorded, slow=slow))
    expect(p.returncode != 0, "%s 3x slower fails" % slow, p)
    expect("FAIL: %s is slower than recorded" % slow in p.stderr, "the failure names the benchmark", p)
    expect("recorded %.4g" % rec["ratio"] in p.stderr and "measured ratio %.4g" % (3 * rec["ratio"]) in p.stderr,
           "the failure states the recorded and the measured ratio", p)
    expect("band %.0f%%" % (100 * rec["band"]) in p.stderr, "the failure states the band", p)
    expect(p.stderr.count("FAIL:") == 1, "only the slow benchmark fails", p)

    p = check_with(fabricate(tracked, recorded, slow=slow, factor=0.5))
    expect(p.returncode == 0 and "faster than its band" in p.stdout, "a 2x faster benchmark passes with a note", p)

    p = check_with(fabricate(tracked, recorded, drop=slow))
    expect(p.returncode != 0 and "%s: did not run" % slow in p.stderr, "a tracked benchmark that did not run fails", p)

    # Docs: a stale table is rewritten; --check fails on it and passes after.
    tmp = tempfile.mkdtemp()
    try:
        doc = os.path.join(tmp, "x.md")
        with open(doc, "w", encoding="utf-8") as f:
            f.write("# x\n\n<!-- bench:begin fit -->\n| stale |\n<!-- bench:end -->\n\ntext after\n")
        p = run(["docs", "--check", "--docs", tmp])
        expect(p.returncode != 0 and "x.md" in p.stderr, "a stale docs table fails docs --check", p)
        p = run(["docs", "--docs", tmp])
        expect(p.returncode == 0, "docs rewrites it", p)
        text = open(doc, encoding="utf-8").read()
        expect("`BM_FitAllTargets`" in text and "| stale |" not in text and text.endswith("text after\n"),
               "the table lists the benchmarks, the text around it is kept")
        p = run(["docs", "--check", "--docs", tmp])
        expect(p.returncode == 0, "docs --check passes on a fresh table", p)
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
