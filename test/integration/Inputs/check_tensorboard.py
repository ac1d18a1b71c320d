"""Checks loom's TensorBoard event file against its JSONL log: every step's
loss, grad_norm, lr and tokens_per_s (as float32) and a memory_gib scalar.

    check_tensorboard.py TB_DIR LOG.jsonl [--tensorboard]

Without --tensorboard the file is read by the independent reader below
(TFRecord framing with CRC-32C checks, the Event/Summary protobuf fields by
hand): CI has no tensorboard package. With it, TensorBoard's own
EventAccumulator reads the folder (the GPU machine has the package)."""
import glob
import json
import struct
import sys


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(c):
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def varint(buf, i):
    """(value, next index) of the base-128 varint at buf[i]."""
    v, shift = 0, 0
    while True:
        b = buf[i]; i += 1
        v |= (b & 0x7F) << shift; shift += 7
        if b < 0x80:
            return v, i


def fields(buf):
    """(field, wire type, value) of a protobuf message."""
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(buf, i)
        elif wt == 1:
            v = buf[i:i + 8]; i += 8
        elif wt == 5:
            v = buf[i:i + 4]; i += 4
        elif wt == 2:
            n, i = varint(buf, i)
            v = buf[i:i + n]; i += n
        else:
            raise ValueError("wire type %d" % wt)
        yield f, wt, v


def read_own(folder):
    files = glob.glob(folder + "/events.out.tfevents.*")
    assert len(files) == 1, files
    data = open(files[0], "rb").read()
    at, version, scalars = 0, None, {}
    while at < len(data):
        (n,) = struct.unpack_from("<Q", data, at)
        assert struct.unpack_from("<I", data, at + 8)[0] == masked(crc32c(data[at:at + 8])), "length crc"
        rec = data[at + 12:at + 12 + n]
        assert struct.unpack_from("<I", data, at + 12 + n)[0] == masked(crc32c(rec)), "data crc"
        at += 12 + n + 4
        step = None
        for f, wt, v in fields(rec):
            if f == 2:
                step = v
            elif f == 3:
                version = v.decode()
            elif f == 5:
                for _, _, value in fields(v):
                    kv = {ff: vv for ff, _, vv in fields(value)}
                    scalars.setdefault(kv[1].decode(), {})[step] = struct.unpack("<f", kv[2])[0]
    assert version == "brain.Event:2", version
    return scalars


def read_tensorboard(folder):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    acc = EventAccumulator(folder, size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: {e.step: e.value for e in acc.Scalars(tag)} for tag in acc.Tags()["scalars"]}


folder, log = sys.argv[1], sys.argv[2]
scalars = read_tensorboard(folder) if "--tensorboard" in sys.argv else read_own(folder)
steps = [json.loads(line) for line in open(log)]
f32 = lambda x: struct.unpack("<f", struct.pack("<f", x))[0]
bad = 0
for rec in steps:
    for tag in ("loss", "grad_norm", "lr", "tokens_per_s"):
        got = scalars.get(tag, {}).get(rec["step"])
        want = f32(rec[tag]) if tag != "tokens_per_s" else rec[tag]
        tol = 0.0 if tag != "tokens_per_s" else 0.06  # the log rounds tokens/s to 0.1
        if got is None or abs(got - want) > tol:
            print("step %d %s: event file %r, log %r" % (rec["step"], tag, got, want)); bad += 1
    if rec["step"] not in scalars.get("memory_gib", {}):
        print("step %d: no memory_gib" % rec["step"]); bad += 1
print("%s: %d steps x %d scalars, %s" % ("tensorboard" if "--tensorboard" in sys.argv else "own reader",
                                          len(steps), len(scalars), "PASS" if bad == 0 else "FAIL"))
sys.exit(1 if bad else 0)
