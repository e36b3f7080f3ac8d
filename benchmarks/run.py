"""Run every ``benchmarks/bench_*.py`` ``main()``: ``python -m benchmarks.run [NAME_FILTER]``.

Benchmarks are not tests: they are never collected by pytest and may take minutes. Each prints its own
figures.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    name_filter = args[0] if args else ""
    here = Path(__file__).resolve().parent
    modules = sorted(p.stem for p in here.glob("bench_*.py") if name_filter in p.stem)
    if not modules:
        print(f"no benchmark matches {name_filter!r}", file=sys.stderr)
        return 2
    for name in modules:
        print(f"== {name}", flush=True)
        mod = importlib.import_module(f"benchmarks.{name}")
        mod.main()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
