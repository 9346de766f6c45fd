"""`skillbank demo --quick`: the main job's whole flow on the embedded default (accuracy is the full demo's job)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from helpers import skillbank


def test_quick_demo_runs_the_whole_flow_and_prints_one_json_document(tmp_path):
    proc = skillbank("demo", "--quick", "--out", str(tmp_path / "demo"), "--json", timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert set(doc["families"]) == {"yes_no", "directionality", "colour"}
    for row in doc["families"].values():
        assert 0.0 <= row["base_accuracy"] <= 1.0 and 0.0 <= row["trained_accuracy"] <= 1.0
    assert doc["wall_s"] > 0 and doc["preflight"]["errors"] == 0
    assert doc["cpu_s"] > 0 and doc["training"]["steps_per_s"] > 0 and len(doc["load_average"]) == 3  # how busy the machine was
    art = {k: Path(v) for k, v in doc["artifacts"].items()}
    assert (art["final_checkpoint"] / "config.json").is_file()
    assert (art["eval_trained"] / "results.json").is_file() and (art["eval_base"] / "metrics.json").is_file()
    failures = pq.read_table(art["gaps_parquet"])
    assert failures.num_rows == doc["gaps"]["failures"]
    record = json.loads(art["job_record"].read_text())
    assert record["status"] == "succeeded"
    assert doc["training"]["last_loss"] < doc["training"]["first_loss"]
