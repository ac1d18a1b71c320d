"""Writes .npy files of token ids from a raw uint16 token file, without NumPy
(CI has none): make_token_npy.py TOKENS.u16.bin OUT_DIR.
OUT_DIR gets i64.npy, i32.npy (the same ids), f32.npy (float ids), 2d.npy
(a [2, 500] array) and neg.npy (id 7 set to -3)."""
import struct
import sys


def save(path, descr, shape, values, fmt):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, "".join("%d, " % d for d in shape) if len(shape) == 1 else ", ".join(map(str, shape)))
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + " " * pad + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        f.write(struct.pack("<%d%s" % (len(values), fmt), *values))


raw = open(sys.argv[1], "rb").read()
ids = list(struct.unpack("<%dH" % (len(raw) // 2), raw))
out = sys.argv[2]
save(out + "/i64.npy", "<i8", [len(ids)], ids, "q")
save(out + "/i32.npy", "<i4", [len(ids)], ids, "i")
save(out + "/f32.npy", "<f4", [len(ids)], [float(v) for v in ids], "f")
save(out + "/2d.npy", "<i8", [2, 500], ids[:1000], "q")
neg = list(ids)
neg[7] = -3
save(out + "/neg.npy", "<i8", [len(neg)], neg, "q")
