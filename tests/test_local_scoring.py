"""Scoring on the embedded default: the local llama.cpp server returns the prompt's
log-probabilities, and every value the run records is the model's own, checked against a fresh
evaluation of the same text by llama-cpp-python in this process."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import orjson
import pytest

from orchestrator.plan import Plan
from orchestrator.plan_prompts import ANSWER_CUE
from orchestrator.serving import llama_serve
from orchestrator.serving.llama import score_prefix
from orchestrator.session import load_campaign
from orchestrator.spec.localmodel import default_model_path
from tests.conftest import ROOT, run_quietly, write_config

pytestmark = [
    pytest.mark.local_model,
    pytest.mark.skipif(
        default_model_path() is None or not default_model_path().exists(),
        reason="the [local] extra is not installed (make test installs it)",
    ),
]


def tiny_job(tmp_path: Path) -> Path:
    """One item of each kind's control and treatment: 34 items."""
    data = json.loads((ROOT / "jobs" / "instructed.json").read_text())
    d = data["decoy"] = data["decoy"][:1]
    d[0].update(templates=d[0]["templates"][:1], pairs=d[0]["pairs"][:1], decoys=d[0]["decoys"][:1])
    c = data["certainty"][0]
    c.update(
        templates=c["templates"][:1],
        prizes=c["prizes"][:1],
        chances=c["chances"][:1],
        styles=c["styles"][:1],
    )
    b = data["belief"][0]
    b.update(templates=b["templates"][:1], real=b["real"][:1], invented=b["invented"][:1])
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(data))
    return path


def direct_logprob(llm, prefix: str, text: str, continuation: str) -> float:
    """log P(continuation | text) from the model's logits over the whole text, evaluated afresh."""
    start = len(llm.tokenize((prefix + text).encode(), add_bos=False, special=True))
    tokens = llm.tokenize((prefix + text + continuation).encode(), add_bos=False, special=True)
    llm.reset()
    llm.eval(tokens)
    logits = np.array(llm.scores[: len(tokens)], dtype=np.float64)
    top = logits.max(axis=1, keepdims=True)
    logp = logits - top - np.log(np.exp(logits - top).sum(axis=1, keepdims=True))
    return float(sum(logp[i - 1, tokens[i]] for i in range(start, len(tokens))))


def test_local_scores_are_the_models_own_log_probabilities(tmp_path):
    import llama_cpp

    config = write_config(
        tmp_path,
        f"""
        name = "loc"
        jobs = ["{tiny_job(tmp_path)}"]
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "local"
        answers = "score"
        [models.server]
        n_ctx = 1024
        [limits.local]
        max_in_flight = 1
        timeout_s = 120
        """,
    )
    run_quietly(config)
    records = [
        orjson.loads(line)
        for line in (tmp_path / "runs" / "loc" / "default" / "results.ndjson")
        .read_bytes()
        .splitlines()
    ]
    assert len(records) == 34 and {r["status"] for r in records} == {"ok"}
    text_of = {c.variant.id: c.messages[-1]["content"] for c in Plan(load_campaign(config)).cells}
    path = str(default_model_path())
    prefix = score_prefix(path)
    llm = llama_cpp.Llama(path, logits_all=True, n_ctx=1024, verbose=False)
    for rec in records[:10]:  # both kinds of prompt (items and the premise) in every dataset
        for s in rec["response"]["scores"]:
            continuation = " " + s["option"]
            assert s["logp"] == pytest.approx(
                direct_logprob(llm, prefix, text_of[rec["variant"]], continuation), abs=1e-4
            )
            assert s["premise"] == pytest.approx(
                direct_logprob(llm, prefix, ANSWER_CUE, continuation), abs=1e-4
            )
    assert {r["experimentSlug"] for r in records[:10]} > {"certainty"}


def test_the_fast_top_alternatives_equal_the_librarys_full_sort():
    """llama_serve's patch changes the speed of echoed log-probabilities, not one value."""
    import llama_cpp
    import llama_cpp.llama as module

    llm = llama_cpp.Llama(str(default_model_path()), logits_all=True, n_ctx=512, verbose=False)
    prompt = "<|im_start|>Choose between: Option A - win $4,000. Option B - win $3,000.\nAnswer: Option A"
    before = llm.create_completion(prompt, max_tokens=1, echo=True, logprobs=5, temperature=0)
    try:
        assert llama_serve.patch()
        after = llm.create_completion(prompt, max_tokens=1, echo=True, logprobs=5, temperature=0)
    finally:
        module.zip, module.sorted = zip, sorted
    a, b = before["choices"][0]["logprobs"], after["choices"][0]["logprobs"]
    assert a["tokens"] == b["tokens"] and a["text_offset"] == b["text_offset"]
    assert a["token_logprobs"] == b["token_logprobs"]
    assert a["top_logprobs"] == b["top_logprobs"]
