"""Loading settings: the YAML file (refusing duplicate keys), the ``RAGMON_*`` environment, secrets read from
``*_file`` siblings, the store DSN checked and its database taken, and every problem as one line.

Owns turning a file and an environment into a validated ``Settings``, or a ``ConfigError`` with one line per
problem (capped at ``MAX_PROBLEM_LINES``, never echoing a secret); also ``override`` (command-line options) and
``masked_dump`` (``config show``: secrets, and the credentials inside the store DSN and every URL setting,
``URL_FIELDS``). Must not connect anywhere: the DSN is checked by the pure ``ragmon.store.dsn``, never by opening the
store.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import SecretStr, ValidationError
from pydantic_settings import SettingsError

from ragmon.config.section import secret_value
from ragmon.config.settings import Settings
from ragmon.errors import ConfigError, StoreError
from ragmon.store.dsn import mask_dsn, mask_url, parse_dsn

#: a config with thousands of wrong list items still fits on a screen
MAX_PROBLEM_LINES = 30


def load_settings(path: str | Path | None = None) -> Settings:
    """Load and validate settings from ``path`` (YAML, optional) and ``RAGMON_*`` environment variables.

    Raises ``ConfigError`` listing every problem, one per line.
    """
    data: dict[str, Any] = _read_yaml(Path(path)) if path is not None else {}
    _check_environment_sections()
    try:
        settings = Settings(**data)
    except ValidationError as exc:
        lines = [_problem_line(err, path) for err in exc.errors()]
        if len(lines) > MAX_PROBLEM_LINES:
            lines[MAX_PROBLEM_LINES:] = [f"… and {len(lines) - MAX_PROBLEM_LINES} more problems"]
        raise ConfigError(lines) from None
    except SettingsError as exc:  # a RAGMON_* variable for a list/mapping setting that is not JSON
        names = sorted(n for n in os.environ if n.upper().startswith("RAGMON_") and "__" in n)
        raise ConfigError([f"environment: {exc}; list and mapping settings take JSON, e.g. "
                           f"RAGMON_INGEST__REDACT_FIELDS='[\"question\"]' "
                           f"(set: {', '.join(names) or 'none'})"]) from None
    return _resolve_store(_resolve_secret_files(settings))


def _check_environment_sections() -> None:
    """``RAGMON_<SECTION>__<FIELD>`` naming no section is a typo (``RAGMON_SOTRE__DSN``) that would otherwise be
    ignored, leaving the default in force. (Unknown fields of a known section are refused by the models.)"""
    sections = set(Settings.model_fields)
    unknown = sorted(name for name in os.environ if name.upper().startswith("RAGMON_") and "__" in name
                     and name[len("RAGMON_"):].split("__", 1)[0].lower() not in sections)
    if unknown:
        raise ConfigError([f"environment: {name} names no settings section (check the spelling; sections are "
                           f"{', '.join(sorted(sections))})" for name in unknown])


def _resolve_store(settings: Settings) -> Settings:
    """Check the DSN's form now (exit 2, not a failed connection later), and take the database a server DSN names."""
    try:
        dsn = parse_dsn(secret_value(settings.store.dsn) or "")
    except StoreError as exc:
        message = str(exc)
        raise ConfigError([message if message.startswith("store.dsn") else f"store.dsn: {message}"]) from None
    if dsn.database is None or dsn.database == settings.store.database:
        return settings
    if "database" in settings.store.model_fields_set:
        raise ConfigError([f"store.database is {settings.store.database!r} but store.dsn names database "
                           f"{dsn.database!r}; set one of them (the DSN's path may be left out)"])
    try:
        store = type(settings.store).model_validate(settings.store.model_dump() | {"database": dsn.database})
    except ValidationError:
        raise ConfigError([f"store.dsn: the database it names, {dsn.database!r}, is not a valid database name "
                           "(letters, digits and _, not starting with a digit)"]) from None
    return settings.model_copy(update={"store": store})


