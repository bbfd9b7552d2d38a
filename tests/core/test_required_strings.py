"""Required strings are non-empty: "" would only fail at the first call that
uses it, so the config is refused at the key instead."""

from __future__ import annotations

import pytest

from core.config.model import ConfigError, validate_document


@pytest.mark.parametrize(
    ("document", "key"),
    [
        ({"llm": {"models": {"chat": ""}}}, "llm.models.chat"),
        ({"llm": {"models": {"extraction": ""}}}, "llm.models.extraction"),
        ({"llm": {"models": {"heartbeat": ""}}}, "llm.models.heartbeat"),
        ({"channels": {"discord": {"devGuildId": ""}}}, "channels.discord.devGuildId"),
        ({"agents": [{"id": ""}]}, "agents.0.id"),
    ],
)
def test_an_empty_required_string_is_refused_at_its_key(
    document: dict[str, object], key: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        validate_document(document, "kept.json")
    [problem] = caught.value.problems
    assert problem.startswith(f"kept.json: {key}: ")


def test_an_unset_optional_model_is_still_fine() -> None:
    config = validate_document({"llm": {"models": {"chat": "m", "extraction": None}}}, "k.json")
    assert config.llm.model_for("extraction") == "m"
