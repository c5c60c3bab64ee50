"""The ``otlp`` role as a process starts it: the OTLP/HTTP receiver on its own port, and an ingest loop over what
it accepts.

``check(settings)`` and ``build(settings, store, telemetry) -> RoleParts`` have the shape of every role's
``role.py``; it runs the trace loop of ``ragmon.pipeline``, as the ingest role does. The receiver
(``receiver``) spools and queues requests in an ``HttpTraceSource``; an ``IngestPipeline`` polls it with the same
assembly, validation, redaction, batching and store writes as Kafka input. The spool directory (``spool_dir``) is
opened here, so an unusable one fails the start with one line; what it holds from the last run is replayed first.
Dead letters go to a JSON Lines file or the Kafka dead-letter topic (``otlp.dead_letters``). The port is bound by
``ragmon.process`` (``RoleParts.listeners``), never here; nothing here opens the store.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ragmon.config import Settings, secret_value
from ragmon.config.otlp import KAFKA_DEAD_LETTERS
from ragmon.daemon import Listener, RoleParts
from ragmon.errors import ConfigError, InputError
from ragmon.otlp.http_source import HttpTraceSource
from ragmon.otlp.http_spool import HttpSpool, SpoolError
from ragmon.otlp.receiver import PATH, otlp_router
from ragmon.pipeline.faults import FaultPoints
from ragmon.pipeline.intake import redaction_problems
from ragmon.pipeline.role_parts import pipeline_role
from ragmon.store.dsn import parse_dsn
from ragmon.stream.dead_letter import DeadLetterSink, KafkaDeadLetterSink
from ragmon.stream.dead_letter_file import FileDeadLetterSink
from ragmon.telemetry import Telemetry

log = logging.getLogger(__name__)
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def check(settings: Settings) -> None:
    """Raise ``ConfigError`` with the problems the models cannot see on their own (one line each)."""
    problems = redaction_problems(settings)
    try:
        FaultPoints.from_env()
    except ValueError as exc:
        problems.append(str(exc))
    otlp = settings.otlp
    if otlp.token is not None and not secret_value(otlp.token):
        problems.append("otlp.token: empty; set a token or leave it unset")
    if otlp.port != 0 and otlp.port == settings.server.port and otlp.host == settings.server.host:
        problems.append(f"otlp.port: {otlp.port} is server.port too; give the receiver its own port (4318)")
    if problems:
        raise ConfigError(problems)


def build(settings: Settings, store: Any, telemetry: Telemetry) -> RoleParts:
    """The receiver's router (on ``otlp.host:otlp.port``) and the loop behind it. Raises ``RagmonError`` on bad
    setup."""
    check(settings)
    otlp = settings.otlp
    token = secret_value(otlp.token)
    if token is None and otlp.host not in _LOOPBACK:
        log.warning("otlp.host is %s with no otlp.token: anyone who reaches port %d may send traces", otlp.host,
                    otlp.port)
    directory = spool_dir(settings)
    try:
        spool = HttpSpool(directory, max_bytes=otlp.max_spool_bytes, fsync=otlp.spool_fsync)
    except SpoolError as exc:
        raise ConfigError([f"otlp.spool_dir: {exc} (RAGMON_OTLP__SPOOL_DIR)"]) from None
    for problem in spool.problems:
        log.warning("OTLP/HTTP spool: %s", problem)
    if spool.replay_records:
        log.info("OTLP/HTTP spool %s: %d request(s) accepted before the last stop and not stored yet are read "
                 "again first", directory, spool.replay_records)
    try:
        source = HttpTraceSource(otlp.max_queued_bytes, spool)
        router = otlp_router(source, token=token, max_body_bytes=otlp.max_body_bytes, telemetry=telemetry)
        return pipeline_role(
            settings, store, telemetry, source, _dead_letters(settings), input_format="auto", name="otlp",
            while_failing="requests refused with 503", polled="last poll of the OTLP/HTTP queue",
            listeners=(Listener("otlp", otlp.host, otlp.port, (router,), path=PATH),),
            on_stuck="requests accepted but not stored stay in the OTLP/HTTP spool and are read again on the next "
                     "start")
    except Exception:
        spool.close()
        raise


def spool_dir(settings: Settings) -> Path:
    """``otlp.spool_dir``, or by default ``otlp-spool/<database>`` beside the embedded store's directory (with a
    ClickHouse server, under ``.ragmon``): one spool per store and database, so that two receivers writing to
    different stores never share one."""
    if settings.otlp.spool_dir is not None:
        return settings.otlp.spool_dir
    dsn = parse_dsn(secret_value(settings.store.dsn) or "")
    base = dsn.path.parent if dsn.embedded and dsn.path is not None else Path(".ragmon")
    return base / "otlp-spool" / settings.store.database


def _dead_letters(settings: Settings) -> DeadLetterSink:
    where = settings.otlp.dead_letters
    if where == KAFKA_DEAD_LETTERS:
        return KafkaDeadLetterSink(settings.kafka)
    if where != "-":
        try:
            Path(where).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError([f"otlp.dead_letters: cannot create the directory of {where} ({exc.strerror or exc})"]
                              ) from None
    try:
        return FileDeadLetterSink(where)
    except InputError as exc:  # its message names --dead-letter-file; the setting here is another
        raise ConfigError([f"otlp.dead_letters: {str(exc).split(': ', 1)[-1]}"]) from None
