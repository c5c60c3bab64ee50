"""The whole ``ragmon`` command surface: every command explains itself, and bad arguments never crash it.

Commands run through ``ragmon.cli.app.main`` (the console script's entry point, which turns expected errors into
exit codes) inside CliRunner's isolation. ``RAGMON_STORE__DSN`` names a chDB directory that cannot exist (under
/dev/null), so a command that gets as far as opening the store stops there with exit 3: nothing here touches the
network or a chDB directory.
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum
from pathlib import Path
from typing import Any

import pytest
import typer
import typer.main
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.text import Text
from typer.testing import CliRunner

from ragmon.cli.app import app, main

NO_STORE = "chdb:///dev/null/no-store-in-cli-surface-tests"
ENV = {"RAGMON_STORE__DSN": NO_STORE, "RAGMON_CONFIG": None, "COLUMNS": "3000", "NO_COLOR": "1"}
EXIT_CODES = {0, 1, 2, 3, 4}


@dataclass(frozen=True)
class Outcome:
    code: int | str | None
    stdout: str
    stderr: str
    crash: str | None  # the traceback of an exception that escaped main()

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def describe(self, args: list[str]) -> str:
        return f"ragmon {args!r} -> exit {self.code!r}\n{self.output[-3000:]}\n{self.crash or ''}"


def run(args: list[str]) -> Outcome:
    """Run ``ragmon ARGS`` the way the console script does, in a fresh empty working directory."""
    runner = CliRunner()
    saved_argv, saved_cwd = sys.argv, os.getcwd()
    with tempfile.TemporaryDirectory() as empty, runner.isolation(env=ENV) as (out, err, _):
        os.chdir(empty)
        sys.argv = ["ragmon", *args]
        code: int | str | None = 0
        crash = None
        try:
            main()
        except SystemExit as exc:
            code = exc.code
        except BaseException:  # noqa: BLE001 - the very thing this module looks for
            code, crash = "exception", traceback.format_exc()
        finally:
            sys.argv = saved_argv
            os.chdir(saved_cwd)
            sys.stdout.flush()
            sys.stderr.flush()
        stdout = out.getvalue().decode("utf-8", "replace")
        stderr = err.getvalue().decode("utf-8", "replace")
    return Outcome(code, stdout, stderr, crash)


def assert_clean(outcome: Outcome, args: list[str], codes: set[int] = EXIT_CODES) -> None:
    assert outcome.crash is None, outcome.describe(args)
    assert "Traceback (most recent call last)" not in outcome.output, outcome.describe(args)
    assert outcome.code in codes, outcome.describe(args)


def _walk(command: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, command
    for name, sub in (getattr(command, "commands", None) or {}).items():
        yield from _walk(sub, (*path, name))


ROOT = typer.main.get_command(app)
COMMANDS = dict(_walk(ROOT, ()))
IDS = [" ".join(p) or "ragmon" for p in COMMANDS]


def _name(param: Any) -> str:
    return param.opts[0] if param.param_type_name == "option" else param.name


def _is_flag(param: Any) -> bool:
    return bool(getattr(param, "is_flag", False))


def _params(command: Any) -> list[Any]:
    return [p for p in command.params if p.expose_value]


def test_the_tree_is_what_the_docs_list():
    names = {" ".join(p) for p in COMMANDS}
    for expected in ("demo", "run", "ingest", "score", "score report", "drift check", "drift report", "review select",
                     "shadow compare", "gate", "calibrate", "store migrate", "schema validate", "config check"):
        assert expected in names


@pytest.mark.parametrize("path", list(COMMANDS), ids=IDS)
def test_every_command_and_parameter_has_help(path: tuple[str, ...]):
    command = COMMANDS[path]
    assert (command.help or "").strip(), f"ragmon {' '.join(path)} has no help text"
    missing = [_name(p) for p in _params(command) if not (getattr(p, "help", None) or "").strip()]
    assert not missing, f"ragmon {' '.join(path)}: no help for {missing}"


@pytest.mark.parametrize("path", list(COMMANDS), ids=IDS)
def test_help_paragraphs_wrap_to_the_terminal(path: tuple[str, ...]):
    """Rich help keeps a line break inside a paragraph, so a docstring wrapped at 120 columns printed as ragged
    lines in an 80-column terminal: every paragraph of a command's help is one line before Rich wraps it."""
    help_text = (COMMANDS[path].help or "").strip()
    for paragraph in help_text.split("\n\n"):
        assert "\n" not in paragraph.strip(), f"ragmon {' '.join(path)}: a line break inside {paragraph!r}"


