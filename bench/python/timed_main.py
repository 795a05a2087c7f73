"""Times an example's Python version in-process, for cpjit-bench's `pyvm` group.

usage: timed_main.py PROGRAM.py OUT.json [RUNS]

Loads PROGRAM.py as a module (its `if __name__ == "__main__"` block does not run), then
calls its `main()` RUNS times (default 1). Each call's printed output is captured, and an
exception it raises is recorded as a last line `error: <message>`, as the VM's runners do;
each call is timed with `time.perf_counter_ns` (wall) and `time.process_time_ns` (the
process's CPU time, the JIT's own work included), so interpreter start-up and loading the
program are excluded. Writes OUT.json, which the bench reads (a typed file, not scraped
text):

    {"implementation": "cpython" | "pypy" | ..., "implementation_version": "7.3.11",
     "runs": [{"ns": <int>, "cpu_ns": <int>, "output": "<what main printed>"}, ...]}

Runs on CPython and PyPy (Python 3.9 and later); standard library only.
"""

import importlib.util
import io
import json
import sys
import time


def load(path):
    spec = importlib.util.spec_from_file_location("timed_program", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"timed_main.py: cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except OSError as e:
        raise SystemExit(f"timed_main.py: cannot read {path}: {e.strerror}")
    if not callable(getattr(module, "main", None)):
        raise SystemExit(f"timed_main.py: {path} has no main() function")
    return module.main


def run_once(main):
    """One call of `main`: (wall ns, CPU ns, printed output)."""
    out = io.StringIO()
    saved, sys.stdout = sys.stdout, out
    try:
        start, cpu_start = time.perf_counter_ns(), time.process_time_ns()
        try:
            main()
        except Exception as e:  # the program's own error is part of its output
            end, cpu_end = time.perf_counter_ns(), time.process_time_ns()
            out.write(f"error: {e}\n")
        else:
            end, cpu_end = time.perf_counter_ns(), time.process_time_ns()
    finally:
        sys.stdout = saved
    return end - start, cpu_end - cpu_start, out.getvalue()


def main(argv):
    if len(argv) not in (2, 3):
        raise SystemExit(__doc__.split("\n\n")[1])
    program, out_path = argv[0], argv[1]
    try:
        runs = int(argv[2]) if len(argv) == 3 else 1
    except ValueError:
        raise SystemExit(f"timed_main.py: RUNS must be a number, not `{argv[2]}`")
    if runs < 1:
        raise SystemExit(f"timed_main.py: RUNS must be at least 1, not {runs}")
    entry = load(program)
    results = []
    for _ in range(runs):
        ns, cpu_ns, output = run_once(entry)
        results.append({"ns": ns, "cpu_ns": cpu_ns, "output": output})
    report = {
        "implementation": sys.implementation.name,
        "implementation_version": ".".join(map(str, sys.implementation.version[:3])),
        "runs": results,
    }
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main(sys.argv[1:])
