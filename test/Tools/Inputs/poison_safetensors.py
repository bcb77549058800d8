"""Copies a safetensors file with one element of one float32 tensor set to
NaN or infinity: a damaged or diverged weight file for the tests.

usage: poison_safetensors.py IN OUT TENSOR [nan|inf]
"""

import json
import math
import struct
import sys


def main():
    source, target, name = sys.argv[1:4]
    value = {"nan": math.nan, "inf": math.inf}[sys.argv[4] if len(sys.argv) > 4
                                                else "nan"]
    data = bytearray(open(source, "rb").read())
    size = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + size])
    entry = header[name]
    assert entry["dtype"] == "F32", entry
    offset = 8 + size + entry["data_offsets"][0]
    data[offset:offset + 4] = struct.pack("<f", value)
    open(target, "wb").write(bytes(data))


if __name__ == "__main__":
    main()
