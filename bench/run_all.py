"""``make bench``: run every ``bench/bench_*.py`` in turn and print their tables."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def main() -> int:
    here = Path(__file__).resolve().parent
    scripts = sorted(here.glob("bench_*.py"))
    only = set(sys.argv[1:])
    failed = []
    for script in scripts:
        if only and script.stem not in only and script.stem.removeprefix("bench_") not in only:
            continue
        print(f"# {script.stem}\n", flush=True)
        result = subprocess.run([sys.executable, str(script)], check=False)
        if result.returncode != 0:
            failed.append(script.name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
