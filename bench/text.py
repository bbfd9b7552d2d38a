"""Text work done on every message: redaction (stored and searched text) and
search snippets. Per-call cost on ordinary text, and the worst case over
inputs built to make a regular expression backtrack: the pathological
texts the redaction tests used to time, and random concatenations of the
fragments its patterns start and end on (seeded, so every run sees the
same ones).

    .venv/bin/python bench/text.py [--samples 300] [--seed 7]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import timeit
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.report import print_metrics
from core.search.redact import Redactor
from core.search.snippet import make_snippet

PLAIN = (
    "Hello there, I wanted to follow up on the meeting we had yesterday about the "
    "quarterly budget. Could you send me the numbers for Q3 by Friday? Also, remember "
    "that the interview is at 10:30 on 2024-05-14 in room 12. Thanks a lot, and see "
    "you soon at the café near the station! Je suis passée à l'École hier."
)

PATHOLOGICAL = [
    "1" * 4096,
    "1234 " * 819,
    "a" * 4096,
    "sk-" + "a" * 4093,
    "eyJ" * 1365,
    "key=" * 1024,
    "password:" * 455,
    "-----BEGIN PRIVATE KEY-----" * 151,
    "bearer" + " " * 4090,
    "://a:" + "b" * 4091,
    "123456789:" * 409,
    ".abcdef." * 512,
]

FRAGMENTS = [
    "a", "A", "1", "1234", " ", "-", "_", ".", ":", "=", "'", '"', "\n", "/", "@", "://",
    "sk-", "sk-proj-", "ghp_", "xoxb-", "AKIA", "AIza", "eyJ", "bot", "M", "۴",
    "password", "token", "api_key", "Bearer ", "Authorization: ", "-----BEGIN PRIVATE KEY-----",
    "-----END PRIVATE KEY-----",
]  # fmt: skip

MIXED = "Salut ! réunion passée. می\u200cخواهم فردا بروم. 会议在明天下午三点。İstanbul'da. "
SNIPPET_TEXT = (MIXED * 20)[:1000] + " 预算"


def adversarial(samples: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    texts = []
    for _ in range(samples):
        pieces = rng.choices(FRAGMENTS, k=rng.randint(1, 40))
        texts.append(("".join(pieces) * rng.randint(1, 400))[:4096])
    return texts


def per_call_us(call: Any, number: int, repeat: int) -> float:
    return round(min(timeit.repeat(call, number=number, repeat=repeat)) / number * 1e6, 1)


def worst_ms(redactor: Redactor, texts: list[str]) -> float:
    worst = 0.0
    for text in texts:
        started = time.perf_counter()
        redactor.redact(text)
        worst = max(worst, time.perf_counter() - started)
    return round(worst * 1000, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    redactor = Redactor()
    result = {
        "bench": "text",
        "redact_plain_us_per_call": per_call_us(lambda: redactor.redact(PLAIN), 500, 5),
        "redact_pathological_worst_ms": worst_ms(redactor, PATHOLOGICAL),
        "redact_adversarial_worst_ms": worst_ms(redactor, adversarial(args.samples, args.seed)),
        "adversarial_samples": args.samples,
        "snippet_1k_non_ascii_us_per_call": per_call_us(
            lambda: make_snippet(SNIPPET_TEXT, ["预算"]), 100, 3
        ),
        "target": (
            "redact under 250 us a call on plain text and under 500 ms on any 4 KB input; "
            "a snippet under 2 ms"
        ),
    }
    print_metrics("text: redaction and snippets", result)


if __name__ == "__main__":
    main()
