"""CPU time the HTTP adapters spend per request outside the network: build_request + parse_body.

Prints milliseconds of process CPU per request for the OpenAI (strict mode) and Anthropic
adapters on the ecommerce dataset's l50 variant (its largest tool descriptions). No network: the
response bodies come from the fake server's builders. Run from the repository root:

    python benchmarks/adapter_cpu.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from bench.datasets import load_dataset  # noqa: E402
from bench.descriptions import load_variant  # noqa: E402
from bench.providers import make_provider  # noqa: E402
from fakeserver import anthropic_body, chat_body  # noqa: E402


def main() -> None:
    """Print CPU ms per build_request + parse_body for each adapter."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20, help="passes over the cases")
    args = parser.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "benchmark-no-network")
    os.environ.setdefault("ANTHROPIC_API_KEY", "benchmark-no-network")
    cases = load_dataset("ecommerce").cases[:100]
    variant = load_variant("ecommerce", "l50")
    answers = {
        "openai:bench": chat_body(calls=[("search_orders", {"keyword": "耳机"})]),
        "anthropic:bench": anthropic_body(calls=[("search_orders", {"keyword": "耳机"})]),
    }
    for provider_id, body in answers.items():
        provider = make_provider(provider_id, base_url="http://127.0.0.1:9/v1",
                                 strict=provider_id.startswith("openai"))
        provider.prepare(variant.tools, variant_key=variant.sha256, label="l50")
        started, count = time.process_time(), 0
        for _ in range(args.repeat):
            for case in cases:
                request = provider.build_request(case.messages, variant.tools, trial=0)
                provider.parse_body(body, latency_s=0.1, request=request)
                count += 1
        per_request = (time.process_time() - started) / count * 1000
        print(f"{provider_id}: {per_request:.3f} ms CPU per build_request + parse_body "
              f"({count} requests, variant l50, {len(variant.tools)} tools)")


if __name__ == "__main__":
    main()
