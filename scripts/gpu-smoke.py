#!/usr/bin/env python3
"""The agent's read-only GPU smoke test (issue #15): what `gpuplan agent --once --json` reads through NVML
against what nvidia-smi prints, GPU by GPU and field by field.

  gpu-smoke.py run --gpuplan BUILD/gpuplan       query this machine (exit 77, "SKIPPED", without a GPU)
  gpu-smoke.py compare AGENT.json SMI.csv        compare two recorded outputs (exit 1 on a mismatch)
  gpu-smoke.py self-test DIR                     every case under DIR (tests/data/gpu_smoke): each holds
                                                 agent.json, nvidia-smi.csv and expect ("match", or
                                                 "mismatch FIELD": the comparison must fail on FIELD)

nvidia-smi is run as `nvidia-smi --query-gpu=uuid,name,pci.bus_id,memory.total,mig.mode.current
--format=csv`, a read; the agent with its default MIG policy (NVML read calls only). Neither changes the
MIG mode or anything else of the GPU.

Fields and how they compare (nvidia-smi's CSV: a header with units, "81559 MiB", "Enabled"):
  uuid            equal
  name            equal
  pci_bus_id      equal after lower-casing and padding the PCI domain to 8 hex digits (NVML's busId is
                  "00000000:18:00.0"; some tools print the 4-digit legacy "0000:18:00.0")
  memory.total    the agent's bytes in whole MiB (floor) equal to nvidia-smi's MiB: both read NVML's total
                  (an H100 80GB HBM3: 85520809984 bytes = 81559 MiB)
  mig.mode        the agent's "enabled" / "disabled" equal to nvidia-smi's, case-folded; nvidia-smi's
                  "[N/A]" (no MIG on this GPU) against the agent's absent or empty mig_mode
The set of GPUs must be the same (by uuid).

Python 3 with the standard library only (Debian's python3).
"""
import csv
import io
import json
import os
import shutil
import subprocess
import sys

SKIP = 77  # ctest's SKIP_RETURN_CODE: no GPU, no nvidia-smi, or no driver
MIB = 1024 * 1024
QUERY = "uuid,name,pci.bus_id,memory.total,mig.mode.current"
TIMEOUT_SECONDS = 120  # nvidia-smi and the agent answer in ~1 s; a hung driver must not hang the test


def parse_smi(text):
    """nvidia-smi --format=csv text -> {uuid: {field: value}}; the header names the columns."""
    rows = list(csv.reader(io.StringIO(text), skipinitialspace=True))
    rows = [r for r in rows if any(c.strip() for c in r)]
    if not rows:
        raise ValueError("nvidia-smi printed nothing")
    header = [h.split(" [")[0].strip() for h in rows[0]]  # "memory.total [MiB]" -> "memory.total"
    want = QUERY.split(",")
    if header != want:
        raise ValueError("nvidia-smi's header is %s, not %s" % (header, want))
    out = {}
    for r in rows[1:]:
        if len(r) != len(want):
            raise ValueError("nvidia-smi row %r has %d fields, not %d" % (r, len(r), len(want)))
        g = dict(zip(want, (c.strip() for c in r)))
        mem = g["memory.total"].split()
        if not mem or not mem[0].isdigit() or (len(mem) > 1 and mem[1] != "MiB"):
            raise ValueError("memory.total %r is not 'N MiB'" % g["memory.total"])
        g["memory.total"] = int(mem[0])
        out[g["uuid"]] = g
    return out


def parse_agent(text):
    """`gpuplan agent --once --json` (the inventory) -> {uuid: gpu}."""
    inv = json.loads(text)
    gpus = inv.get("gpus") if isinstance(inv, dict) else None
    if not isinstance(gpus, list):
        raise ValueError("the agent's output has no gpus list")
    return {g.get("uuid", ""): g for g in gpus if isinstance(g, dict)}


def bus_id(text):
    """A PCI bus id as NVML's busId writes it: 8-digit domain, lower case."""
    t = text.strip().lower()
    parts = t.split(":")
    if len(parts) == 3 and len(parts[0]) < 8:
        parts[0] = parts[0].rjust(8, "0")
    return ":".join(parts)