@pytest.mark.parametrize("path", list(COMMANDS), ids=IDS)
def test_help_exits_0_and_shows_every_parameter(path: tuple[str, ...]):
    args = [*path, "--help"]
    outcome = run(args)
    assert_clean(outcome, args, {0})
    shown = " ".join(outcome.stdout.replace("│", " ").split())
    assert "Usage:" in shown
    first_line = COMMANDS[path].help.strip().splitlines()[0]
    assert " ".join(Text.from_markup(first_line).plain.split())[:60] in shown, outcome.describe(args)
    for param in _params(COMMANDS[path]):
        if param.param_type_name == "option":
            assert param.opts[0] in shown, f"{param.opts[0]} missing from {' '.join(args)}"
        # rich markup must not eat any of the help text (e.g. a "[...]" read as a style tag)
        words = " ".join(Text.from_markup(param.help).plain.split())
        assert words[:50] in shown, f"help of {_name(param)} is not shown as written:\n{words}\n---\n{shown}"


@pytest.mark.slow  # a sweep over every command
@pytest.mark.parametrize("path", list(COMMANDS), ids=IDS)
def test_an_unknown_option_exits_2(path: tuple[str, ...]):
    args = [*path, "--no-such-option-anywhere"]
    outcome = run(args)
    assert_clean(outcome, args, {2})
    assert "--no-such-option-anywhere" in outcome.output


def _bad_values(param: Any) -> Iterator[str]:
    """Values the parser must refuse for this parameter (none for free-form strings and paths)."""
    kind = param.type_descriptor.annotation  # the Python type, unwrapped from Optional
    if kind is int:
        yield from ("many", "1.5")
    elif kind is float:
        yield "1,5"
    elif isinstance(kind, type) and issubclass(kind, Enum):
        yield "no-such-choice"
    if kind in (int, float):
        if param.min is not None:
            yield str(param.min - 1)
        if param.max is not None:
            yield str(param.max + 1)


BAD_VALUES = [
    pytest.param(path, param.opts[0], value, id=f"{' '.join(path) or 'ragmon'} {param.opts[0]} {value!r}")
    for path, command in COMMANDS.items()
    for param in _params(command)
    if param.param_type_name == "option" and not _is_flag(param)
    for value in _bad_values(param)
]


def test_some_options_are_typed():
    assert len(BAD_VALUES) > 40  # the parametrization below is not empty by accident


@pytest.mark.slow  # a sweep over every option of every command
@pytest.mark.parametrize(("path", "option", "value"), BAD_VALUES)
def test_a_wrong_typed_or_out_of_range_value_exits_2(path: tuple[str, ...], option: str, value: str):
    args = [*path, option, value]
    outcome = run(args)
    assert_clean(outcome, args, {2})
    assert option in outcome.output, outcome.describe(args)


def test_a_missing_config_file_is_one_clean_line():
    outcome = run(["--config", "no/such/ragmon.yaml", "config", "check"])
    assert_clean(outcome, [], {2})
    assert "no/such/ragmon.yaml: cannot read the config file" in outcome.stderr


# -- random argument lists ----------------------------------------------------------------------------------------

def _options(path: tuple[str, ...]) -> list[tuple[str, Any]]:
    return sorted({(o, p.type_descriptor.annotation) for p in COMMANDS[path].params if p.param_type_name == "option"
                   for o in (*p.opts, *p.secondary_opts)}, key=lambda item: item[0])


_text = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=40)
_awkward = st.sampled_from([
    "", "-", "--", "-1", "0", "1", "nan", "-inf", "1e400", "-1e400", "now", "24h", "0s", "-5m", "1e400h",
    "99999999999999w", "9" * 30 + "s", "2026-12-01", "2026-12-01T09:00:00Z", "2026-02-30T00:00:00",
    "0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-12:00", "hybrid@v1", "a@", "@", "x=1", "=", "faithfulness=-1",
    "ndcg_at_k=nan", "grounded=2", "grounded=inf", "2026-W49", "2026-W54", "0000-W01", "../..", ".", "/",
    "ünïcödé ✓ 𝔘", "\t\n", "'; DROP TABLE traces; --", "{}", "[]", "table", "json", "markdown", "html",
])
_durations = st.builds("{}{}".format, st.one_of(st.integers(min_value=0, max_value=10**40),
                                                st.floats(min_value=0, allow_nan=False).map(repr)),
                       st.sampled_from(["s", "m", "h", "d", "w", " h", "x", ""]))
_times = st.builds(lambda t, z: t.isoformat() + z, st.datetimes(),
                   st.sampled_from(["", "Z", "+00:00", "+14:00", "-12:00", "+23:59", "+25:00"]))
_pairs = st.builds("{}={}".format, st.sampled_from(["faithfulness", "ndcg_at_k", "grounded", "refusal_appropriate",
                                                    "citations_supported", "", "x"]),
                   st.one_of(st.floats().map(repr), _text))
