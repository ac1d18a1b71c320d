#!/usr/bin/env python3
# Compares a `loom train --log` JSONL file with a loss curve recorded by
# PyTorch in the fixtures' reference.json (see shared/reference).
#
#   check_curve.py RUN.jsonl reference.json MODEL fp32|bf16 \
#       --max-loss-diff D [--grad-norm-rel R] [--skip-unstable U]
#
# --skip-unstable U leaves out of the bounds the steps where PyTorch's own
# fp32 and bf16 reference runs differ by more than U: there the training is
# chaotic (the reference itself moves by more than the bound under rounding
# noise), so no emulation can be held to it. Those steps are still printed.
#
# Prints the max and mean |loss difference| and the max relative grad-norm
# difference over the steps both have, and exits 1 when a bound is broken
# or the run is shorter than the reference.
import argparse
import json
import sys

p = argparse.ArgumentParser()
p.add_argument("log")
p.add_argument("reference")
p.add_argument("model")
p.add_argument("precision", choices=["fp32", "bf16"])
p.add_argument("--max-loss-diff", type=float, required=True)
p.add_argument("--grad-norm-rel", type=float, default=None)
p.add_argument("--skip-unstable", type=float, default=None)
a = p.parse_args()

model = json.load(open(a.reference))["models"][a.model]
ref = model["curve_" + a.precision]
rows = [json.loads(line) for line in open(a.log) if line.strip()]
by_step = {r["step"]: r for r in rows}
n = len(ref["loss"])
missing = [s for s in range(n) if s not in by_step]
if missing:
    print(f"FAIL: the run has no step {missing[0]} (reference has {n} steps)")
    sys.exit(1)
dl = [abs(by_step[s]["loss"] - ref["loss"][s]) for s in range(n)]
dg = [abs(by_step[s]["grad_norm"] - ref["grad_norm"][s]) / abs(ref["grad_norm"][s]) for s in range(n)]
checked = list(range(n))
skipped = []
if a.skip_unstable is not None:
    f32, b16 = model["curve_fp32"]["loss"], model["curve_bf16"]["loss"]
    skipped = [s for s in range(n) if abs(f32[s] - b16[s]) > a.skip_unstable]
    checked = [s for s in range(n) if s not in skipped]
worst = max(checked, key=lambda s: dl[s])
ok = dl[worst] <= a.max_loss_diff
line = (f"{a.model} {a.precision}: {n} steps, loss |diff| max {dl[worst]:.3e} (step {worst}) "
        f"mean {sum(dl[s] for s in checked) / len(checked):.3e} (bound {a.max_loss_diff:.1e}); "
        f"grad_norm rel diff max {max(dg[s] for s in checked):.3e}")
if skipped:
    line += ("; unstable in the reference (fp32 vs bf16 > %.0e), not bounded: " % a.skip_unstable +
             ", ".join(f"step {s} |diff| {dl[s]:.3e}" for s in skipped))
if a.grad_norm_rel is not None:
    ok = ok and max(dg[s] for s in checked) <= a.grad_norm_rel
    line += f" (bound {a.grad_norm_rel:.1e})"
print(("PASS: " if ok else "FAIL: ") + line)
sys.exit(0 if ok else 1)
