"""Compares two `switchyard train --summary` files, step by step.

Usage: compare_losses.py EXPECTED.json ACTUAL.json [--atol A] [--rtol R]

The training loss, gradient norm and learning rate of every step, and every
validation loss, must agree: |actual - expected| <= atol + rtol * |expected|.
Prints one line per quantity with the worst step; exits 1 on a mismatch.
"""
import argparse
import json
import sys

parser = argparse.ArgumentParser()
parser.add_argument("expected")
parser.add_argument("actual")
parser.add_argument("--atol", type=float, default=1e-4)
parser.add_argument("--rtol", type=float, default=2e-3)
args = parser.parse_args()

with open(args.expected) as f:
    expected = json.load(f)
with open(args.actual) as f:
    actual = json.load(f)

ok = True
for section, keys in (("train", ("loss", "grad_norm", "lr")),
                      ("validation", ("loss", "bits_per_byte"))):
    a, b = expected[section], actual[section]
    if len(a) != len(b) or not a:
        print(f"{section}: MISMATCH: {len(a)} records against {len(b)}")
        ok = False
        continue
    for key in keys:
        worst, worst_step = 0.0, None
        for x, y in zip(a, b):
            if x["step"] != y["step"]:
                print(f"{section}: MISMATCH: step {x['step']} against {y['step']}")
                ok = False
            ratio = abs(y[key] - x[key]) / (args.atol + args.rtol * abs(x[key]))
            if ratio >= worst:
                worst, worst_step = ratio, x["step"]
        verdict = "ok" if worst <= 1.0 else "MISMATCH"
        ok &= worst <= 1.0
        print(f"{section} {key}: {len(a)} steps, worst at step {worst_step} "
              f"({worst:.2f} of the tolerance): {verdict}")
sys.exit(0 if ok else 1)