_values = st.one_of(
    _awkward,
    _durations,
    _times,
    _pairs,
    _text,
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=1_000, max_value=20_000).map(lambda n: "x" * n),  # very long
)
_numbers = {
    int: st.one_of(st.integers(min_value=-(10**20), max_value=10**20).map(str), _awkward),
    float: st.one_of(st.floats(allow_nan=True, allow_infinity=True).map(repr), _awkward),
    str: st.one_of(_awkward, _durations, _times, _pairs),
}


def _argument_lists(path: tuple[str, ...]) -> st.SearchStrategy[list[str]]:
    options = _options(path)
    option_and_value = st.sampled_from(options).flatmap(
        lambda item: st.tuples(st.just(item[0]), st.one_of(_numbers.get(item[1], _awkward), _values)).map(list))
    token = st.one_of(option_and_value, option_and_value, st.sampled_from([o for o, _ in options]).map(lambda o: [o]))
    # a stray value (an extra argument) ends parsing at once, so at most one, last: most lists reach the command
    stray = st.one_of(st.just([]), _values.map(lambda v: [v]))
    return st.tuples(st.lists(token, max_size=6), stray).map(
        lambda drawn: [t for part in (*drawn[0], drawn[1]) for t in part])


# Commands whose every path ends before the network or a store (the store cannot be opened, see NO_STORE):
# argument parsing and validation, file reading, and the store refusing to open.
FUZZED = {
    "schema validate": (("schema", "validate"), []),
    "gate (golden file missing)": (("gate",), ["missing-golden.json", "--retriever", "examples.retriever:search",
                                               "--k", "3", "--min-coverage", "0.5", "--min-mrr", "0.5"]),
    "shadow compare": (("shadow", "compare"), ["--baseline", "hybrid@v1", "--candidate", "dense@v2"]),
    "score report": (("score", "report"), []),
    "calibrate": (("calibrate",), []),
    "review select": (("review", "select"), []),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(FUZZED))
