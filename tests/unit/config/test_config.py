"""Settings: YAML file + RAGMON_* environment, one line per problem, secrets masked and read from files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from ragmon.cli.app import app
from ragmon.config import DEFAULT_DSN, MAX_PROBLEM_LINES, load_settings, mask_dsn, masked_dump, secret_value
from ragmon.errors import ConfigError

ROOT = Path(__file__).resolve().parents[3]
DSN_PASSWORD = "Dsn-Pa55w0rd-s3cr3t"
SASL_PASSWORD = "sasl-hunter2-s3cr3t"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests see only the RAGMON_* variables they set."""
    for name in list(os.environ):
        if name.upper().startswith("RAGMON_"):
            monkeypatch.delenv(name)


def write(tmp_path: Path, text: str, name: str = "ragmon.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def problems_of(path: Path | None = None) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    for line in info.value.problems:
        assert "\n" not in line and "\r" not in line
    return info.value.problems


def run_ragmon(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """This checkout's ragmon in a subprocess (the installed console script may point elsewhere)."""
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("RAGMON_")}
    clean["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", "ragmon", *args], capture_output=True, text=True, timeout=60,
                          env={**clean, **(env or {})}, cwd=cwd)


# -- sources and precedence ------------------------------------------------------------------------------------


def test_defaults_without_file_or_environment():
    settings = load_settings()
    assert secret_value(settings.store.dsn) == DEFAULT_DSN
    assert settings.store.database == "ragmon" and settings.store.cluster is None
    assert settings.kafka.topic == "rag.traces"


def test_yaml_file_is_read(tmp_path: Path):
    path = write(tmp_path, "kafka:\n  topic: app.traces\n  group_id: g1\ningest:\n  max_batch_rows: 500\n")
    settings = load_settings(path)
    assert (settings.kafka.topic, settings.kafka.group_id, settings.ingest.max_batch_rows) == ("app.traces", "g1", 500)


