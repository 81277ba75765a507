"""Measure the real model's speed on this machine (docs/realmodel.md):

    python -m tests.realmodel.measure [--threads 1 2] [--prompt-tokens 1000] [--gen-tokens 64]
    python -m tests.realmodel.measure --compliance 10 [--temperature 0.8]

For each thread count it starts tests/realmodel/serve.mjs and times three greedy calls on one
prompt: (1) a fresh prompt, 1 token out (prompt evaluation), (2) the same prompt, N tokens out
(the prompt is reused, so this is generation), (3) the same prompt again, 1 token out (the cost
of a request whose prompt the server already holds). Prints one JSON line per thread count.

``--compliance K``: the issue's instruction-following check instead: K samples (seeds 42 +
0..K-1) of the answer to the install question with the system line "Always use pnpm, never
npm." and K without it; prints how many name pnpm.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import httpx

from tests.helpers import realmodel

FILLER = "The build runs the linters, then the unit tests, then packages the wheel. "


def _call(url: str, prompt: str, max_tokens: int) -> tuple[float, dict]:
    body = {
        "messages": [
            {"role": "system", "content": prompt},
            {"role": "user", "content": "Count from 1 to 500, separated by commas."},
        ],
        "max_tokens": max_tokens,
        "temperature": 0,
    }
    started = time.monotonic()
    r = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=900)
    r.raise_for_status()
    return time.monotonic() - started, r.json()["usage"]


def measure(model: Path, threads: int, prompt_tokens: int, gen_tokens: int) -> dict:
    # ~15 tokens per filler sentence; a run-unique first line so no earlier prompt is reused
    prompt = f"Run {time.time_ns()}.\n" + FILLER * max(1, prompt_tokens // 15)
    with tempfile.TemporaryDirectory() as tmp:
        with realmodel.serve(model, Path(tmp) / "serve.log", threads=threads) as server:
            load = os.getloadavg()[0]
            t_prompt, usage = _call(server.base_url, prompt, 1)
            t_gen, gen = _call(server.base_url, prompt, gen_tokens)
            t_again, _ = _call(server.base_url, prompt, 1)
    return {
        "threads": threads,
        "load_average": round(load, 2),
        "prompt_tokens": usage["prompt_tokens"],
        "prompt_tok_per_s": round(usage["prompt_tokens"] / t_prompt, 1),
        "generated_tokens": gen["completion_tokens"],
        "gen_tok_per_s": round(gen["completion_tokens"] / t_gen, 1),
        "same_prompt_again_s": round(t_again, 2),
        "fresh_prompt_s": round(t_prompt, 2),
    }


RULE = "Always use pnpm, never npm."
ASK = "How do I install the dependencies of this Node project? Answer with one command."


def compliance(model: Path, k: int, temperature: float) -> dict:
    counts: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        with realmodel.serve(model, Path(tmp) / "serve.log", threads=1) as server:
            for arm, system in (("with_rule", [RULE]), ("without_rule", [])):
                said = 0
                for sample in range(k):
                    body = {
                        "messages": [{"role": "system", "content": s} for s in system]
                        + [{"role": "user", "content": ASK}],
                        "max_tokens": 40,
                        "temperature": temperature,
                    }
                    r = httpx.post(
                        f"{server.base_url}/v1/chat/completions",
                        json=body,
                        headers={"x-skillopt-sample": str(sample)},
                        timeout=900,
                    )
                    said += "pnpm" in r.json()["choices"][0]["message"]["content"]
                counts[arm] = said
    return {"k": k, "temperature": temperature, "pnpm": counts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--prompt-tokens", type=int, default=1000)
    parser.add_argument("--gen-tokens", type=int, default=64)
    parser.add_argument("--compliance", type=int, metavar="K")
    parser.add_argument("--temperature", type=float, default=0.8)
    args = parser.parse_args()
    model = realmodel.fetch()
    if args.compliance:
        print(json.dumps(compliance(model, args.compliance, args.temperature)), flush=True)
        return
    for threads in args.threads:
        print(json.dumps(measure(model, threads, args.prompt_tokens, args.gen_tokens)), flush=True)


if __name__ == "__main__":
    main()
