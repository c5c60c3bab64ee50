"""The root ``Settings`` model: one field per section, the sources it is read from, and the settings that span
sections (the deprecated ``ingest.shutdown_grace_seconds`` kept equal to ``process.shutdown_grace_seconds``).

Owns the section list and the source order (environment beats the YAML file). Reading files, secret files and
turning validation errors into problem lines is ``config.loading``; the sections are their own modules. Must
not read a file or open a connection.
"""

from __future__ import annotations

import logging

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from ragmon.config.ab import AbSettings
from ragmon.config.console import ConsoleSettings
from ragmon.config.coverage import CoverageSettings
from ragmon.config.drift import DriftSettings
from ragmon.config.ingest import IngestSettings
from ragmon.config.otlp import OtlpSettings
from ragmon.config.process import ProcessSettings, RolesSettings
from ragmon.config.read_api import ReadApiSettings
from ragmon.config.review import ReviewSettings, ServerSettings
from ragmon.config.score import JudgeSettings, SamplingSettings, ScoreSettings
from ragmon.config.shadow import ShadowSettings
from ragmon.config.store import KafkaSettings, StoreSettings

log = logging.getLogger("ragmon.config")


class Settings(BaseSettings):
    """Every ragmon setting. Sections are added by the subsystems that own them."""

    model_config = SettingsConfigDict(
        env_prefix="RAGMON_",
        env_nested_delimiter="__",
        extra="forbid",
        validate_default=True,
    )

    store: StoreSettings = Field(default_factory=StoreSettings, description="ClickHouse store.")
    kafka: KafkaSettings = Field(default_factory=KafkaSettings, description="Kafka source.")
    ingest: IngestSettings = Field(default_factory=IngestSettings, description="Ingest batching and redaction.")
    otlp: OtlpSettings = Field(
        default_factory=OtlpSettings, description="OTLP/HTTP receiver: POST /v1/traces straight from an application."
    )
    server: ServerSettings = Field(default_factory=ServerSettings, description="HTTP server.")
    read_api: ReadApiSettings = Field(
        default_factory=ReadApiSettings,
        description="Read commands while a daemon holds the embedded store: they ask it over its HTTP port.",
    )
    process: ProcessSettings = Field(
        default_factory=ProcessSettings, description="Shutdown grace and liveness limits every daemon process applies."
    )
    roles: RolesSettings = Field(default_factory=RolesSettings, description="Which daemon roles `ragmon run` starts.")
    review: ReviewSettings = Field(default_factory=ReviewSettings, description="Weekly human review UI and sample.")
    judge: JudgeSettings = Field(default_factory=JudgeSettings,
                                 description="The pinned judge (heuristic or OpenAI-compatible).")
    sampling: SamplingSettings = Field(default_factory=SamplingSettings, description="Live-scoring sampler.")
    score: ScoreSettings = Field(default_factory=ScoreSettings, description="The live scoring role.")
    drift: DriftSettings = Field(default_factory=DriftSettings,
                                 description="Drift checks on retrieval and quality features.")
    shadow: ShadowSettings = Field(default_factory=ShadowSettings, description="Configured running shadow comparisons.")
    console: ConsoleSettings = Field(
        default_factory=ConsoleSettings,
        description="The console's pages (served with the review UI, behind its sign-in)."
    )
    ab: AbSettings = Field(default_factory=AbSettings, description="A/B cohort outcomes and their comparison.")
    coverage: CoverageSettings = Field(
        default_factory=CoverageSettings, description="Question-type coverage: the golden set against live traffic."
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # environment beats the YAML file (passed as init kwargs) so a Deployment can override one field
        return env_settings, init_settings

    @model_validator(mode="after")
    def _one_shutdown_grace(self) -> Settings:
        """``ingest.shutdown_grace_seconds`` is the old name of ``process.shutdown_grace_seconds``: a file or
        variable that gives only the old one still works (with a warning), both giving different values is a
        problem, and afterwards both read the same so callers of either agree."""
        old_given = "shutdown_grace_seconds" in self.ingest.model_fields_set
        new_given = "shutdown_grace_seconds" in self.process.model_fields_set
        old, new = self.ingest.shutdown_grace_seconds, self.process.shutdown_grace_seconds
        if old_given and new_given and old != new:
            raise PydanticCustomError(
                "setting_conflict",
                "ingest.shutdown_grace_seconds ({old}) and process.shutdown_grace_seconds ({new}) differ; set only "
                "process.shutdown_grace_seconds (RAGMON_PROCESS__SHUTDOWN_GRACE_SECONDS): the ingest key is its "
                "deprecated old name",
                {"old": old, "new": new},
            )
        if old_given:
            log.warning("ingest.shutdown_grace_seconds is deprecated: use process.shutdown_grace_seconds "
                        "(RAGMON_PROCESS__SHUTDOWN_GRACE_SECONDS) instead")
        if old_given and not new_given:
            self.process = self.process.model_copy(update={"shutdown_grace_seconds": old})
        elif old != new:
            self.ingest = self.ingest.model_copy(update={"shutdown_grace_seconds": new})
        return self