def compare(agent_text, smi_text):
    """The mismatches: a list of (uuid, field, agent's value, nvidia-smi's value)."""
    agent = parse_agent(agent_text)
    smi = parse_smi(smi_text)
    bad = []
    for uuid in sorted(set(agent) | set(smi)):
        if uuid not in agent:
            bad.append((uuid, "gpu", "absent", "present"))
            continue
        if uuid not in smi:
            bad.append((uuid, "gpu", "present", "absent"))
            continue
        a, s = agent[uuid], smi[uuid]
        if a.get("name", "") != s["name"]:
            bad.append((uuid, "name", a.get("name"), s["name"]))
        if bus_id(a.get("pci_bus_id", "")) != bus_id(s["pci.bus_id"]):
            bad.append((uuid, "pci_bus_id", a.get("pci_bus_id"), s["pci.bus_id"]))
        mem = a.get("memory_bytes")
        if not isinstance(mem, int) or mem // MIB != s["memory.total"]:
            bad.append((uuid, "memory.total", mem, "%d MiB" % s["memory.total"]))
        mode = (a.get("mig_mode") or "").lower()
        smi_mode = s["mig.mode.current"].lower()
        if smi_mode in ("[n/a]", "n/a", "[not supported]"):
            smi_mode = ""
        if mode != smi_mode:
            bad.append((uuid, "mig.mode", a.get("mig_mode"), s["mig.mode.current"]))
    return bad, len(smi)


def report(bad, gpus):
    for uuid, field, a, s in bad:
        print("MISMATCH %s %s: agent %r, nvidia-smi %r" % (uuid, field, a, s))
    if not bad:
        print("ok: %d GPU(s), uuid, name, pci_bus_id, memory.total and mig.mode agree" % gpus)
    return 1 if bad else 0


def run(gpuplan):
    smi = shutil.which("nvidia-smi")
    if not smi:
        print("SKIPPED: no nvidia-smi on this machine")
        return SKIP
    try:
        s = subprocess.run([smi, "--query-gpu=" + QUERY, "--format=csv"], capture_output=True, text=True,
                           timeout=TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        print("nvidia-smi did not answer in %d s" % TIMEOUT_SECONDS)
        return 1
    if s.returncode != 0 or "uuid" not in s.stdout:
        print("SKIPPED: nvidia-smi finds no GPU (exit %d): %s" % (s.returncode, (s.stderr or s.stdout).strip()))
        return SKIP
    a = subprocess.run([gpuplan, "agent", "--once", "--json", "--nvml", "nvml"], capture_output=True, text=True,
                       timeout=TIMEOUT_SECONDS)
    if a.returncode != 0:
        print("gpuplan agent --once --json failed (exit %d): %s" % (a.returncode, a.stderr.strip()))
        return 1
    print("nvidia-smi:\n" + s.stdout.strip())
    print("agent:\n" + a.stdout.strip())
    bad, gpus = compare(a.stdout, s.stdout)
    return report(bad, gpus)


def self_test(root):
    cases = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    failed = 0
    for c in cases:
        d = os.path.join(root, c)
        with open(os.path.join(d, "agent.json")) as f:
            agent_text = f.read()
        with open(os.path.join(d, "nvidia-smi.csv")) as f:
            smi_text = f.read()
        with open(os.path.join(d, "expect")) as f:
            expect = f.read().split()
        bad, _ = compare(agent_text, smi_text)
        fields = sorted(set(b[1] for b in bad))
        if expect[0] == "match":
            ok = not bad
        else:
            ok = fields == sorted(expect[1:])
        print("%s %s: expected %s, found %s" % ("ok  " if ok else "FAIL", c, " ".join(expect),
                                                 ("mismatch " + " ".join(fields)) if bad else "match"))
        failed += 0 if ok else 1
    if not cases:
        print("no cases under %s" % root)
        return 1
    return 1 if failed else 0


def main(argv):
    if len(argv) >= 3 and argv[1] == "run" and argv[2] == "--gpuplan" and len(argv) == 4:
        return run(argv[3])
    if len(argv) == 4 and argv[1] == "compare":
        with open(argv[2]) as f:
            agent_text = f.read()
        with open(argv[3]) as f:
            smi_text = f.read()
        return report(*compare(agent_text, smi_text))
    if len(argv) == 3 and argv[1] == "self-test":
        return self_test(argv[2])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
