"""The regression gate on a description regression at 8, 30 and 150 cases: what pytest says.

For each size, a project made by ``bench init --python tests/data/own_tools/time_tools.py``
gets N cases "What time is it in <city>?" (cities from the IANA database, sorted), a
deterministic ``function:`` answerer that sends the IANA name for half of the cities while the
``timezone`` parameter's description says "IANA timezone name (e.g. ...)" and the city's name
otherwise, recorded answers (``bench run --cache write``) and the first ``bench baseline
update`` (which writes the floors). The hint is then stripped, the answers recorded again, and
the gate run three ways: as written (per-case rule and floors), with floors dropped (the
per-case rule alone) and with ``fail_on_flips = false`` and no floors (the paired test alone).
Prints pytest's result line and the gate's power summary for each. Run from the repository
root:

    python benchmarks/gate_power.py [--sizes 8,30,150]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import zoneinfo
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
MODEL = '''
import json

KNOWN = {known!r}


def answer(messages, tools, trial):
    city = messages[-1].content.rsplit(" in ", 1)[1].rstrip("?")
    tool = next(t for t in tools if t.name == "get_current_time")
    hinted = "IANA" in tool.description + json.dumps(tool.input_schema)
    zone = KNOWN.get(city, city) if hinted else city
    return [{{"name": "get_current_time", "arguments": {{"timezone": zone}}}}]
'''


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A command in ``cwd`` with this checkout's code; exits on failure."""
    env = {**os.environ, "COLUMNS": "200",
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(cwd)])}
    env.pop("BENCH_HOME", None)
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=1800)


def bench(cwd: Path, *args: str) -> None:
    """``python -m bench ARGS``; exits with its stderr on failure."""
    done = run(cwd, "-m", "bench", *args)
    if done.returncode:
        sys.exit(f"bench {' '.join(args)}: {done.stderr}")


def cities(n: int) -> list[tuple[str, str]]:
    """The first ``n`` zones ``Region/City`` of the IANA database, sorted, as (city, zone)."""
    zones = sorted(z for z in zoneinfo.available_timezones()
                   if z.count("/") == 1 and z.split("/")[0] in
                   ("Africa", "America", "Asia", "Australia", "Europe", "Pacific"))
    return [(z.split("/")[1].replace("_", " "), z) for z in zones[:n]]


def gate(root: Path) -> list[str]:
    """pytest's result line and the power summary lines of the gate in ``root``."""
    done = run(root, "-m", "pytest", "-p", "bench.gate.plugin", "-p", "no:cacheprovider",
               "pyproject.toml")
    lines = done.stdout.splitlines()
    start = next((i for i, line in enumerate(lines) if "bench gate power" in line), len(lines))
    summary = [line for line in lines[start + 1:] if not line.startswith("=")]
    result = [line.strip("= ") for line in lines if " in " in line and line.startswith("=")]
    return result[-1:] + summary


def measure(n: int, base: Path) -> None:
    """Build, regress and gate a project of ``n`` cases; print what pytest says."""
    bench(base, "init", f"tz{n}", "--python", str(ROOT / "tests/data/own_tools/time_tools.py"),
          "--read-only", "get_current_time,convert_time")
    root = base / f"tz{n}"
    places = cities(n)
    cases = [{"id": f"tz-{i:04d}", "toolset": f"tz{n}", "lang": "en",
              "messages": [{"role": "user", "content": f"What time is it in {city}?"}],
              "expected": {"calls": [{"name": "get_current_time",
                                      "arguments": {"timezone": [zone]}}]}}
             for i, (city, zone) in enumerate(places, 1)]
    (root / f"datasets/tz{n}/cases.jsonl").write_text(
        "".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
    (root / "tz_model.py").write_text(MODEL.format(known=dict(places[:n // 2])),
                                      encoding="utf-8")
    record = ("run", "--dataset", f"tz{n}", "--variants", "current", "--split", "all",
              "--provider", "function:tz_model:answer", "--cache", "write", "--cache-path",
              "gate/responses.sqlite")
    bench(root, *record)
    bench(root, "baseline", "update")
    variant = root / f"descriptions/tz{n}/variants/current.yaml"
    data = yaml.safe_load(variant.read_text(encoding="utf-8"))
    for tool in data["tools"]:
        for prop in tool["input_schema"]["properties"].values():
            if "IANA" in prop.get("description", ""):
                prop["description"] = "The timezone."
    variant.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    bench(root, *record)
    pyproject = root / "pyproject.toml"
    written = pyproject.read_text(encoding="utf-8")
    floors = next(line for line in written.splitlines() if line.startswith("floors ="))
    print(f"\n## {n} cases (arguments {n // 2}/{n} -> 0/{n}); {floors.split('  #')[0]}")
    for label, text in (
            ("as written (floors, per-case rule)", written),
            ("floors dropped (per-case rule alone)", written.replace("\nfloors =", "\n# f =")),
            ("fail_on_flips = false, no floors (paired test alone)",
             written.replace("\nfloors =", "\n# f =").replace(
                 "margin = 0.0", "fail_on_flips = false\nmargin = 0.0"))):
        pyproject.write_text(text, encoding="utf-8")
        print(f"- {label}:")
        for line in gate(root):
            print(f"    {line}")


def main() -> None:
    """Measure each size given."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="8,30,150", help="case counts, comma-separated")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        for n in (int(s) for s in args.sizes.split(",")):
            measure(n, Path(folder))


if __name__ == "__main__":
    main()
