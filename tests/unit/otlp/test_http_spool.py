"""The OTLP/HTTP spool (``http_spool``) on a real directory: replay from the committed position across restarts,
committed segments deleted, the bound, one process per directory, and hostile contents at start-up (a tail cut
short by a crash mid-write, a damaged record in an older segment, a garbled position file)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragmon.config import Settings
from ragmon.errors import ConfigError
from ragmon.otlp.http_spool import RECORD, HttpSpool, SpoolError, SpoolFull


def bodies(n: int, size: int = 50) -> list[bytes]:
    return [bytes([65 + i % 26]) * size for i in range(n)]


def replayed(spool: HttpSpool) -> list[tuple[int, bytes]]:
    return [(r.offset, r.body) for r in spool.replay()]


def segments(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob("*.seg"))


def test_what_is_after_the_committed_position_is_replayed_by_the_next_open(tmp_path: Path):
    spool = HttpSpool(tmp_path, max_bytes=1_000_000)
    sent = bodies(5)
    assert [spool.append(b, "otlp_proto") for b in sent] == [0, 1, 2, 3, 4]
    spool.commit(2)
    spool.close()
    again = HttpSpool(tmp_path, max_bytes=1_000_000)
    assert again.problems == [] and again.committed == 2 and again.replay_records == 3
    assert replayed(again) == [(2, sent[2]), (3, sent[3]), (4, sent[4])]
    assert again.append(b"json", "otlp_json") == 5, "offsets go on counting across restarts"
    again.close()
    assert [r.fmt for r in HttpSpool(tmp_path, max_bytes=1_000_000).replay()][-1] == "otlp_json"


def test_committed_segments_are_deleted_and_the_bound_counts_what_is_left(tmp_path: Path):
    record = RECORD.size + 50
    spool = HttpSpool(tmp_path, max_bytes=4 * record, segment_bytes=2 * record)  # two records a segment
    for b in bodies(4):
        spool.append(b, "otlp_proto")
    assert len(segments(tmp_path)) == 2 and spool.size_bytes() == 4 * record
    with pytest.raises(SpoolFull):
        spool.append(b"x" * 50, "otlp_proto")
    spool.commit(3)  # the first segment (offsets 0 and 1) is wholly committed; the second holds offset 3
    assert segments(tmp_path) == [f"{2:020d}.seg"] and spool.size_bytes() == 2 * record
    assert spool.append(b"y" * 50, "otlp_proto") == 4
    spool.commit(5)
    assert segments(tmp_path) == [] and spool.size_bytes() == 0


def test_one_request_larger_than_the_bound_still_goes_into_an_empty_spool(tmp_path: Path):
    spool = HttpSpool(tmp_path, max_bytes=100)
    assert spool.append(b"x" * 500, "otlp_proto") == 0
    with pytest.raises(SpoolFull):
        spool.append(b"y", "otlp_proto")


def test_a_tail_cut_short_by_a_crash_is_reported_cut_off_and_the_rest_replayed(tmp_path: Path):
    spool = HttpSpool(tmp_path, max_bytes=1_000_000)
    sent = bodies(3)
    for b in sent:
        spool.append(b, "otlp_proto")
    spool.close()
    [last] = tmp_path.glob("*.seg")
    intact = last.stat().st_size
    with last.open("ab") as f:  # what kill -9 in the middle of a write leaves: a header and part of its body
        f.write(RECORD.pack(1000, 0, 3, 0) + b"z" * 100)
    again = HttpSpool(tmp_path, max_bytes=1_000_000)
    [problem] = again.problems
    assert f"{last}: {RECORD.size + 100} byte(s) after record 2" in problem and "cut off" in problem
    assert replayed(again) == list(enumerate(sent)) and last.stat().st_size == intact
    assert again.append(b"next", "otlp_proto") == 3
    again.close()
    third = HttpSpool(tmp_path, max_bytes=1_000_000)
    assert third.problems == [] and [o for o, _ in replayed(third)] == [0, 1, 2, 3]


def test_a_damaged_record_in_an_older_segment_does_not_stop_the_later_segments(tmp_path: Path):
    record = RECORD.size + 50
    spool = HttpSpool(tmp_path, max_bytes=1_000_000, segment_bytes=2 * record)
    sent = bodies(6)
    for b in sent:
        spool.append(b, "otlp_proto")
    spool.close()
    first = tmp_path / f"{0:020d}.seg"
    data = bytearray(first.read_bytes())
    data[record + RECORD.size + 7] ^= 0xFF  # a bit flipped in the body of offset 1
    first.write_bytes(bytes(data))
    again = HttpSpool(tmp_path, max_bytes=1_000_000)
    [problem] = again.problems
    assert "after record 0" in problem and "later segments are" in problem
    assert replayed(again) == [(0, sent[0])] + [(i, sent[i]) for i in range(2, 6)]


def test_a_garbled_position_file_replays_everything(tmp_path: Path):
    spool = HttpSpool(tmp_path, max_bytes=1_000_000)
    for b in bodies(2):
        spool.append(b, "otlp_proto")
    spool.commit(1)
    spool.close()
    (tmp_path / "committed").write_bytes(b"\x00garbage")
    again = HttpSpool(tmp_path, max_bytes=1_000_000)
    [problem] = again.problems
    assert "does not hold an offset" in problem and [o for o, _ in replayed(again)] == [0, 1]


def test_a_directory_in_use_or_unusable_fails_with_one_line(tmp_path: Path):
    spool = HttpSpool(tmp_path / "spool", max_bytes=1_000_000)
    with pytest.raises(SpoolError, match=r"is in use by another ragmon process \(pid \d+\)"):
        HttpSpool(tmp_path / "spool", max_bytes=1_000_000)
    spool.close()
    HttpSpool(tmp_path / "spool", max_bytes=1_000_000).close()  # given up on close
    (tmp_path / "a-file").write_text("")
    with pytest.raises(SpoolError, match="cannot use .*a-file/spool: Not a directory"):
        HttpSpool(tmp_path / "a-file" / "spool", max_bytes=1_000_000)


def test_the_otlp_role_refuses_to_start_on_an_unusable_spool_dir(tmp_path: Path):
    from ragmon.otlp import role as otlp_role
    from ragmon.telemetry import Telemetry

    (tmp_path / "a-file").write_text("")
    settings = Settings(otlp={"spool_dir": str(tmp_path / "a-file" / "spool"),
                              "dead_letters": str(tmp_path / "dead.jsonl")})
    with pytest.raises(ConfigError) as info:
        otlp_role.build(settings, store=None, telemetry=Telemetry())
    [line] = info.value.problems
    assert line.startswith("otlp.spool_dir: cannot use") and line.endswith("(RAGMON_OTLP__SPOOL_DIR)")


def test_the_default_spool_dir_is_beside_the_embedded_store_and_names_its_database(tmp_path: Path):
    from ragmon.otlp.role import spool_dir

    assert spool_dir(Settings()) == Path(".ragmon/otlp-spool/ragmon")
    embedded = Settings(store={"dsn": f"chdb://{tmp_path}/data/chdb", "database": "eu"})
    assert spool_dir(embedded) == tmp_path / "data" / "otlp-spool" / "eu"
    server = Settings(store={"dsn": "http://ch:8123/prod"})
    assert spool_dir(server) == Path(".ragmon/otlp-spool/ragmon")
    assert spool_dir(Settings(otlp={"spool_dir": str(tmp_path / "s")})) == tmp_path / "s"
