"""Copies a float32 .npy with its first element set to NaN or infinity.

usage: poison_npy.py IN OUT [nan|inf]
"""

import math
import struct
import sys


def main():
    source, target = sys.argv[1:3]
    value = {"nan": math.nan, "inf": math.inf}[sys.argv[3] if len(sys.argv) > 3
                                                else "nan"]
    data = bytearray(open(source, "rb").read())
    assert data[:6] == b"\x93NUMPY" and data[6] == 1, "npy version 1.0"
    start = 10 + struct.unpack("<H", data[8:10])[0]
    assert b"'<f4'" in data[10:start], "float32 data"
    data[start:start + 4] = struct.pack("<f", value)
    open(target, "wb").write(bytes(data))


if __name__ == "__main__":
    main()
