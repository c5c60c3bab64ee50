"""Every file of every table's parts is one the write guard sees cut short (ragmon.store.part_files, issue 30).

A full disk cuts a part's files short while the embedded engine ignores the failed writes. The guard asks of a suspect
part what ``CHECK TABLE … PART`` says and, for the three files CHECK does not read, what their format says. If an
engine upgrade adds a file neither reads, a part with it cut short would pass, and the next start would detach it with
every row: this test cuts each file of a part of each table in turn and fails naming the file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_file_of_a_part_cut_to_half_is_found_by_check_or_by_its_format(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "support" / "part_files_coverage.py"),
                           str(tmp_path / "chdb")], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert {"traces", "scores", "drift_checks", "review_labels"} <= set(out["tables"]), out
    assert out["files"] > 10 * len(out["tables"]), out  # every table's part was written and its files cut
    assert {t: files for t, files in out["missed"].items() if files} == {}, out
