#!/usr/bin/python3
"""The paper-scale training benchmark's table (bench/gpu.sh, phases
paper-47m and paper-262m): tokens/s, step time and MFU of every row of
`switchyard-bench --train-step ... --json`, and the ratios the whole-step
issue targets.

    paper_summary.py --peak TFLOPS --cost MODEL.mlir=COST.json ... RESULT.json
    paper_summary.py --measure-peak     (prints torch.mm's bf16 TFLOP/s)

RESULT.json is switchyard-bench's: rows in order, each model's Switchyard
row followed by its PyTorch rows ("peer": true). COST.json is `switchyard
cost --json MODEL.mlir`: the model's multiply-accumulates per sequence
("totals"/"macs", every matmul-like op, attention's products included).
A training step's model FLOPs are 6 x MACs x sequences (2 FLOPs per MAC,
the backward pass twice the forward's); MFU is the model FLOPs per second
over the bf16 peak that torch.mm measured in the same run. The first
model of the file is the SwitchHead model, the second its dense
baseline."""

import argparse
import json
import sys
from pathlib import Path


def measure_peak():
    """torch.mm's bf16 TFLOP/s at 8192^3 on the GPU: the median of 20."""
    import time
    import torch
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(5):
        a @ b
    times = []
    for _ in range(20):
        torch.cuda.synchronize()
        start = time.perf_counter()
        a @ b
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    times.sort()
    return 2.0 * n ** 3 / times[len(times) // 2] / 1e12


def main():
    if sys.argv[1:] == ["--measure-peak"]:
        print(f"{measure_peak():.1f}")
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("result", type=Path)
    parser.add_argument("--peak", type=float, required=True,
                        help="measured bf16 matmul peak, TFLOP/s")
    parser.add_argument("--cost", action="append", default=[],
                        help="MODEL.mlir=COST.json (switchyard cost --json)")
    args = parser.parse_args()

    macs = {}
    for entry in args.cost:
        name, _, path = entry.partition("=")
        macs[name] = json.loads(Path(path).read_text())["totals"]["macs"]
    result = json.loads(args.result.read_text())
    batch = result["batch"]

    rows, model = [], None
    for row in result["rows"]:
        if not row["peer"]:
            model = row["model"]
        if model not in macs:
            sys.exit(f"paper_summary: no cost for {model}")
        step = row["step_ms"]
        flops = 6.0 * macs[model] * batch
        rows.append({
            "model": model,
            "what": row["model"] if row["peer"] else "Switchyard " + row["fuse"],
            "peer": row["peer"],
            "step_ms": step,
            "tokens_s": row["tokens_per_step"] / (step / 1e3) if step else None,
            "tflops": flops / (step / 1e3) / 1e12 if step else None,
        })

    print(f"batch {batch}; model FLOPs per step = 6 x MACs per sequence x "
          f"batch (switchyard cost); MFU over the measured bf16 peak "
          f"{args.peak:.0f} TFLOP/s\n")
    print("| model | implementation | step ms | tokens/s | model TFLOP/s | MFU |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        tokens = f"{r['tokens_s']:.0f}" if r["tokens_s"] else "-"
        tflops = f"{r['tflops']:.1f}" if r["tflops"] else "-"
        mfu = f"{100 * r['tflops'] / args.peak:.1f}%" if r["tflops"] else "-"
        print(f"| {r['model']} | {r['what']} | {r['step_ms']:.1f} | {tokens} "
              f"| {tflops} | {mfu} |")

    # The targets: SwitchHead's step against the official implementation's
    # and against Switchyard's dense step.
    ours = [r for r in rows if not r["peer"]]
    print()
    if ours:
        switchhead = ours[0]
        official = [r for r in rows if r["model"] == switchhead["model"]
                    and r["what"].endswith("official")]
        if official:
            print(f"- {switchhead['model']}: Switchyard "
                  f"{official[0]['step_ms'] / switchhead['step_ms']:.2f}x "
                  f"faster than the official implementation (PyTorch, CVMM)")
        else:
            print(f"- {switchhead['model']}: no official row "
                  f"(SWITCHHEAD_OFFICIAL unset or not importable)")
        if len(ours) > 1:
            print(f"- {switchhead['model']}: "
                  f"{ours[1]['step_ms'] / switchhead['step_ms']:.2f}x faster "
                  f"than Switchyard's dense {ours[1]['model']}")


if __name__ == "__main__":
    main()