def override(settings: Settings, section: str, **values: Any) -> Settings:
    """``settings`` with fields of one section replaced, as command-line options do; ``None`` leaves a field alone.

    The section is validated again; raises ``ConfigError`` with one line per problem (``server.port: ...``).
    """
    given = {k: v for k, v in values.items() if v is not None}
    if not given:
        return settings
    current = getattr(settings, section)
    try:
        replaced = type(current).model_validate(current.model_dump() | given)
    except ValidationError as exc:
        raise ConfigError([f"{section}.{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]) from None
    return settings.model_copy(update={section: replaced})


#: (section, field) of every URL setting: each may carry credentials (``user:password@``, ``?token=``), masked by
#: ``masked_dump`` (a unit test checks that every ``*url`` field of the settings is listed here)
URL_FIELDS = (("judge", "base_url"), ("console", "public_url"), ("console", "runbook_base_url"), ("read_api", "url"))


def masked_dump(settings: Settings) -> dict[str, Any]:
    """The effective settings as plain data, every secret (and any password inside a DSN or a URL) masked."""
    data = settings.model_dump(mode="json")
    data["store"]["dsn"] = mask_dsn(secret_value(settings.store.dsn) or "")
    for section, field in URL_FIELDS:
        value = getattr(getattr(settings, section), field)
        data[section][field] = None if value is None else mask_url(value)
    return data


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping (it would silently keep the last one)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            if isinstance(key, str | int | float | bool) or key is None:
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} appears twice in this mapping (the second would win)",
                        key_node.start_mark)
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read the config file ({exc.strerror or exc})"]) from None
    except UnicodeDecodeError as exc:
        raise ConfigError([f"{path}: not UTF-8 text (byte {exc.start}); save the config file as UTF-8 YAML"]) from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError([f"{path}: not valid YAML{where}: {getattr(exc, 'problem', exc)}"]) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError([f"{path}: the top level must be a mapping of sections (store:, kafka:, …)"])
    odd = [f"{path}: top-level key {k!r} is not a section name (store:, kafka:, …)"
           for k in data if not isinstance(k, str)]
    if odd:  # Settings(**data) would raise TypeError on them
        raise ConfigError(odd)
    return data


def _problem_line(err: Any, path: str | Path | None) -> str:
    if not err.get("loc"):  # a check across sections (Settings' own validator): its message names the settings
        return f"{err.get('msg', 'invalid')}{f' (file {path} or environment)' if path else ' (environment)'}"
    loc = ".".join(str(p) for p in err["loc"])
    # RAGMON_<SECTION>__<FIELD>: deeper locations (list items, mapping keys) are inside that one variable
    env_name = "RAGMON_" + "__".join(str(p).upper() for p in err["loc"][:2])
    msg = err.get("msg", "invalid")
    if err.get("type") == "extra_forbidden":
        msg = "unknown setting (check the spelling; `ragmon config show` lists every setting)"
    where = f" (file {path} or env {env_name})" if path else f" (env {env_name})"
    given = err.get("input")
    # never echo a value that may be a secret, or any value under an unknown (perhaps misspelled secret) name
    secret = any(word in loc.lower() for word in _SECRET_WORDS) or err.get("type") == "extra_forbidden"
    if isinstance(given, str):  # a URL's credentials (user:password@, ?token=) are masked as config show masks them
        given = mask_url(given)
    shown = "" if isinstance(given, dict | list) or given is None or secret else f", got {_clip(repr(given))}"
    return f"{loc}: {msg}{given and shown or ''}{where}"


_SECRET_WORDS = ("password", "passwd", "dsn", "key", "secret", "token", "hash", "credential")


def _clip(text: str, limit: int = 80) -> str:
    """One problem stays one readable line even when the offending value is megabytes long."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def _resolve_secret_files(settings: Settings) -> Settings:
    problems: list[str] = []
    updates: dict[str, dict[str, Any]] = {}
    for section_name, field, file_field in (("store", "dsn", "dsn_file"),
                                            ("kafka", "sasl_password", "sasl_password_file"),
                                             ("review", "session_secret", "session_secret_file"),
                                             ("judge", "api_key", "api_key_file"), ("otlp", "token", "token_file"),
                                             ("read_api", "token", "token_file")):
        section = getattr(settings, section_name)
        file_path = getattr(section, file_field)
        if file_path is None:
            continue
        try:
            value = Path(file_path).read_text(encoding="utf-8").strip()
        except FileNotFoundError as exc:
            if section_name == "read_api":  # the daemon creates it with a random token when it starts
                continue
            problems.append(f"{section_name}.{file_field}: cannot read {file_path} ({exc.strerror or exc})")
            continue
        except OSError as exc:
            problems.append(f"{section_name}.{file_field}: cannot read {file_path} ({exc.strerror or exc})")
            continue
        except UnicodeDecodeError as exc:
            problems.append(f"{section_name}.{file_field}: {file_path} is not UTF-8 text (byte {exc.start}); the file "
                            f"holds the {field.replace('_', ' ')} itself, as text")
            continue
        updates.setdefault(section_name, {})[field] = SecretStr(value)
    if problems:
        raise ConfigError(problems)
    for section_name, fields in updates.items():
        settings = settings.model_copy(
            update={section_name: getattr(settings, section_name).model_copy(update=fields)}
        )
    return settings
