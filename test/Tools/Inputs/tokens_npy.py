"""Writes an int32 .npy of token ids [ROWS, COLS] (id = 7·i mod 256).

usage: tokens_npy.py ROWS COLS OUT
"""

import struct
import sys


def main():
    rows, cols, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    header = "{'descr': '<i4', 'fortran_order': False, 'shape': (%d, %d), }" % (
        rows, cols)
    header += " " * (64 - 10 - len(header) - 1) + "\n"
    with open(out, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)))
        f.write(header.encode())
        f.write(struct.pack("<%di" % (rows * cols),
                            *[(i * 7) % 256 for i in range(rows * cols)]))


if __name__ == "__main__":
    main()
