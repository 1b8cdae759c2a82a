"""`python -m tinyformer.bench [--quick] [--out DIR]`: print the tables, write JSON and a PNG."""

from __future__ import annotations

import argparse
from pathlib import Path

from tinyformer.bench import machine, print_table, save_chart, save_json
from tinyformer.bench.cases import BABY, engine_overhead, op_timings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tinyformer.bench", description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("bench-results"), help="output folder")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for a smoke test")
    args = parser.parse_args(argv)

    shapes = {"B": 2, "T": 8, "C": 16, "nh": 2, "V": 11} if args.quick else BABY
    engine = engine_overhead(n_ops=500 if args.quick else 10_000, repeats=3 if args.quick else 5)
    ops = op_timings(shapes, repeats=2 if args.quick else 7)

    print_table(
        f"Engine overhead: a chain of {engine['ops']} elementwise ops on one element "
        "(microseconds per op)",
        [engine],
        ["forward_us_per_op", "backward_us_per_op", "total_us_per_op", "numpy_us_per_op",
         "bookkeeping_us_per_op"],
    )  # fmt: skip
    print_table(
        f"Ops at shapes B={shapes['B']} T={shapes['T']} C={shapes['C']} nh={shapes['nh']} "
        f"V={shapes['V']} (milliseconds, median)",
        ops,
        ["op", "shape", "forward_ms", "backward_ms", "total_ms"],
    )
    results = {"machine": machine(), "shapes": shapes, "engine": engine, "ops": ops}
    save_json(args.out / "bench.json", results)
    save_chart(args.out / "ops.png", ops, "op", ["forward_ms", "backward_ms"], "tinyformer ops")
    print(f"\nwrote {args.out / 'bench.json'} and {args.out / 'ops.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