@settings(max_examples=int(os.environ.get("CLI_FUZZ_EXAMPLES", "40")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_random_arguments_never_crash(name: str, data: st.DataObject):
    path, fixed = FUZZED[name]
    args = [*path, *fixed, *data.draw(_argument_lists(path), label="arguments")]
    assert_clean(run(args), args)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(config=st.one_of(_text, _values), extra=st.lists(_values, max_size=2))
def test_config_check_with_a_random_config_path_never_crashes(config: str, extra: list[str]):
    args = ["--config", config, "config", "check", *extra]
    outcome = run(args)
    assert_clean(outcome, args, {0, 2})


def test_run_leaves_the_process_as_it_found_it():
    argv, cwd = list(sys.argv), os.getcwd()
    run(["schema", "validate", "missing.json"])
    assert (sys.argv, os.getcwd()) == (argv, cwd)


# -- arguments that once crashed a command or reached the store before being checked ---------------------------

REJECTED_BEFORE_THE_STORE = [
    (["shadow", "compare", "--baseline", "a", "--candidate", "b", "--k", "0"], "--k must be between 1 and 1000"),
    (["shadow", "compare", "--baseline", "a", "--candidate", "b", "--rbo-p", "nan"], "--rbo-p must be in (0, 1)"),
    (["shadow", "compare", "--baseline", "a", "--candidate", "a", "--candidate-variant", "production"], "both select"),
    (["score", "--from-store", "--since", "yesterday-ish"], "is not a time"),
    (["score", "--from-store", "--since", "1h", "--until", "2h"], "must be later than --since"),
    (["score", "report", "--since", "99999999999999w"], "before year 1"),
    (["calibrate", "--since", "9" * 400 + "s"], "before year 1"),
    (["shadow", "compare", "--baseline", "a", "--candidate", "b", "--since", "0001-01-01T00:00:00+14:00"],
     "before year 1"),
    (["drift", "--port", "-5"], "server.port: Input should be greater than or equal to 0"),
    (["drift", "--interval-seconds", "1"], "drift.interval_seconds: Input should be greater than or equal to 5"),
    (["ingest", "--port", "65536", "--max-batch-rows", "0"], "ingest.max_batch_rows"),
    (["run", "--port", "65536"], "server.port: Input should be less than or equal to 65535"),
    (["calibrate", "--threshold", "grounded=nan"], "must be a finite number"),
    (["review", "--port", "-1"], "server.port: Input should be greater than or equal to 0"),
    (["review", "serve", "--port", "-1"], "server.port: Input should be greater than or equal to 0"),
    (["ingest", "--log-level", "bogus"], "--log-level 'bogus' is not one of"),
    (["score", "--log-level", "bogus"], "--log-level 'bogus' is not one of"),
    (["drift", "--log-level", "bogus"], "--log-level 'bogus' is not one of"),
    (["run", "--log-level", "bogus"], "--log-level 'bogus' is not one of"),
    (["review", "status", "--week", "foo"], "is not an ISO week"),
    (["review", "export", "--golden", "exported.json", "--week", "2026-W60"], "does not exist"),
    (["review", "export", "--golden", "/"], "is a directory"),
    (["score", "report", "--variant", "prod"], "--variant 'prod' is not one of production, shadow, canary"),
    (["score", "report", "--since", "now"], "must be later than --since"),
    (["drift", "report", "--html", "/nonexistent-dir/x.html"], "the directory /nonexistent-dir does not exist"),
    (["drift", "simulate", "--strata", " , "], "--strata names no stratum"),
    (["drift", "simulate", "--shift", "nan"], "--shift must be a finite number"),
    (["drift", "simulate", "--current", "100000000000"], "must be between 0 and 10,000,000"),
    (["ingest", "--stats-json", "/"], "--stats-json /: is a directory"),
    (["ingest", "--bootstrap-servers", "garbage"], "'garbage' is not host:port"),
    (["shadow", "compare", "--baseline", "a", "--candidate", "b", "--out", "/"], "--out /: is a directory"),
    (["schema", "export", "--dir", "/dev/null"], "/dev/null: is a file; name a directory"),
]


@pytest.mark.parametrize(("args", "message"), REJECTED_BEFORE_THE_STORE, ids=[" ".join(a)[:70] for a, _ in
                                                                             REJECTED_BEFORE_THE_STORE])
def test_bad_arguments_are_refused_before_the_store_is_opened(args: list[str], message: str):
    outcome = run(args)
    assert_clean(outcome, args, {2})
    assert message in " ".join(outcome.stderr.split()), outcome.describe(args)
    assert "no-store-in-cli-surface-tests" not in outcome.output  # exit 2 from the arguments, not 3 from the store


def test_override_replaces_given_fields_and_reports_each_problem():
    from ragmon.config import Settings, override
    from ragmon.errors import ConfigError

    base = Settings()
    assert override(base, "server", host=None, port=None) is base
    changed = override(base, "server", port=0, host=None)
    assert (changed.server.port, changed.server.host, base.server.port) == (0, base.server.host, Settings().server.port)
    with pytest.raises(ConfigError) as caught:
        override(base, "ingest", max_batch_rows=0, flush_interval_seconds=-1.0)
    assert [p.split(":")[0] for p in caught.value.problems] == ["ingest.max_batch_rows",
                                                                "ingest.flush_interval_seconds"]


def test_demo_refuses_a_file_as_its_data_directory(tmp_path):
    not_a_dir = tmp_path / "ragmon.yaml"
    not_a_dir.write_text("keep me\n", encoding="utf-8")
    args = ["demo", "--dir", str(not_a_dir)]
    outcome = run(args)
    assert_clean(outcome, args, {2})
    assert "is a file, not a directory" in outcome.stderr
    assert not_a_dir.read_text(encoding="utf-8") == "keep me\n"


NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(("text", "expected"), [
    ("now", NOW), (" NOW ", NOW), ("90m", NOW - timedelta(minutes=90)), ("1.5H", NOW - timedelta(hours=1.5)),
    ("2 w", NOW - timedelta(weeks=2)), ("0s", NOW), ("2026-12-01", datetime(2026, 12, 1, tzinfo=UTC)),
    ("2026-12-01T09:00:00Z", datetime(2026, 12, 1, 9, tzinfo=UTC)),
    ("2026-12-01T09:00:00+02:00", datetime(2026, 12, 1, 7, tzinfo=UTC)),
])
def test_parse_when_forms(text: str, expected: datetime):
    from ragmon.cli.options import parse_when

    value = parse_when(text, NOW, "--since")
    assert value == expected and value.tzinfo == UTC


@settings(max_examples=200, deadline=None)
@given(text=st.one_of(_text, _durations, _times, _awkward))
def test_parse_when_returns_utc_or_exits_2(text: str):
    from ragmon.cli.options import parse_when

    try:
        value = parse_when(text, NOW, "--since")
    except typer.Exit as exc:
        assert exc.exit_code == 2
    else:
        assert value.utcoffset() == timedelta(0)


@pytest.mark.parametrize("check", ["check_output_file", "check_output_dir"])
def test_an_output_name_the_file_system_refuses_is_a_usage_error(check: str, capsys: pytest.CaptureFixture[str]):
    """Found by the fuzzing above: a 300-character name made ``Path.is_dir()`` raise ENAMETOOLONG (a traceback)."""
    from ragmon.cli import options

    with pytest.raises(typer.Exit) as refused:
        getattr(options, check)(Path("x" * 300), "--out")
    err = capsys.readouterr().err
    assert refused.value.exit_code == 2 and err.startswith("error: --out xxx") and "File name too long" in err, err
