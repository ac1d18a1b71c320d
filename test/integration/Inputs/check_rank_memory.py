"""Reads `loom train --plan ...` output on stdin and checks that the
per-rank parameter, gradient and optimizer-state bytes are exactly
1/FACTOR of one device's."""
import re
import sys

factor = int(sys.argv[1])
text = sys.stdin.read()
m = re.search(r"memory per rank: parameters (\d+) B, gradients (\d+) B, optimizer state (\d+) B "
              r"\(one device: (\d+) B, (\d+) B, (\d+) B\)", text)
if not m:
    sys.exit("no 'memory per rank' line in the output")
rank = [int(x) for x in m.groups()[:3]]
one = [int(x) for x in m.groups()[3:]]
for what, r, o in zip(["parameters", "gradients", "optimizer state"], rank, one):
    if r * factor != o:
        sys.exit(f"FAIL: {what}: {r} B per rank, one device {o} B: not 1/{factor}")
print(f"PASS: parameters, gradients and optimizer state per rank are 1/{factor} of one device")
