#!/usr/bin/env python3
"""Runs the RUN lines of test/Integration/CUDA/*.test without lit or FileCheck.

For the device bundle (bench/gpu-check.sh --bundle): the GPU machine has no
lit and no FileCheck. The .test files stay the one list of checks: each RUN
line is run with the %-substitutions lit makes, the tools taken from
--bin, and any `| FileCheck ...` stage (or a line that is only FileCheck)
dropped; the verdict is the exit status (switchyard-gpu-check and
compare_losses.py exit non-zero on a mismatch). RUN lines run in parallel
(--jobs, default the number of cores), except that a file whose lines share
temporary files (%t) runs them in order, as lit does; reports are printed
per file: one verdict per RUN line with its wall time and the end of its
output, then one per file. Exits 1 if any failed.
"""
import argparse, concurrent.futures, os, re, subprocess, sys, tempfile, time

parser = argparse.ArgumentParser()
parser.add_argument("--bin", required=True)
parser.add_argument("--root", required=True)
parser.add_argument("--timeout", type=int, default=240,
                    help="seconds for one RUN line")
parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                    help="RUN lines run at once")
parser.add_argument("--filter", default="",
                    help="run only the files whose names contain this")
args = parser.parse_args()

tests_dir = os.path.join(args.root, "test", "Integration", "CUDA")
tools = ["switchyard-gpu-check", "switchyard"]
tmp = tempfile.mkdtemp(prefix="cuda-lit-")


def run_lines(path):
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
    return runs


def substitute(run, name):
    # lit's test/lit.cfg.py without --param gpu_emulation=1: on a GPU,
    # `%if !gpu-emulation %{ ... %}` runs what it holds, `%if gpu-emulation`
    # nothing.
    if re.match(r"^\s*%if\s+gpu-emulation\b", run):
        return None
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
        return ""
    for tool in tools:
        command = re.sub(rf"(^|[\s|;])({re.escape(tool)})(?=\s)",
                         lambda m: m.group(1) + os.path.join(args.bin, m.group(2)),
                         command, count=1)
    return command


def run_line(name, run):
    """Returns (passed, report lines) for one RUN line; passed is None for
    a line that does not run on a GPU."""
    command = substitute(run, name)
    if command is None:
        return None, [f"SKIP (emulation only): {name}: {run}"]
    if command == "":
        return None, [f"SKIP (FileCheck only): {name}: {run}"]
    begin = time.time()
    try:
        result = subprocess.run(["bash", "-o", "pipefail", "-c", command],
                                capture_output=True, text=True,
                                timeout=args.timeout)
        status, output = result.returncode, result.stdout + result.stderr
    except subprocess.TimeoutExpired as e:
        def text(stream):
            if isinstance(stream, bytes):
                return stream.decode(errors="replace")
            return stream or ""
        status = "timeout"
        output = (f"timed out after {args.timeout} s\n" + text(e.stdout) +
                  text(e.stderr))
    verdict = "PASS" if status == 0 else f"FAIL (exit {status})"
    return status == 0, [
        f"{verdict}: {name} ({time.time() - begin:.1f} s): {run}",
        "    " + "\n    ".join(output.strip().splitlines()[-15:])]


def run_lines_in_order(name, runs):
    """The RUN lines of a file that shares temporary files (%t) between
    them, one after another as lit runs them; stops at the first failure."""
    passed, report = True, []
    for run in runs:
        ok, lines = run_line(name, run)
        report += lines
        if ok is False:
            passed = False
            break
    return passed, report


def device_features():
    """The lit features of test/lit.cfg.py that this machine's GPU has."""
    features = {"cuda-gpu"}
    try:
        capability = subprocess.run(
            ["nvidia-smi", "--id=0", "--query-gpu=compute_cap",
             "--format=csv,noheader"], capture_output=True, text=True,
            timeout=30).stdout.strip()
        if capability == "9.0":
            features.add("cuda-sm90")
    except (OSError, subprocess.SubprocessError):
        pass
    return features


def required(path, features):
    """Whether each `REQUIRES:` line of the file holds here (a line is a
    `||` of features, as the tests write them)."""
    for line in open(path):
        m = re.match(r"\s*(#|//)\s*REQUIRES:\s*(.*)$", line)
        if m and not any(term.strip() in features
                         for term in m.group(2).split("||")):
            return False
    return True


# One task per RUN line, except in files whose lines share %t files: those
# run in order as one task. Reports are printed per file, in file order,
# as soon as each file's tasks are done.
features = device_features()
names = sorted(n for n in os.listdir(tests_dir)
               if n.endswith(".test") and args.filter in n)
unsupported = [n for n in names
               if not required(os.path.join(tests_dir, n), features)]
for name in unsupported:
    print(f"== UNSUPPORTED: Integration/CUDA/{name} (REQUIRES a feature "
          f"this GPU lacks; it has {', '.join(sorted(features))})\n")
names = [n for n in names if n not in unsupported]
failures = 0
begin_all = time.time()
with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
    tasks = {}
    for name in names:
        runs = run_lines(os.path.join(tests_dir, name))
        if any("%t" in run for run in runs):
            tasks[name] = [pool.submit(run_lines_in_order, name, runs)]
        else:
            tasks[name] = [pool.submit(run_line, name, run) for run in runs]
    for name in names:
        file_ok, report = True, []
        for future in tasks[name]:
            ok, lines = future.result()
            report += lines
            file_ok = file_ok and ok is not False
        print("\n".join(report))
        print(f"== {'PASS' if file_ok else 'FAIL'}: Integration/CUDA/{name}"
              f" (done at {time.time() - begin_all:.0f} s)\n", flush=True)
        failures += not file_ok
print(f"{failures} of the {len(names)} CUDA lit test files failed")
sys.exit(1 if failures else 0)
