"""The judge config section: API key from a file (masked everywhere), the judge the settings pin."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragmon.config import load_settings, masked_dump
from ragmon.judge import HeuristicJudge, JudgeInput, make_judge
from ragmon.judge.openai import OpenAIJudge
from ragmon.sampling.sampler import ScoreSampler
from tests.conftest import make_trace
from tests.integration.test_openai_judge import good
from tests.support.openai_server import FakeOpenAI, ok


def test_api_key_file_is_sent_as_bearer_and_masked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    key = tmp_path / "key"
    key.write_text("sk-from-file\n")
    with FakeOpenAI([ok(good())]) as srv:
        monkeypatch.setenv("RAGMON_JUDGE__KIND", "openai")
        monkeypatch.setenv("RAGMON_JUDGE__BASE_URL", srv.base_url)
        monkeypatch.setenv("RAGMON_JUDGE__API_KEY_FILE", str(key))
        settings = load_settings()
        judge = make_judge(settings.judge)
        assert isinstance(judge, OpenAIJudge)
        judge.assess(JudgeInput.of(make_trace()))
    assert srv.auth_headers == ["Bearer sk-from-file"]
    assert "sk-from-file" not in str(masked_dump(settings)) and "sk-from-file" not in repr(settings)


def test_unreadable_key_file_is_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from ragmon.errors import ConfigError

    monkeypatch.setenv("RAGMON_JUDGE__API_KEY_FILE", str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="judge.api_key_file"):
        load_settings()


def test_defaults_pin_the_heuristic_judge_and_a_sampler(monkeypatch: pytest.MonkeyPatch):
    settings = load_settings()
    assert isinstance(make_judge(settings.judge), HeuristicJudge)
    sampler = ScoreSampler.from_settings(settings.sampling)
    assert sampler.rate == settings.sampling.rate


def test_sampling_overrides_from_yaml(tmp_path: Path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("sampling:\n  rate: 0.1\n  overrides:\n    - {retriever: bm25, rate: 0.5}\n"
                   "    - {category: billing, rate: 1.0}\n  max_per_hour: 100\n")
    sampler = ScoreSampler.from_settings(load_settings(cfg).sampling)
    assert sampler.rate_for("bm25", "x") == 0.5 and sampler.rate_for("dense", "billing") == 1.0
    assert sampler.max_per_hour == 100
