"""What the OpenAI-compatible adapter sends: decoding settings, per-sample seeds, JSON schemas."""

from __future__ import annotations

import jsonschema

from orchestrator.providers.structured import json_schema, response_format
from orchestrator.spec.models import ResponseContract
from tests.conftest import openai_config, run_quietly


def _run(tmp_path, url, extra_model: str):
    cfg = openai_config(tmp_path, url, samples=3)
    cfg.write_text(
        cfg.read_text().replace("temperature = 0.7", f"temperature = 0.7\n{extra_model}")
    )
    return run_quietly(cfg)


def test_decoding_settings_and_one_seed_per_sample(tmp_path, emulator):
    server = emulator()
    _run(tmp_path, server.base_url("openai"), "top_p = 0.9\nmax_tokens = 33\nseed = 5")
    bodies = server.log.bodies
    assert len(bodies) == 36
    assert all(
        b["temperature"] == 0.7 and b["top_p"] == 0.9 and b["max_tokens"] == 33 for b in bodies
    )
    assert all(b["messages"][0]["content"].startswith("Answer the task directly.") for b in bodies)
    assert "response_format" not in bodies[0]
    assert len({b["seed"] for b in bodies}) == 36  # each sample its own, reproducible seed
    (tmp_path / "again").mkdir()
    _run(
        tmp_path / "again", server.base_url("openai"), "top_p = 0.9\nmax_tokens = 33\nseed = 5"
    )  # a fresh run
    assert sorted(b["seed"] for b in bodies[36:]) == sorted(b["seed"] for b in bodies[:36])


def test_structured_output_sends_each_tasks_schema(tmp_path, emulator):
    server = emulator()
    outcome = _run(tmp_path, server.base_url("openai"), "structured_output = true")
    formats = [b["response_format"] for b in server.log.bodies]
    assert all(f["type"] == "json_schema" and f["json_schema"]["strict"] for f in formats)
    enums = {
        tuple(f["json_schema"]["schema"]["properties"].get("choice", {}).get("enum", ()))
        for f in formats
    }
    assert (
        "Basic — €8/month, 40 GB",
        "Plus — €14/month, 60 GB",
        "Pro — €14/month, 100 GB",
    ) in enums
    assert ("Continue", "Stop") in enums
    assert outcome.exit_code == 0


def test_schemas_accept_exactly_the_valid_answers():
    rating = json_schema(ResponseContract(kind="rating", minimum=1, maximum=7))
    jsonschema.validate({"value": 7}, rating)
    for bad in ({"value": 8}, {"value": 2.5}, {"value": "3"}, {}, {"value": 3, "x": 1}):
        assert not jsonschema.Draft202012Validator(rating).is_valid(bad)
    choice = json_schema(ResponseContract(kind="choice", field="choice", options=("A b", "C")))
    assert jsonschema.Draft202012Validator(choice).is_valid({"choice": "A b"})
    assert not jsonschema.Draft202012Validator(choice).is_valid({"choice": "a b"})
    number = ResponseContract(kind="number")
    assert response_format(number, "json_object_schema") == {
        "type": "json_object",
        "schema": json_schema(number),
    }


def test_an_extractor_model_states_unparseable_answers_and_is_recorded(tmp_path, emulator):
    import orjson

    from orchestrator.emulator.server import Faults

    answers = emulator(Faults(malformed=0.5), seed=4)
    extractor = emulator(seed=9)
    cfg = openai_config(
        tmp_path,
        answers.base_url("openai"),
        samples=3,
        extra=f"""
        [extractor]
        provider = "openai"
        name = "extractor-model"
        base_url = "{extractor.base_url("openai")}"
        max_tokens = 30
        limit = "extraction"
        """,
    )
    outcome = run_quietly(cfg)
    records = [
        orjson.loads(line)
        for line in (outcome.run_dir / "results.ndjson").read_bytes().splitlines()
    ]
    extracted = [r for r in records if r["extractedBy"]]
    failed = [r for r in records if r["status"] == "parse_error"]
    # every unparseable answer went to the extractor once; what it could not state stays an error
    assert (
        answers.log.served["malformed"] == len(extractor.log.bodies) == len(extracted) + len(failed)
    )
    assert len(extracted) >= len(failed) > 0 or len(extracted) > 0
    for r in extracted:
        assert r["status"] == "ok" and r["extractedBy"] == "openai/extractor-model"
        assert r["response"]["raw"] in answers.log.malformed_texts  # the original text is kept
    asked = extractor.log.bodies[0]["messages"][-1]["content"]
    assert "It answered:" in asked and "Let me think" in asked
    assert all(r["extractedBy"] is None for r in records if r not in extracted)
