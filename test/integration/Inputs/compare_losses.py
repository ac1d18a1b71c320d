"""Compares the `step N loss X` lines of two loom train outputs over the
steps they share: compare_losses.py A.txt B.txt TOL [FIRST_STEP].
Passes when every shared step's loss agrees within TOL relative and at
least one step is shared."""
import re
import sys


def losses(path):
    return {int(m.group(1)): float(m.group(2))
            for m in re.finditer(r"^step (\d+) loss (\S+)", open(path).read(), re.M)}


a, b, tol = losses(sys.argv[1]), losses(sys.argv[2]), float(sys.argv[3])
first = int(sys.argv[4]) if len(sys.argv) > 4 else 0
shared = sorted(s for s in set(a) & set(b) if s >= first)
worst = max((abs(a[s] - b[s]) / abs(b[s]) for s in shared), default=float("inf"))
ok = bool(shared) and worst <= tol
print("%s: steps %s..%s, worst relative loss difference %.3e (tolerance %.0e)" % (
    "PASS" if ok else "FAIL", shared[0] if shared else "-", shared[-1] if shared else "-", worst, tol))
sys.exit(0 if ok else 1)
