"""Every ``ragmon.*`` module imports on its own, as the first ragmon module of an interpreter.

An import loop shows up only for the module imported first (``import ragmon.cli.drift_cmd`` used to fail with a
partially initialised module while ``import ragmon.cli.app`` worked). One child interpreter imports each module
after dropping every ``ragmon`` module from ``sys.modules``, so each import starts from nothing of ragmon
while the third-party packages stay loaded (one interpreter for all modules instead of one each: seconds, not
minutes). ``__main__`` modules are left out: importing one runs the command line.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import importlib, json, pkgutil, sys, traceback

import ragmon

problems = {}
names = sorted(m.name for m in pkgutil.walk_packages(ragmon.__path__, "ragmon.",
                                                       onerror=lambda name: problems.setdefault(name, "walk failed"))
               if m.name.rpartition(".")[2] != "__main__")
for name in ["ragmon", *names]:
    for loaded in [m for m in sys.modules if m == "ragmon" or m.startswith("ragmon.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except BaseException as exc:  # a SystemExit or a missing package is as much a failure as an ImportError
        problems[name] = "".join(traceback.format_exception_only(exc)).strip()
print(json.dumps({"modules": names, "problems": problems}))
"""


@pytest.mark.slow
def test_every_module_imports_on_its_own() -> None:
    done = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**_env(), "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    # the walk found the whole tree (a broken walk would make an empty list pass)
    assert {"ragmon.cli.drift_cmd", "ragmon.review.api", "ragmon.drift.check.export", "ragmon.store.client"} \
        <= set(report["modules"])
    assert report["problems"] == {}


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("RAGMON_")}