def test_environment_overrides_the_file_field_by_field(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = write(tmp_path, "kafka:\n  topic: from.file\n  group_id: file-group\nserver:\n  port: 9000\n")
    monkeypatch.setenv("RAGMON_KAFKA__TOPIC", "from.env")
    monkeypatch.setenv("RAGMON_SERVER__PORT", "9200")
    settings = load_settings(path)
    assert settings.kafka.topic == "from.env"
    assert settings.kafka.group_id == "file-group"  # the rest of the section still comes from the file
    assert settings.server.port == 9200


def test_environment_takes_json_for_lists_and_mappings(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("RAGMON_INGEST__REDACT_FIELDS", '["question"]')
    monkeypatch.setenv("RAGMON_INGEST__REDACT_PATTERNS", '{"ssn": "\\\\d{3}-\\\\d{2}-\\\\d{4}"}')
    settings = load_settings()
    assert settings.ingest.redact_fields == ["question"]
    assert list(settings.ingest.redact_patterns) == ["ssn"]


def test_empty_file_means_defaults(tmp_path: Path):
    assert load_settings(write(tmp_path, "# nothing here\n")) == load_settings()


# -- one line per problem -------------------------------------------------------------------------------------


def test_one_line_per_problem_naming_the_environment_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = write(tmp_path, "store:\n  database: rag-mon\nserver:\n  port: 70000\ningest:\n  max_batch_rows: 0\n")
    monkeypatch.setenv("RAGMON_KAFKA__SESSION_TIMEOUT_MS", "many")
    problems = problems_of(path)
    assert len(problems) == 4, problems
    expected = {
        "store.database": "RAGMON_STORE__DATABASE",
        "server.port": "RAGMON_SERVER__PORT",
        "ingest.max_batch_rows": "RAGMON_INGEST__MAX_BATCH_ROWS",
        "kafka.session_timeout_ms": "RAGMON_KAFKA__SESSION_TIMEOUT_MS",
    }
    for field, env_name in expected.items():
        [line] = [p for p in problems if p.startswith(field + ":")]
        assert env_name in line and str(path) in line


def test_problems_inside_a_list_name_the_variable_that_holds_it(tmp_path: Path):
    [line] = problems_of(write(tmp_path, "ingest:\n  redact_fields: [question, 7]\n"))
    assert line.startswith("ingest.redact_fields.1:") and "RAGMON_INGEST__REDACT_FIELDS)" in line


def test_unknown_setting_in_file_and_in_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    [line] = problems_of(write(tmp_path, "kafka:\n  topik: x\n"))
    assert line.startswith("kafka.topik: unknown setting") and "RAGMON_KAFKA__TOPIK" in line
    [line] = problems_of(write(tmp_path, "stroe:\n  dsn: chdb:///x\n"))
    assert line.startswith("stroe: unknown setting")
    monkeypatch.setenv("RAGMON_STORE__DNS", "chdb:///tmp/x")
    [line] = problems_of()
    assert line.startswith("store.dns: unknown setting") and "RAGMON_STORE__DNS" in line


def test_invalid_regular_expression_is_named(tmp_path: Path):
    [line] = problems_of(write(tmp_path, "ingest:\n  redact_patterns:\n    card: '[0-9'\n"))
    assert "card" in line and "regular expression" in line


@pytest.mark.parametrize("value", ["proxy.internal", "10.0.0.1/8", "*, 10.0.0.1", "10.0.0.0/33"])
def test_trusted_proxies_must_be_addresses_or_networks(tmp_path: Path, value: str):
    [line] = problems_of(write(tmp_path, f"server:\n  forwarded_allow_ips: '{value}'\n"))
    assert line.startswith("server.forwarded_allow_ips:") and ("IP address" in line or "stands alone" in line), line


def test_bad_yaml_reports_the_line(tmp_path: Path):
    path = write(tmp_path, "store:\n  database: ragmon\n  cluster: [unclosed\nkafka:\n  topic: x\n")
    [line] = problems_of(path)
    assert str(path) in line and "not valid YAML" in line
    assert "line 4" in line or "line 3" in line, line
    [line] = problems_of(write(tmp_path, "store:\n\tdatabase: x\n", "tabs.yaml"))
    assert "line 2" in line


@pytest.mark.parametrize("text", ["- store\n- kafka\n", "just a string\n", "42\n"])
def test_top_level_must_be_a_mapping(tmp_path: Path, text: str):
    [line] = problems_of(write(tmp_path, text))
    assert "top level must be a mapping" in line


@pytest.mark.parametrize("text", ["1: x\n", "null: x\n", "store: {}\n2026-01-01: x\n"])
def test_top_level_keys_must_be_section_names(tmp_path: Path, text: str):
    [line] = problems_of(write(tmp_path, text))
    assert "is not a section name" in line


def test_a_section_that_is_not_a_mapping(tmp_path: Path):
    [line] = problems_of(write(tmp_path, "store: chdb:///tmp/x\n"))
    assert line.startswith("store:")


def test_unreadable_file(tmp_path: Path):
    [line] = problems_of(tmp_path / "missing.yaml")
    assert "missing.yaml" in line and "cannot read" in line
    [line] = problems_of(tmp_path)  # a directory
    assert "cannot read" in line
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    [line] = problems_of(binary)
    assert "binary.yaml" in line and "UTF-8" in line


# -- hostile and oversized values -----------------------------------------------------------------------------


def test_huge_value_is_clipped_in_the_problem_line(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("RAGMON_SERVER__PORT", "9" * 100_000)
    [line] = problems_of()
    assert len(line) < 400 and "100,002 characters" in line  # the repr, quotes included


def test_control_characters_cannot_break_the_one_line_rule(tmp_path: Path):
    path = write(tmp_path, 'kafka:\n  topic: "evil\\ntopic\\u001b[31m"\n')
    [line] = problems_of(path)
    assert "\x1b" not in line and line.startswith("kafka.topic:")


def test_thousands_of_problems_are_capped(tmp_path: Path):
    items = ", ".join(str(i) for i in range(2000))
    problems = problems_of(write(tmp_path, f"ingest:\n  redact_fields: [{items}]\n"))
    assert len(problems) == MAX_PROBLEM_LINES + 1
    assert problems[-1] == f"… and {2000 - MAX_PROBLEM_LINES} more problems"


def test_non_json_environment_value_for_a_mapping_is_a_config_error(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("RAGMON_INGEST__REDACT_PATTERNS", "{not json")
    [line] = problems_of()
    assert "RAGMON_INGEST__REDACT_PATTERNS" in line and "JSON" in line


def test_yaml_tags_that_build_objects_are_refused(tmp_path: Path):
    [line] = problems_of(write(tmp_path, "store: !!python/object/apply:os.system ['echo pwned']\n"))
    assert "not valid YAML" in line


# -- secrets --------------------------------------------------------------------------------------------------


def secret_config(tmp_path: Path) -> Path:
    return write(
        tmp_path,
        f"store:\n  dsn: http://ragmon:{DSN_PASSWORD}@clickhouse.internal:8123/ragmon\n"
        f"kafka:\n  security_protocol: SASL_SSL\n  sasl_mechanism: SCRAM-SHA-512\n  sasl_username: ingest\n"
        f"  sasl_password: {SASL_PASSWORD}\n",
    )


@pytest.mark.parametrize("as_json", [False, True])
def test_config_show_masks_every_secret(tmp_path: Path, as_json: bool):
    args = ["--config", str(secret_config(tmp_path)), "config", "show"] + (["--json"] if as_json else [])
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert DSN_PASSWORD not in result.output and SASL_PASSWORD not in result.output
    data = json.loads(result.output) if as_json else yaml.safe_load(result.output)
    assert data["store"]["dsn"] == "http://ragmon:****@clickhouse.internal:8123/ragmon"
    assert data["kafka"]["sasl_password"] == "**********"
    assert data["kafka"]["sasl_username"] == "ingest"


def test_config_show_masks_secrets_from_the_environment(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("RAGMON_STORE__DSN", f"https://u:{DSN_PASSWORD}@ch.example:8443/db")
    monkeypatch.setenv("RAGMON_KAFKA__SASL_PASSWORD", SASL_PASSWORD)
    result = CliRunner().invoke(app, ["config", "show"])
    assert result.exit_code == 0, result.output
    assert DSN_PASSWORD not in result.output and SASL_PASSWORD not in result.output
    assert "u:****@ch.example" in result.output


def test_secrets_are_not_echoed_in_problem_lines(tmp_path: Path):
    path = write(tmp_path,
                 f"store:\n  dsn: [http://u:{DSN_PASSWORD}@h]\nkafka:\n  sasl_password: {{p: {SASL_PASSWORD}}}\n")
    problems = problems_of(path)
    assert len(problems) == 2
    assert not any(DSN_PASSWORD in p or SASL_PASSWORD in p for p in problems)


@pytest.mark.parametrize(
    ("dsn", "masked"),
    [
        ("http://u:pw@h:8123/db", "http://u:****@h:8123/db"),
        ("http://u:p%40ss@h/db", "http://u:****@h/db"),
        ("http://u:p@ss@h/db", "http://u:****@h/db"),
        ("http://u:@h", "http://u:****@h"),
        ("http://h:8123", "http://h:8123"),
        ("chdb:///var/lib/ragmon", "chdb:///var/lib/ragmon"),
        ("http://u:pw@[::1", "http://u:****@[::1"),  # not a parseable URL: the password is still found
        ("http://u:ab?cd@h:8123/db", "http://u:****@h:8123/db"),  # unescaped ?, # and / in the password
        ("http://u:a#b/c@h/db", "http://u:****@h/db"),
        ("http://u@h/db", "http://u@h/db"),
    ],
)
def test_mask_dsn(dsn: str, masked: str):
    assert mask_dsn(dsn) == masked


def test_secret_files_are_read_and_stripped(tmp_path: Path):
    dsn_file = tmp_path / "dsn"
    dsn_file.write_text(f"http://ragmon:{DSN_PASSWORD}@ch:8123/ragmon\n", encoding="utf-8")
    pw_file = tmp_path / "sasl"
    pw_file.write_text(f"{SASL_PASSWORD}\n", encoding="utf-8")
    path = write(tmp_path, f"store:\n  dsn_file: {dsn_file}\nkafka:\n  sasl_password_file: {pw_file}\n")
    settings = load_settings(path)
    assert secret_value(settings.store.dsn) == f"http://ragmon:{DSN_PASSWORD}@ch:8123/ragmon"
    assert secret_value(settings.kafka.sasl_password) == SASL_PASSWORD
    dumped = json.dumps(masked_dump(settings))
    assert DSN_PASSWORD not in dumped and SASL_PASSWORD not in dumped


def test_secret_file_wins_over_the_inline_value(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    pw_file = tmp_path / "sasl"
    pw_file.write_text("from-file", encoding="utf-8")
    monkeypatch.setenv("RAGMON_KAFKA__SASL_PASSWORD", "inline")
    monkeypatch.setenv("RAGMON_KAFKA__SASL_PASSWORD_FILE", str(pw_file))
    assert secret_value(load_settings().kafka.sasl_password) == "from-file"


def test_unreadable_secret_file_names_the_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("RAGMON_STORE__DSN_FILE", str(tmp_path / "no-such-secret"))
    [line] = problems_of()
    assert line.startswith("store.dsn_file:") and "no-such-secret" in line


# -- through the real command line ----------------------------------------------------------------------------


def test_cli_exits_2_with_one_line_per_problem_and_no_traceback(tmp_path: Path):
    path = write(tmp_path, "server:\n  port: -1\nkafka:\n  topik: x\n")
    result = run_ragmon("--config", str(path), "config", "check")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines[0] == "error: invalid configuration"
    assert len(lines) == 3 and "RAGMON_SERVER__PORT" in result.stderr and "RAGMON_KAFKA__TOPIK" in result.stderr
    assert "Traceback" not in result.stderr


def test_cli_bad_json_in_environment_exits_2_without_traceback():
    result = run_ragmon("config", "check", env={"RAGMON_INGEST__REDACT_FIELDS": "[oops"})
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and "RAGMON_INGEST__REDACT_FIELDS" in result.stderr


def test_cli_config_show_with_env_secrets(tmp_path: Path):
    env = {"RAGMON_STORE__DSN": f"http://u:{DSN_PASSWORD}@h:8123/d", "RAGMON_KAFKA__SASL_PASSWORD": SASL_PASSWORD}
    result = run_ragmon("config", "show", env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert DSN_PASSWORD not in result.stdout + result.stderr and SASL_PASSWORD not in result.stdout + result.stderr
    assert yaml.safe_load(result.stdout)["store"]["dsn"] == "http://u:****@h:8123/d"


def _secret_fields() -> list[tuple[str, str]]:
    """(section, field) for every SecretStr setting of every section, found from the models."""
    from pydantic import SecretStr

    from ragmon.config import Settings

    found = []
    for section, info in Settings.model_fields.items():
        for name, field in info.annotation.model_fields.items():
            if SecretStr in (field.annotation, *getattr(field.annotation, "__args__", ())):
                found.append((section, name))
    return found


@pytest.mark.parametrize(("section", "field"), _secret_fields())
def test_every_secret_setting_is_masked_and_readable_from_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, section: str, field: str
):
    secret = f"S3cret-{section}-{field}-value"
    value = f"http://u:{secret}@h:8123/d" if field == "dsn" else secret
    monkeypatch.setenv(f"RAGMON_{section.upper()}__{field.upper()}", value)
    result = CliRunner().invoke(app, ["config", "show", "--json"])
    assert result.exit_code == 0, result.output
    assert secret not in result.output
    from ragmon.config import Settings

    if f"{field}_file" in Settings.model_fields[section].annotation.model_fields:
        secret_file = tmp_path / "secret"
        secret_file.write_text(value.replace(secret, secret + "-from-file") + "\n", encoding="utf-8")
        monkeypatch.setenv(f"RAGMON_{section.upper()}__{field.upper()}_FILE", str(secret_file))
        loaded = secret_value(getattr(getattr(load_settings(), section), field))
        assert loaded == value.replace(secret, secret + "-from-file")


def test_a_key_given_twice_in_the_file_is_refused_with_its_line(tmp_path: Path):
    path = write(tmp_path, "store:\n  dsn: chdb:///tmp/a\nkafka:\n  topic: t\nstore:\n  database: other\n")
    [line] = problems_of(path)
    assert "'store' appears twice" in line and "line 5" in line, line


def test_an_environment_variable_naming_no_section_is_refused(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("RAGMON_SOTRE__DSN", "http://u:pw@h:8123/db")
    [line] = problems_of()
    assert line.startswith("environment: RAGMON_SOTRE__DSN names no settings section") and "store" in line
    assert "pw" not in line.replace("spelling", "")


def test_values_of_secret_or_unknown_settings_are_never_echoed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    [line] = problems_of(write(tmp_path, "review:\n  session_secret: 1234567890123456789012345678901234\n"))
    assert "session_secret" in line and "1234567890" not in line
    monkeypatch.setenv("RAGMON_REVIEW__USERS", '[{"username": "a", "passwd": "hunter2"}]')
    lines = problems_of()
    assert any("passwd" in line for line in lines) and not any("hunter2" in line for line in lines)


def test_a_secret_file_that_is_not_text_is_one_line_not_a_traceback(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch):
    binary = tmp_path / "key.bin"
    binary.write_bytes(bytes(range(128, 256)))
    monkeypatch.setenv("RAGMON_JUDGE__API_KEY_FILE", str(binary))
    [line] = problems_of()
    assert line.startswith("judge.api_key_file:") and "not UTF-8 text" in line


def test_the_database_a_server_dsn_names_is_used_and_a_contradiction_refused(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("RAGMON_STORE__DSN", "http://u:pw@clickhouse:8123/prod_db")
    assert load_settings().store.database == "prod_db"
    monkeypatch.setenv("RAGMON_STORE__DATABASE", "prod_db")
    assert load_settings().store.database == "prod_db"
    monkeypatch.setenv("RAGMON_STORE__DATABASE", "ragmon")
    [line] = problems_of()
    assert "store.database is 'ragmon' but store.dsn names database 'prod_db'" in line and "pw" not in line
    monkeypatch.delenv("RAGMON_STORE__DATABASE")
    monkeypatch.setenv("RAGMON_STORE__DSN", "http://u:pw@clickhouse:8123/")
    assert load_settings().store.database == "ragmon"  # no path: store.database


@pytest.mark.slow
def test_config_check_runs_the_checks_of_every_role_switched_on():
    result = run_ragmon("config", "check", env={"RAGMON_DRIFT__FEATURES": '["nosuch"]',
                                                "RAGMON_INGEST__MAX_MESSAGE_BYTES": "5000000",
                                                "RAGMON_REVIEW__SESSION_SECRET": "tiny-s3cret"})
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith("error: the configuration would not start")
    assert any(line.strip().startswith("ingest: ingest.max_message_bytes (5000000) exceeds") for line in lines)
    assert any(line.strip().startswith("drift: ") and "nosuch" in line for line in lines)
    assert any(line.strip().startswith("review: ") and "reviewers" in line for line in lines)  # none configured
    assert "tiny-s3cret" not in result.stderr
    # the roles switched off are not checked
    off = {f"RAGMON_ROLES__{role}": "false" for role in ("DRIFT", "REVIEW")}
    result = run_ragmon("config", "check", env={"RAGMON_DRIFT__FEATURES": '["nosuch"]', **off})
    assert result.returncode == 0 and "configuration is valid" in result.stdout, result.stderr


def test_sasl_without_its_mechanism_and_credentials_is_refused(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("RAGMON_KAFKA__SECURITY_PROTOCOL", "SASL_SSL")
    [line] = problems_of()
    assert "needs sasl_mechanism, sasl_username, sasl_password" in line
    monkeypatch.setenv("RAGMON_KAFKA__SASL_MECHANISM", "SCRAM-SHA-512")
    monkeypatch.setenv("RAGMON_KAFKA__SASL_USERNAME", "ragmon")
    monkeypatch.setenv("RAGMON_KAFKA__SASL_PASSWORD", "pw")
    assert load_settings().kafka.sasl_mechanism == "SCRAM-SHA-512"


def test_config_show_masks_credentials_inside_the_judge_url(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("RAGMON_JUDGE__BASE_URL",
                       "https://judge:Pw-in-url@llm.example/openai?api-version=1&api-key=K3y-in-url")
    result = CliRunner().invoke(app, ["config", "show", "--json"])
    assert result.exit_code == 0, result.output
    assert "Pw-in-url" not in result.output and "K3y-in-url" not in result.output
    assert json.loads(result.output)["judge"]["base_url"] == (
        "https://judge:****@llm.example/openai?api-version=1&api-key=****")


@pytest.mark.parametrize(("url", "masked"), [
    ("https://llm.example/v1", "https://llm.example/v1"),
    ("https://u:p@h/v1?token=t&x=1", "https://u:****@h/v1?token=****&x=1"),
    ("https://h/v1?sig=s;apikey=k#frag", "https://h/v1?sig=****;apikey=****#frag"),
    ("https://h/v1?API-KEY=k", "https://h/v1?API-KEY=****"),
])
def test_mask_url(url: str, masked: str):
    from ragmon.config import mask_url

    assert mask_url(url) == masked


def test_the_shipped_example_config_loads_and_would_start():
    """README's `ragmon -c ragmon.yaml …` examples use the file at the repository root."""
    root = Path(__file__).resolve().parents[3]
    settings = load_settings(root / "ragmon.yaml")
    assert settings.read_api.enabled and settings.server.port == 9108
    result = CliRunner().invoke(app, ["--config", str(root / "ragmon.yaml"), "config", "check"])
    assert result.exit_code == 0, result.output


def test_no_proxy_is_trusted_by_default():
    from ragmon.config import ServerSettings

    assert ServerSettings().forwarded_allow_ips == ""
    assert ServerSettings(forwarded_allow_ips=" ").forwarded_allow_ips == ""


def test_the_embedded_engine_budget_is_shared_out_and_bounded():
    """``store.embedded_memory_mb``: caches take fixed shares, merges at most half, the budget is the hard limit."""
    from ragmon.config import StoreSettings
    from ragmon.store.client import EMBEDDED_ENGINE_OPTIONS, embedded_engine_options

    o = embedded_engine_options(1024)
    caches = ("mark_cache_size", "primary_index_cache_size", "index_mark_cache_size", "query_condition_cache_size",
              "compiled_expression_cache_size")
    assert o["max_server_memory_usage"] == 1 << 30
    assert sum(o[c] for c in caches) + o["merges_mutations_memory_usage_soft_limit"] < o["max_server_memory_usage"]
    assert o["mark_cache_size"] == 128 << 20
    assert EMBEDDED_ENGINE_OPTIONS == embedded_engine_options(StoreSettings().embedded_memory_mb)
    with pytest.raises(ValueError, match="embedded_memory_mb"):
        StoreSettings(embedded_memory_mb=64)
