"""Benchmark: the cost of the input limits' worst cases (the figures in docs/case-format.md, "Limits").

Usage (from the repository root)::

    python benchmarks/limits.py          # about 30 s on 2 cores

Each measurement runs ``python -m exactident check --no-numeric FILE`` in a
fresh process (wall clock and peak RSS of that process, Python start-up
included):

- ``dense``: a case just under the default size limit made of as many
  one-digit samples as fit, whose only error is its last entry (the slowest
  file to validate per byte: every entry is a number);
- ``huge``: a 200 MB file, refused from its size;
- ``zero``: ``/dev/zero``, refused from its type (a character device), unread.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from exactident.io.limits import DEFAULT_LIMITS  # noqa: E402


def _run(path: str) -> tuple[float, float, int, str]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "exactident", "check", "--no-numeric", path],
                          capture_output=True, text=True, cwd=ROOT)
    seconds = time.perf_counter() - start
    # Largest RSS of any child so far: runs go from the lightest to the heaviest.
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return seconds, peak / 1024, proc.returncode, proc.stderr.strip()


def main() -> None:
    limit = DEFAULT_LIMITS.max_bytes
    with tempfile.TemporaryDirectory() as tmp:
        head = {"format": "exactident-case/1", "name": "dense", "widths": [1, 1, 1],
                "weights": [[["1"]], [["1"]]], "biases": [["0"], ["0"]], "sample": []}
        text = json.dumps(head, separators=(",", ":"))
        n = (limit - len(text) - 20) // len('["1"],')
        dense = text[:-2] + ",".join(['["1"]'] * n) + ',[true]]}'
        assert len(dense) <= limit
        paths = {"zero": "/dev/zero", "huge": os.path.join(tmp, "huge.json"),
                 "dense": os.path.join(tmp, "dense.json")}
        with open(paths["dense"], "w") as fh:
            fh.write(dense)
        with open(paths["huge"], "wb") as fh:
            fh.truncate(200 * 2**20)
        print(f"default limit {limit} bytes; dense case: {len(dense)} bytes, {n + 1} samples")
        for name, path in paths.items():
            seconds, mib, rc, err = _run(path)
            print(f"{name:6s} {seconds:6.2f} s  peak {mib:7.1f} MiB  exit {rc}  {err[:100]}")


if __name__ == "__main__":
    main()
