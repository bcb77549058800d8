"""Compares two float32 .npy files element by element.

Usage: compare_npy.py A.npy B.npy ATOL RTOL
Exits 1, naming the worst element, unless |a - b| <= ATOL + RTOL * |b| for
every element; needs no numpy.
"""
import ast
import struct
import sys


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY":
        sys.exit(f"{path}: not a .npy file")
    major = data[6]
    if major == 1:
        (length,), start = struct.unpack("<H", data[8:10]), 10
    else:
        (length,), start = struct.unpack("<I", data[8:12]), 12
    header = ast.literal_eval(data[start:start + length].decode("latin1"))
    if header["descr"] != "<f4" or header["fortran_order"]:
        sys.exit(f"{path}: expected C-ordered little-endian float32")
    body = data[start + length:]
    return header["shape"], struct.unpack(f"<{len(body) // 4}f", body)


def main():
    (shape_a, a), (shape_b, b) = load(sys.argv[1]), load(sys.argv[2])
    atol, rtol = float(sys.argv[3]), float(sys.argv[4])
    if shape_a != shape_b:
        sys.exit(f"shapes differ: {shape_a} vs {shape_b}")
    worst, where = 0.0, -1
    for i, (x, y) in enumerate(zip(a, b)):
        excess = abs(x - y) - (atol + rtol * abs(y))
        if where < 0 or excess > worst:
            worst, where = excess, i
    if worst > 0:
        sys.exit(f"element {where}: {a[where]} vs {b[where]} exceeds "
                 f"{atol} + {rtol} * |b|")
    print(f"{len(a)} elements agree within {atol} + {rtol} * |b|")


if __name__ == "__main__":
    main()
