#!/usr/bin/env python3
# Writes the PTX of every gpu.binary in an MLIR file (emitted with
# format=isa) to OUTDIR/<binary name>.ptx and prints the paths, so that lit
# tests can assemble it with ptxas. MLIR escapes a string attribute's
# backslashes as \\ and other unprintable bytes as \XX (hex).
import re
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: extract_ptx.py INPUT.mlir OUTDIR")
    text = open(sys.argv[1], encoding="utf-8").read()
    found = 0
    for binary in re.finditer(r'gpu\.binary @([\w$.]+)', text):
        name = binary.group(1)
        asm = re.compile(r'assembly = "((?:[^"\\]|\\.)*)"').search(
            text, binary.end())
        if not asm:
            sys.exit(f"extract_ptx.py: gpu.binary @{name} holds no PTX "
                     "(was it emitted with format=isa?)")
        ptx = re.sub(r'\\(\\|[0-9A-Fa-f]{2})',
                     lambda m: '\\' if m.group(1) == '\\'
                     else chr(int(m.group(1), 16)), asm.group(1))
        path = f"{sys.argv[2]}/{name}.ptx"
        with open(path, "w", encoding="utf-8") as out:
            out.write(ptx)
        print(path)
        found += 1
    if not found:
        sys.exit("extract_ptx.py: no gpu.binary in " + sys.argv[1])


if __name__ == "__main__":
    main()
