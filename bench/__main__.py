"""Run the benchmarks: ``python -m bench [--only NAME]``; see :mod:`bench`."""

from __future__ import annotations

import argparse
import importlib
import json
from pathlib import Path

from bench import MODULES, Metric

RESULTS = Path(__file__).with_name("results.json")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--only", help="a benchmark module (" + ", ".join(MODULES) + ") or one of its metrics")
    args = parser.parse_args(argv)
    results: dict[str, Metric] = {}
    for module_name, module_path in MODULES.items():
        module = importlib.import_module(module_path)
        if args.only and args.only != module_name and args.only not in module.METRICS:
            continue
        for name, metric in module.run().items():
            metric.setdefault("reference_measured", False)
            results[name] = metric
    if not results:
        parser.error(f"no benchmark named {args.only!r}")
    _print_table(results)
    merged = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    merged.update(results)
    RESULTS.write_text(json.dumps(dict(sorted(merged.items())), indent=2) + "\n")
    return 0  # a missed target is printed, not fatal: the machine is shared and noisy


def _meets(metric: Metric) -> bool:
    if metric["target"] is None:
        return True
    if metric["better"] == "higher":
        return metric["value"] >= metric["target"]
    return metric["value"] <= metric["target"]


def _print_table(results: dict[str, Metric]) -> None:
    rows = [("benchmark", "value", "unit", "target", "reference", "")]
    for name, metric in results.items():
        sign = "≥" if metric["better"] == "higher" else "≤"
        reference = "-" if metric["reference"] is None else f"{metric['reference']:,.6g}"
        if metric.get("reference_measured"):
            reference += " (measured)"
        rows.append(
            (
                name,
                f"{metric['value']:,.6g}",
                metric["unit"],
                "-" if metric["target"] is None else f"{sign} {metric['target']:,.6g}",
                reference,
                "ok" if _meets(metric) else "MISSED",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


if __name__ == "__main__":
    raise SystemExit(main())
