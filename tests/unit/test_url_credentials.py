"""Credentials inside URL settings (``console.public_url``, ``console.runbook_base_url``, ``read_api.url``,
``judge.base_url``): masked wherever ragmon shows them (``config show``, a configuration problem, log lines, the read
commands' messages) and removed from the links every scraper of ``/metrics`` reads (``ragmon_links_info``)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import httpx
import pytest
from typer.testing import CliRunner

from ragmon.cli.app import app
from ragmon.config import Settings, load_settings
from ragmon.config.console import ConsoleSettings, published_link
from ragmon.config.loading import URL_FIELDS
from ragmon.errors import ConfigError, PermanentStoreError
from ragmon.store.remote import RemoteReadStore

SECRETS = ("Call-pw", "Wiki-tok", "Read-pw", "Ghp-tok")
URLS = {
    "RAGMON_CONSOLE__PUBLIC_URL": "https://oncall:Call-pw@ragmon.example.com",
    "RAGMON_CONSOLE__RUNBOOK_BASE_URL": "https://wiki.example/runbooks?token=Wiki-tok",
    "RAGMON_READ_API__URL": "http://reader:Read-pw@127.0.0.1:9108",
}


def test_config_show_masks_credentials_in_every_url_setting(monkeypatch: pytest.MonkeyPatch):
    for name, value in URLS.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(app, ["config", "show", "--json"])
    assert result.exit_code == 0, result.output
    assert not [s for s in SECRETS if s in result.output], result.output
    shown = json.loads(result.output)
    assert shown["console"]["public_url"] == "https://oncall:****@ragmon.example.com"
    assert shown["console"]["runbook_base_url"] == "https://wiki.example/runbooks?token=****"
    assert shown["read_api"]["url"] == "http://reader:****@127.0.0.1:9108"
    yaml_out = CliRunner().invoke(app, ["config", "show"]).output
    assert "oncall:****@" in yaml_out and not [s for s in SECRETS if s in yaml_out]


def test_every_url_setting_is_among_the_masked_ones():
    """A URL setting added later is masked too, or this fails naming it."""
    urls = {(section, field) for section, model in Settings.model_fields.items()
            for field in getattr(model.annotation, "model_fields", {}) if field.endswith("url")}
    assert urls == set(URL_FIELDS)


def test_a_token_given_as_the_user_name_is_masked(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("RAGMON_CONSOLE__RUNBOOK_BASE_URL", "https://Ghp-tok@github.example/o/r/blob/main/runbooks")
    result = CliRunner().invoke(app, ["config", "show", "--json"])
    assert json.loads(result.output)["console"]["runbook_base_url"] == "https://****@github.example/o/r/blob/main/runbooks"


@pytest.mark.parametrize("name", [*URLS, "RAGMON_JUDGE__BASE_URL"])
def test_a_refused_url_is_named_with_its_credentials_masked(monkeypatch: pytest.MonkeyPatch, name: str):
    monkeypatch.setenv(name, "ftp://someone:Call-pw@host.example/?token=Wiki-tok")
    with pytest.raises(ConfigError) as refused:
        load_settings()
    [line] = refused.value.problems
    assert "ftp://someone:****@host.example/?token=****" in line and "Call-pw" not in line and "Wiki-tok" not in line


def test_a_console_address_whose_host_cannot_be_read_is_refused(monkeypatch: pytest.MonkeyPatch):
    """A password with an unescaped / leaves no host a browser (or ``published_link``) could tell from it."""
    monkeypatch.setenv("RAGMON_CONSOLE__PUBLIC_URL", "https://oncall:Call/pw@ragmon.example.com")
    with pytest.raises(ConfigError) as refused:
        load_settings()
    [line] = refused.value.problems
    assert line.startswith("console.public_url:") and "percent-encode" in line and "Call/pw" not in line


@pytest.mark.parametrize(("url", "link"), [
    ("https://oncall:Call-pw@ragmon.example.com:8443/base", "https://ragmon.example.com:8443/base"),
    ("https://Ghp-tok@github.example/o/r/blob/main/alerts/runbooks", "https://github.example/o/r/blob/main/alerts/runbooks"),
    ("https://wiki.example/runbooks?token=Wiki-tok&x=1#access_token=Call-pw", "https://wiki.example/runbooks"),
    ("http://[::1]:9108", "http://[::1]:9108"),
    ("https://wiki.example/@team/runbooks", "https://wiki.example/@team/runbooks"),
])
def test_published_links_carry_no_credentials(url: str, link: str):
    assert published_link(url) == link


def test_the_links_ragmon_publishes_are_the_addresses_without_credentials():
    console = ConsoleSettings(public_url=URLS["RAGMON_CONSOLE__PUBLIC_URL"],
                              runbook_base_url=URLS["RAGMON_CONSOLE__RUNBOOK_BASE_URL"])
    assert console.published_links("0.0.0.0", 9108, "node-1") == {
        "runbook_base_url": "https://wiki.example/runbooks", "console_url": "https://ragmon.example.com"}
    assert ConsoleSettings().published_links("0.0.0.0", 9108, "node-1")["console_url"] == "http://node-1:9108"


def test_log_lines_mask_credentials_in_urls():
    """httpx logs every request's full URL at INFO; ragmon's log handler masks it (a real httpx client and
    logger, in a process of its own because logging is configured once per process)."""
    script = textwrap.dedent("""
        import logging, httpx
        from ragmon.cli.options import configure_logging
        configure_logging("INFO")
        client = httpx.Client(transport=httpx.MockTransport(lambda request: httpx.Response(200)))
        client.get("http://reader:Read-pw@127.0.0.1:9108/api?token=Wiki-tok")
        logging.getLogger("ragmon.test").warning("reaching %s", "https://Ghp-tok@github.example/o/r")
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert "HTTP Request: GET http://reader:****@127.0.0.1:9108/api?token=**** " in result.stderr, result.stderr
    assert "reaching https://****@github.example/o/r" in result.stderr, result.stderr
    assert not [s for s in SECRETS if s in result.stderr], result.stderr


def test_read_commands_name_the_daemon_without_its_credentials():
    store = RemoteReadStore(Settings(), URLS["RAGMON_READ_API__URL"], "t" * 32,
                            transport=httpx.MockTransport(lambda request: httpx.Response(401, json={"error": "x"})))
    with pytest.raises(PermanentStoreError) as refused:
        store.ping()
    assert "http://reader:****@127.0.0.1:9108" in str(refused.value) and "Read-pw" not in str(refused.value)
