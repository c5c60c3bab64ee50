"""Which roles one process runs: the role switches, and the shadow role only where it is switched on."""

from __future__ import annotations

import pytest

from ragmon.assemble import build_process
from ragmon.config import Settings
from ragmon.errors import ConfigError

COMPARISON = {"comparisons": [{"baseline": "hybrid@v1", "candidate": "dense@v2", "window_seconds": 3600}]}
ONLY_DRIFT = {"ingest": False, "score": False, "drift": True, "review": False}


@pytest.mark.parametrize(("shadow_on", "expected"), [(True, ["drift", "shadow"]), (False, ["drift"])])
def test_configured_comparisons_run_only_where_the_shadow_role_is_on(store, shadow_on, expected):
    settings = Settings(roles={**ONLY_DRIFT, "shadow": shadow_on}, shadow=COMPARISON)
    assert build_process(settings, store=store).role_names == expected


def test_shadow_alone_is_a_process_and_no_role_at_all_refuses_to_start(store):
    settings = Settings(roles={"ingest": False, "score": False, "drift": False, "review": False, "shadow": True},
                        shadow=COMPARISON)
    assert build_process(settings, store=store).role_names == ["shadow"]
    with pytest.raises(ConfigError, match="every role is switched off"):
        build_process(Settings(roles={**ONLY_DRIFT, "drift": False}), store=store)
