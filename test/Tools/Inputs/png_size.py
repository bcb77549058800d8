"""Prints a PNG file's width and height ("W x H") from its IHDR chunk, and
fails unless the file is a PNG with pixels."""
import struct
import sys

data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG file"
assert data[12:16] == b"IHDR", "no IHDR chunk first"
width, height = struct.unpack(">II", data[16:24])
assert width > 0 and height > 0 and len(data) > 100, "an empty image"
print(f"{width} x {height}")
