"""Settings: one pydantic model per section, loaded from YAML (``--config``) and the environment.

Environment variables are ``RAGMON_<SECTION>__<FIELD>`` (e.g. ``RAGMON_STORE__DSN``) and win over the file.
Secrets are ``SecretStr`` (masked by ``config show`` and in logs); each secret may also be read from a file
named by its ``*_file`` sibling, so Kubernetes Secrets can be mounted. ``load_settings`` validates everything
at start-up and raises ``ConfigError`` with one line per problem. Field names carry their unit.

Layout: ``loading`` (file, environment, secret files, problem lines), ``settings`` (the root model), and the
sections by role: ``store`` (store, kafka), ``ingest``, ``otlp``, ``score`` (judge, sampling, score), ``drift``,
``review`` (server, review), ``read_api``, ``shadow``, ``coverage``, ``ab``, ``process`` (process, roles). Import
from ``ragmon.config``; the modules are its parts. This package must not import the store adapter, clickhouse-connect or
chDB: the DSN is checked by the pure ``ragmon.store.dsn``.
"""

from ragmon.config.ab import AbSettings
from ragmon.config.console import ConsoleSettings
from ragmon.config.coverage import DEFAULT_QUESTION_TYPES, OTHER, CoverageSettings
from ragmon.config.drift import DriftFeatureOverride, DriftSettings, DriftWindowSettings
from ragmon.config.ingest import IngestSettings
from ragmon.config.loading import MAX_PROBLEM_LINES, load_settings, masked_dump, override
from ragmon.config.otlp import OtlpSettings
from ragmon.config.process import ProcessSettings, RolesSettings
from ragmon.config.read_api import ReadApiSettings
from ragmon.config.review import ReviewSettings, ReviewUser, ServerSettings
from ragmon.config.score import JudgeSettings, RateOverride, SamplingSettings, ScoreSettings
from ragmon.config.section import secret_value
from ragmon.config.settings import Settings
from ragmon.config.shadow import ShadowComparisonSettings, ShadowSettings
from ragmon.config.store import DEFAULT_DSN, KafkaSettings, StoreSettings
from ragmon.store.dsn import mask_dsn, mask_url, mask_urls_in

__all__ = [
    "DEFAULT_DSN",
    "DEFAULT_QUESTION_TYPES",
    "OTHER",
    "AbSettings",
    "CoverageSettings",
    "MAX_PROBLEM_LINES",
    "ConsoleSettings",
    "DriftFeatureOverride",
    "DriftSettings",
    "DriftWindowSettings",
    "IngestSettings",
    "JudgeSettings",
    "KafkaSettings",
    "OtlpSettings",
    "ProcessSettings",
    "RateOverride",
    "ReadApiSettings",
    "ReviewSettings",
    "ReviewUser",
    "RolesSettings",
    "SamplingSettings",
    "ScoreSettings",
    "ServerSettings",
    "Settings",
    "ShadowComparisonSettings",
    "ShadowSettings",
    "StoreSettings",
    "load_settings",
    "mask_dsn",
    "mask_url",
    "mask_urls_in",
    "masked_dump",
    "override",
    "secret_value",
]
