"""Trains a model with --ac none and with each recompute policy and checks
that every policy gives the same bits: the printed losses, grad norms and
learning rates of every step (%.9g, enough to round-trip an f32) and the
exported weights, byte for byte.

    check_recompute.py LOOM MODEL DATA OUTDIR [--precision P] [--plan PLAN]
                       [--policies full,selective,budget] [--steps N]
                       [--backend cpu|cuda]

A policy written full@N applies it to every N-th layer (--ac-layers
every=N). The budget policy runs at the midpoint between the step's footprint with
every layer recomputed and without recompute, both read from loom's own
error for a budget below the minimum (so the check also sees that error).
One line per policy; exit status 1 on any difference.
"""
import argparse
import os
import re
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("loom")
ap.add_argument("model")
ap.add_argument("data")
ap.add_argument("out")
ap.add_argument("--precision", default="fp32")
ap.add_argument("--plan", default="1")
ap.add_argument("--policies", default="full,selective,budget")
ap.add_argument("--steps", type=int, default=20)
ap.add_argument("--backend", default="cpu")
args = ap.parse_args()
os.makedirs(args.out, exist_ok=True)
tag = f"{os.path.basename(args.model).split('.')[0]}-{args.precision}-{args.plan.replace(',', '_')}"


def train(name, extra, expect_ok=True):
    weights = os.path.join(args.out, f"{tag}-{name}.safetensors")
    cmd = [args.loom, "train", args.model, "--data", args.data, "--batch", "4", "--seq", "64",
           "--steps", str(args.steps), "--batching", "fixture", "--precision", args.precision,
           "--plan", args.plan, "--backend", args.backend, "--print-every", "1",
           "--export-weights", weights] + extra
    r = subprocess.run(cmd, capture_output=True, text=True)
    if expect_ok and r.returncode != 0:
        print(f"FAIL {name}: {' '.join(cmd)}: {(r.stderr or r.stdout).strip().splitlines()[-1:]}")
        sys.exit(1)
    steps = [re.sub(r" tok/s.*", "", l) for l in r.stdout.splitlines() if l.startswith("step ")]
    arena = re.search(r"arena ([0-9.]+) MiB", r.stdout)
    ops = re.search(r"re-runs ([0-9]+) forward ops", r.stdout)
    return r, steps, weights, float(arena.group(1)) if arena else float("nan"), int(ops.group(1)) if ops else 0


_, base_steps, base_weights, base_arena, _ = train("none", [])
if len(base_steps) != args.steps:
    print(f"FAIL none: {len(base_steps)} step lines, expected {args.steps}")
    sys.exit(1)
base_bytes = open(base_weights, "rb").read()
ok = True
for spec in args.policies.split(","):
    policy, _, every = spec.partition("@")
    extra = ["--ac", policy] + (["--ac-layers", f"every={every}"] if every else [])
    note = f" every={every}" if every else ""
    if policy == "budget":
        r, _, _, _, _ = train("budget-too-small", extra + ["--ac-memory-budget", "1e-9"], expect_ok=False)
        m = re.search(r"below the smallest footprint of this step, ([0-9.e+-]+) GiB .*; ([0-9.e+-]+) GiB "
                      r"without recompute\)", r.stderr)
        if r.returncode == 0 or not m or len(r.stderr.strip().splitlines()) != 1:
            print(f"FAIL budget: a budget of 1e-9 GiB was not refused with one line: {r.stderr.strip()}")
            sys.exit(1)
        least, none = float(m.group(1)), float(m.group(2))
        budget = (least + none) / 2
        extra += ["--ac-memory-budget", f"{budget:.6g}"]
        note += f" at {budget:.4g} GiB (between {least:.4g} and {none:.4g})"
    _, steps, weights, arena, ops = train(spec.replace("@", "-every"), extra)
    same_steps = steps == base_steps
    same_weights = open(weights, "rb").read() == base_bytes
    status = "PASS" if same_steps and same_weights else "FAIL"
    ok &= status == "PASS"
    what = ("losses and weights bit-identical to --ac none" if status == "PASS" else
            ("losses differ" if not same_steps else "") + (" weights differ" if not same_weights else ""))
    print(f"{status} {policy}{note} ({args.plan}, {args.precision}): {len(steps)} steps, {what}; "
          f"re-runs {ops} ops, arena {arena:.2f} MiB (none {base_arena:.2f} MiB)")
sys.exit(0 if ok else 1)
