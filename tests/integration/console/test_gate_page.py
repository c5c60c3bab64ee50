"""The Gate runs page over real artifacts written by ``ragmon gate`` (two runs of a golden set whose case ids,
strata and retriever errors carry hostile text): the list, one run's per-stratum table, the gains and losses
between the two, and names that are not a run's refused (no path escapes the runs directory)."""

from __future__ import annotations

import json
from pathlib import Path

from ragmon.config import ConsoleSettings
from tests.integration.console.support import HOSTILE, console_app, console_settings
from tests.integration.review.support import signed_in
from tests.integration.test_gate_cli import gate, gcase, golden_file

RETRIEVER = '''
TABLE = {"one": ["a1"], "two": ["b1"], "three": ["c1"]}
WORSE = {"one": ["a1"], "two": ["b1"], "three": ["x", "c1"]}
def search(question, k):
    if question == "explodes":
        raise RuntimeError(HOSTILE)
    return [(c, 1.0) for c in (WORSE if SECOND else TABLE).get(question, ["x"])][:k]
'''


def _runs(tmp_path: Path) -> Path:
    cases = [gcase(f"case-{i}-{HOSTILE}", q, HOSTILE if i % 2 else "billing", [c])
             for i, (q, c) in enumerate([("one", "a1"), ("two", "b1"), ("three", "c1"), ("explodes", "d1")])]
    golden = golden_file(tmp_path / "golden.json", cases)
    out = tmp_path / "runs"
    for better in (False, True):
        (tmp_path / f"r{int(better)}.py").write_text(f"SECOND = {better}\nHOSTILE = {HOSTILE!r}\n" + RETRIEVER)
        done = gate(tmp_path, golden, "--retriever", f"r{int(better)}:search", "--k", "2", "--min-coverage", "0.1",
                    "--min-mrr", "0.1", "--out", out, "--format", "json")
        assert done.returncode in (0, 1), done.stderr
    return out


def test_gate_runs_list_one_run_and_the_diff_between_two(store, tmp_path):
    out = _runs(tmp_path)
    names = sorted(p.name for p in out.glob("run-*.json"))
    assert len(names) == 2
    client = signed_in(console_app(store, console_settings(console=ConsoleSettings(gate_runs_dir=out))))
    listing = client.get("/review/console/gate").text
    assert listing.count("/review/console/gate/runs/run-") == 2 and "r0:search" in listing and "r1:search" in listing

    first = json.loads((out / names[0]).read_text())
    run = client.get(f"/review/console/gate/runs/{names[0]}").text
    assert "<script>window" not in run and "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in run
    assert run.count("<tr class=") == len(first["report"]["strata"])  # one row per stratum, ALL included
    assert "RuntimeError" in run  # the query that raised, its message escaped

    by_retriever = {json.loads((out / n).read_text())["parameters"]["retriever"]: n for n in names}
    diff = client.get(f"/review/console/gate?baseline={by_retriever['r0:search']}"
                      f"&current={by_retriever['r1:search']}").text
    losses = diff.split('id="losses"')[1].split("</table>")[0]
    assert "case-2-" in losses and "-0.500" in losses  # 'three': c1 fell from rank 1 to rank 2
    assert "none" in diff.split('id="gains"')[1].split("</table>")[0]
    assert "<script>window" not in diff

    for bad in ("../golden.json", "run-0.json", "..%2F..%2Fetc%2Fpasswd"):
        r = client.get(f"/review/console/gate/runs/{bad}")
        assert r.status_code == 404, bad
    assert client.get("/review/console/gate?baseline=../x&current=y").status_code == 400
