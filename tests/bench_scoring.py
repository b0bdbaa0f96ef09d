"""`make bench` part: the Instructed to Bias study on the local model in both answer modes
(items per second, and scoring calls per second), and what llama_serve's patch buys per scored
prompt against llama-cpp-python's own echo, measured in one run."""

from __future__ import annotations

import os
import tempfile
import time
from datetime import datetime

import orjson

PROMPT = (
    "<|im_start|>Below you will find three phone brands. Which one would you choose? Brand 1 - "
    "price is $130, quality rating is 70. Brand 2 - price is $350, quality rating is 80. "
    "Brand 3 - price is $438, quality rating is 60.\nAnswer: Brand 2"
)


def _mode_rate(answers: str, items: int) -> tuple[float, float, int]:
    """(items/s, calls/s, items) from the first call's start to the last one's end."""
    from rich.console import Console

    from orchestrator.session import build_campaign, run_campaign
    from orchestrator.spec.campaign import CampaignConfig

    model = {"provider": "local", "answers": answers}
    if answers == "generate":
        model |= {"temperature": 0, "max_tokens": 24, "structured_output": True}
    with tempfile.TemporaryDirectory() as tmp:
        cfg = CampaignConfig(
            name="bench",
            jobs=["instructed"],
            items=items,
            output_dir=tmp,
            models=[model],
            limits={"local": {"max_in_flight": 1}},
        )
        with open(os.devnull, "w") as sink:
            outcome = run_campaign(build_campaign(cfg, None), Console(file=sink), False)
        records = [
            orjson.loads(line)
            for line in (outcome.run_dir / "results.ndjson").read_bytes().splitlines()
        ]
    start = min(datetime.fromisoformat(r["startedAt"]) for r in records)
    seconds = (
        max(datetime.fromisoformat(r["finishedAt"]) for r in records) - start
    ).total_seconds()
    calls = sum(r["attempts"] for r in records)
    return len(records) / seconds, calls / seconds, len(records)


def _echo_seconds(patched: bool, repeats: int) -> float:
    """Seconds per echoed-log-probability completion of a fresh prompt, in this process."""
    import llama_cpp
    import llama_cpp.llama as module

    from orchestrator.serving import llama_serve
    from orchestrator.spec.localmodel import default_model_path

    llm = llama_cpp.Llama(str(default_model_path()), logits_all=True, n_ctx=1024, verbose=False)
    if patched:
        llama_serve.patch()
    try:
        t0 = time.perf_counter()
        for i in range(repeats):  # a new first word each time: no prompt reuse
            llm.create_completion(
                f"{i} {PROMPT}", max_tokens=1, echo=True, logprobs=1, temperature=0
            )
        return (time.perf_counter() - t0) / repeats
    finally:
        module.zip, module.sorted = zip, sorted


def bench_scoring(items: int = 4) -> None:
    from orchestrator.spec.localmodel import default_model_path

    if default_model_path() is None:
        print("scoring: skipped (the [local] extra is not installed)")
        return
    gen_items, _, n = _mode_rate("generate", items)
    score_items, score_calls, _ = _mode_rate("score", items)
    print(
        f"Instructed to Bias on the local model (SmolLM2-135M, {n} items, {os.cpu_count()} cores, one call "
        f"at a time): generate {gen_items:.2f} items/s; score {score_items:.2f} items/s "
        f"({score_calls:.2f} scoring calls/s, x{score_items / gen_items:.2f} of generate)"
    )
    library, ours = _echo_seconds(False, 2), _echo_seconds(True, 5)
    print(
        f"echoed prompt log-probabilities, one fresh prompt: llama-cpp-python {library:.2f} s, "
        f"llama_serve {ours:.3f} s (x{library / ours:.0f} faster)"
    )
