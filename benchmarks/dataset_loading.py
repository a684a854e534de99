"""How long loading a dataset takes (keep every command's start-up fast).

Prints, in seconds: the one-off ``import datasets`` cost (Hugging Face ``datasets``, now paid
only by ``hf:`` specs: a ``.jsonl`` file is read directly), then for every shipped dataset and
for a synthetic file of ``--copies`` x the ecommerce cases (unique ids, so 600+ cases) the
median of ``--repeats`` fresh ``bench.datasets.load_dataset`` calls (read, UTF-8 check, line
split, JSON parse, pydantic validation, matcher checks).

    python benchmarks/dataset_loading.py [--repeats 5] [--copies 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _timed(fn) -> tuple[float, object]:
    started = time.perf_counter()
    value = fn()
    return time.perf_counter() - started, value


def main() -> None:
    """Print the timings described in the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--copies", type=int, default=3)
    args = parser.parse_args()

    from bench.datasets import available_datasets, load_dataset

    import sys
    assert "datasets" not in sys.modules, "loading a .jsonl file must not import datasets"
    seconds, _ = _timed(lambda: __import__("datasets"))
    print(f"import datasets: {seconds:.2f} s (hf: specs only)")

    targets = [(name, name) for name in available_datasets(ROOT / "datasets")]
    with tempfile.TemporaryDirectory() as tmp:
        lines = (ROOT / "datasets" / "ecommerce" / "cases.jsonl").read_text(
            encoding="utf-8").splitlines()
        synthetic = Path(tmp) / "synthetic.jsonl"
        with synthetic.open("w", encoding="utf-8") as handle:
            for copy in range(args.copies):
                for line in lines:
                    case = json.loads(line)
                    case["id"] = f"{case['id']}-{copy}"
                    handle.write(json.dumps(case, ensure_ascii=False) + "\n")
        targets.append((f"ecommerce x{args.copies}", str(synthetic)))
        for label, name in targets:
            runs = []
            for _ in range(args.repeats):
                seconds, dataset = _timed(lambda: load_dataset(name, root=ROOT / "datasets"))
                runs.append(seconds)
            print(f"{label}: {len(dataset.cases)} cases, median {statistics.median(runs):.3f} s "
                  f"(min {min(runs):.3f}, max {max(runs):.3f}) over {args.repeats} loads")


if __name__ == "__main__":
    main()
