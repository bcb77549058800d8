#!/usr/bin/env python3
"""Checks that two `switchyard train --summary` files agree step by step.

    same_losses.py A.json B.json [--steps FIRST-LAST] [--tolerance T]

Every training step of B in the range (default: all of B's) must be in A
with the same loss and gradient norm to a relative tolerance (default
1e-5: f32 sums in another order), and the final validation losses too when
both runs end at the same step. Prints what it compared; exits 1 on a
difference.
"""
import json
import sys


def main():
    args = sys.argv[1:]
    tolerance, first, last = 1e-5, None, None
    if "--tolerance" in args:
        i = args.index("--tolerance")
        tolerance = float(args[i + 1])
        del args[i:i + 2]
    if "--steps" in args:
        i = args.index("--steps")
        first, last = (int(x) for x in args[i + 1].split("-"))
        del args[i:i + 2]
    a, b = (json.load(open(path)) for path in args)
    steps = {s["step"]: s for s in a["train"]}
    compared = 0
    for s in b["train"]:
        if first is not None and not first <= s["step"] <= last:
            continue
        t = steps.get(s["step"])
        if t is None:
            print(f"step {s['step']} of {args[1]} is not in {args[0]}")
            return 1
        for key in ("loss", "grad_norm"):
            if abs(s[key] - t[key]) > tolerance * abs(t[key]):
                print(f"step {s['step']}: {key} {t[key]} against {s[key]}")
                return 1
        compared += 1
    if compared == 0:
        print("no steps compared")
        return 1
    va, vb = a["validation"][-1], b["validation"][-1]
    if va["step"] == vb["step"] and \
            abs(va["loss"] - vb["loss"]) > tolerance * abs(va["loss"]):
        print(f"validation: {va['loss']} against {vb['loss']}")
        return 1
    print(f"{compared} steps agree to {tolerance}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
