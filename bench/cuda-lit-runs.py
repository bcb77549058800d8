#!/usr/bin/env python3
"""Runs the RUN lines of test/Integration/CUDA/*.test without lit or FileCheck.

For the device bundle (bench/gpu-check.sh --bundle): the GPU machine has no
lit and no FileCheck. The .test files stay the one list of checks: each RUN
line is run with the %-substitutions lit makes, the tools taken from
--bin, and any `| FileCheck ...` stage (or a line that is only FileCheck)
dropped; the verdict is the exit status (switchyard-gpu-check and
compare_losses.py exit non-zero on a mismatch). Prints one verdict per line
and per file; exits 1 if any failed.
"""
import argparse, os, re, subprocess, sys, tempfile, time

parser = argparse.ArgumentParser()
parser.add_argument("--bin", required=True)
parser.add_argument("--root", required=True)
parser.add_argument("--timeout", type=int, default=240)
args = parser.parse_args()

tests_dir = os.path.join(args.root, "test", "Integration", "CUDA")
tools = ["switchyard-gpu-check", "switchyard"]
tmp = tempfile.mkdtemp(prefix="cuda-lit-")
failures = 0
for name in sorted(os.listdir(tests_dir)):
    if not name.endswith(".test"):
        continue
    path = os.path.join(tests_dir, name)
    runs, pending = [], ""
    for line in open(path):
        m = re.match(r"\s*(#|//)\s*RUN:\s?(.*)$", line)
        if not m:
            continue
        text = pending + m.group(2).rstrip()
        if text.endswith("\\"):
            pending = text[:-1] + " "
            continue
        pending = ""
        runs.append(text)
    file_ok = True
    for run in runs:
        # lit's test/lit.cfg.py without --param gpu_emulation=1: on a GPU,
        # `%if !gpu-emulation %{ ... %}` runs what it holds.
        command = re.sub(r"^\s*%if\s+!gpu-emulation\s+%\{\s*(.*?)\s*%\}\s*$",
                         r"\1", run)
        command = command.replace("%gpu-check", "switchyard-gpu-check")
        command = command.replace("%gpu-device", "gpu")
        command = command.replace("%examples", os.path.join(args.root, "examples"))
        command = command.replace("%python", sys.executable)
        command = command.replace("%S", tests_dir)
        command = command.replace("%t", os.path.join(tmp, name))
        command = re.sub(r"\s*\|\s*FileCheck\b.*$", "", command)
        if re.match(r"^\s*FileCheck\b", command):
            print(f"SKIP (FileCheck only): {name}: {run}")
            continue
        for tool in tools:
            command = re.sub(rf"(^|[\s|;])({re.escape(tool)})(?=\s)",
                             lambda m: m.group(1) + os.path.join(args.bin, m.group(2)),
                             command, count=1)
        begin = time.time()
        try:
            result = subprocess.run(["bash", "-o", "pipefail", "-c", command],
                                    capture_output=True, text=True,
                                    timeout=args.timeout)
            status, output = result.returncode, result.stdout + result.stderr
        except subprocess.TimeoutExpired as e:
            status, output = "timeout", str(e)
        verdict = "PASS" if status == 0 else f"FAIL (exit {status})"
        print(f"{verdict}: {name} ({time.time() - begin:.1f} s): {run}")
        print("    " + "\n    ".join(output.strip().splitlines()[-15:]))
        if status != 0:
            file_ok = False
    print(f"== {'PASS' if file_ok else 'FAIL'}: Integration/CUDA/{name}\n",
          flush=True)
    failures += not file_ok
print(f"{failures} of the CUDA lit tests failed")
sys.exit(1 if failures else 0)
