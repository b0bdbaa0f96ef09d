"""What a model's request settings may not touch: the fields the tool writes itself, nested
ones too (Gemini's generationConfig: the temperature and token limit the record and the cost
estimate assume), and the headers it sets itself, api_key_header included. Refused at load
(exit 2), naming the field."""

from __future__ import annotations

import orjson
import pytest

from orchestrator.errors import UserError
from orchestrator.plan import Plan, Task
from orchestrator.providers.gemini import GeminiProvider
from orchestrator.session import load_campaign
from tests.conftest import cli, write_config

GEMINI = 'provider = "gemini"\nname = "gemini-2.5-flash"\nbase_url = "http://127.0.0.1:9"'
O4 = 'provider = "openai"\nname = "o4-mini"\nbase_url = "http://127.0.0.1:9/v1"'
CLAUDE = 'provider = "anthropic"\nname = "claude-sonnet-4-5"\nbase_url = "http://127.0.0.1:9"'


def _config(tmp_path, model: str):
    return write_config(
        tmp_path,
        f"""
        name = "r"
        jobs = ["paired"]
        samples = 2
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        {model}
        """,
        "campaign.toml",
    )


def _refused(tmp_path, model: str) -> UserError:
    with pytest.raises(UserError) as caught:
        load_campaign(_config(tmp_path, model))
    return caught.value


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ("{generationConfig = {temperature = 2.0}}", "generationConfig.temperature"),
        ("{generationConfig = {maxOutputTokens = 65536}}", "generationConfig.maxOutputTokens"),
        ("{generationConfig = {topP = 0.1}}", "generationConfig.topP"),
        ("{generationConfig = {seed = 7}}", "generationConfig.seed"),
        (
            '{generationConfig = {responseMimeType = "text/plain"}}',
            "generationConfig.responseMimeType",
        ),
        ("{generationConfig = {responseSchema = {}}}", "generationConfig.responseSchema"),
        (
            "{generationConfig = {thinkingConfig = {thinkingBudget = 24576}}}",
            "generationConfig.thinkingConfig",
        ),
        # the API reads a field by its proto name too: max_output_tokens is maxOutputTokens
        ("{generationConfig = {max_output_tokens = 65536}}", "generationConfig.max_output_tokens"),
        ("{generation_config = {temperature = 2.0}}", "generation_config.temperature"),
        # a value that is no table replaces all the tool wrote there
        ("{generationConfig = 5}", "generationConfig"),
        ("{system_instruction = {}}", "system_instruction"),
        ("{contents = []}", "contents"),
    ],
)
def test_gemini_extra_body_may_not_set_what_the_tool_writes(tmp_path, extra, field):
    error = _refused(tmp_path, f"{GEMINI}\nextra_body = {extra}")
    assert error.field == f"models[0].extra_body.{field}"
    assert f"extra_body may not set '{field}'" in str(error)
    assert "the tool writes it" in str(error)


@pytest.mark.parametrize(
    ("model", "extra", "field"),
    [
        (O4, '{response_format = {type = "text"}}', "response_format"),
        (O4, "{max_completion_tokens = 99999}", "max_completion_tokens"),
        (CLAUDE, "{thinking = {budget_tokens = 9999}}", "thinking"),
        (CLAUDE, "{output_config = {format = {}}}", "output_config"),
    ],
)
def test_the_other_protocols_own_objects_are_theirs_whole(tmp_path, model, extra, field):
    error = _refused(tmp_path, f"{model}\nextra_body = {extra}")
    assert error.field == f"models[0].extra_body.{field}"


def test_gemini_fields_the_tool_does_not_write_may_be_sent(tmp_path):
    extra = (
        '{generationConfig = {stopSequences = ["END"], candidateCount = 1, '
        "responseLogprobs = false, presencePenalty = 0.5}, "
        'safetySettings = [{category = "HARM_CATEGORY_HARASSMENT", threshold = "BLOCK_NONE"}], '
        'labels = {team = "a"}}'
    )
    campaign = load_campaign(
        _config(tmp_path, f"{GEMINI}\ntemperature = 0.3\nextra_body = {extra}")
    )
    cell = Plan(campaign).cells[0]
    body = orjson.loads(GeminiProvider(cell.model).body(Task("0" * 32, cell, 1)))
    config = body["generationConfig"]
    assert config["temperature"] == 0.3 and config["stopSequences"] == ["END"]
    assert config["candidateCount"] == 1 and body["labels"] == {"team": "a"}


def test_the_refusal_is_exit_2_and_names_the_nested_field(tmp_path):
    config = _config(
        tmp_path, f"{GEMINI}\nextra_body = {{generationConfig = {{temperature = 2.0}}}}"
    )
    done = cli("run", str(config), cwd=tmp_path)
    assert done.returncode == 2
    assert "extra_body.generationConfig.temperature" in " ".join(done.stderr.split())
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("header", ["Host", "host", "Content-Type", "content-length"])
def test_api_key_header_may_not_be_a_header_the_tool_sets(tmp_path, header):
    error = _refused(tmp_path, f'{O4}\napi_key_env = "MY_KEY"\napi_key_header = "{header}"')
    assert error.field == "models[0].api_key_header"
    said = str(error) + (error.fix or "")
    assert f"'{header}'" in said and "sets itself" in said
    assert "api-key" in (error.fix or "")


def test_api_key_header_host_is_exit_2(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_KEY", "k-123")
    config = _config(tmp_path, f'{O4}\napi_key_env = "MY_KEY"\napi_key_header = "Host"')
    done = cli("run", str(config), cwd=tmp_path)
    assert done.returncode == 2 and "api_key_header" in done.stderr


def test_a_header_name_of_its_own_is_still_accepted(tmp_path):
    campaign = load_campaign(
        _config(tmp_path, f'{O4}\napi_key_env = "MY_KEY"\napi_key_header = "api-key"')
    )
    assert campaign.config.models[0].api_key_header == "api-key"
