"""Compares two safetensors files (f32): the same tensor names and shapes,
and values within a relative L2 tolerance per tensor."""
import json
import math
import struct
import sys


def read(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        blob = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        if t["dtype"] != "F32":
            sys.exit(f"{path}: {name} is {t['dtype']}, expected F32")
        a, b = t["data_offsets"]
        out[name] = (t["shape"], struct.unpack(f"<{(b - a) // 4}f", blob[a:b]))
    return out


one, two = read(sys.argv[1]), read(sys.argv[2])
tol = float(sys.argv[3])
if sorted(one) != sorted(two):
    sys.exit("FAIL: the files name different tensors")
for name in one:
    (s1, v1), (s2, v2) = one[name], two[name]
    if s1 != s2:
        sys.exit(f"FAIL: {name}: shape {s1} vs {s2}")
    d = math.sqrt(sum((x - y) ** 2 for x, y in zip(v1, v2)))
    r = math.sqrt(sum(x * x for x in v1))
    if d > tol * max(r, 1e-30):
        sys.exit(f"FAIL: {name}: relative L2 difference {d / r:.3e}")
print(f"PASS: {len(one)} tensors")
