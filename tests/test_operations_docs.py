"""docs/operations.md: the RayJob manifest parses and the crontab line uses flags jobs/reencode.py accepts."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def _blocks(lang: str) -> list[str]:
    text = (REPO / "docs" / "operations.md").read_text()
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def test_rayjob_manifest_parses_and_runs_the_reencode_job():
    docs = [yaml.safe_load(b) for b in _blocks("yaml")]
    job = next(d for d in docs if isinstance(d, dict) and d.get("kind") == "RayJob")
    assert job["apiVersion"] == "ray.io/v1"
    assert job["spec"]["entrypoint"].startswith("python jobs/reencode.py --store")
    assert job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"]


def test_crontab_line_uses_real_flags(monkeypatch):
    from lexray.commands import reencode  # jobs/reencode.py runs this command

    (line,) = _blocks("cron")
    fields = line.strip().split(None, 5)
    assert len(fields) == 6 and fields[0] == "15" and fields[1] == "2"
    cmd = shlex.split(fields[5].split("&&", 1)[1].split(">>")[0])
    args = cmd[cmd.index("jobs/reencode.py") + 1:]
    seen = {}

    def fake(store, cfg, break_stale_lock=False):
        seen["store"], seen["dataset"] = store, cfg.data.dataset
        return {"added": 0}

    monkeypatch.setattr(reencode, "reencode", fake)
    monkeypatch.setattr(reencode.Path, "write_text", lambda self, text: None)
    monkeypatch.setattr(reencode.Path, "mkdir", lambda self, **kw: None)
    reencode.main(args)
    assert seen == {"store": "/data/stores/scifact", "dataset": "/data/beir/scifact"}
