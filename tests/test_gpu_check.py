"""benchmarks/gpu_check.py, the check prepared for the day a GPU is lent, rehearsed on CPU (--cpu --tiny:
Cosmos-Reason2-2B's bundled config shrunk, built by the same code) so it cannot rot: every phase runs
(model, clips, `skillbank plan --json`, the example cache, `skillbank train --backend local`, evaluate's
batched generation) and the JSON has every figure. No GPU here: the GPU-only figures (peak GPU memory,
MFU) are null on CPU, and their arithmetic is checked on numbers below."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys

import pytest

from helpers import ROOT

SCRIPT = ROOT / "benchmarks" / "gpu_check.py"


def _module():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu-check") / "gpu_check.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--cpu", "--tiny", "--out", str(out), "--budget-s", "400"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return json.loads(out.read_text()), proc


def test_every_phase_runs_on_cpu_and_the_json_has_every_figure(rehearsal):
    doc, proc = rehearsal
    assert doc["ok"] and set(doc["phases"]) == {"model", "data", "plan", "examples", "train", "train_metrics", "evaluate"}
    assert all(p["ok"] for p in doc["phases"].values()), doc["phases"]
    assert doc["device"]["type"] == "cpu" and doc["tiny"] is True
    plan = doc["plan"]
    assert plan["memory_per_gpu_gib"] > 0 and plan["params"] > 0 and plan["gpu"] == "h100-80gb"
    assert plan["mfu_assumed"] == pytest.approx(0.3)  # read from plan's assumptions: the wording is part of the contract
    assert doc["examples"]["records"] == 4 and doc["examples"]["tokens_per_sample"]["mean"] > 0
    train = doc["train"]
    assert train["steps"] == 2 and all(math.isfinite(t) and t > 0 for t in train["step_times_s"]) and math.isfinite(train["loss_last"])
    assert train["peak_allocated_gib"] is None  # no GPU: no GPU memory
    assert doc["evaluate"]["samples"] == 4 and doc["evaluate"]["samples_per_s"] > 0 and doc["evaluate"]["engine"] == "transformers"
    assert "Cosmos-Reason2-2B" in doc["model"]["architecture"] and doc["model"]["params"] > 0
    assert any("CPU rehearsal" in note for note in doc["notes"])
    assert set(doc["compare"]) == {"tokens_measured_over_plan", "memory_measured_over_plan", "step_time_measured_over_plan", "mfu_measured", "mfu_assumed"}
    assert json.loads(proc.stdout.strip().splitlines()[-1])["ok"] is True


def test_measured_over_planned_arithmetic():
    compare = _module().compare
    plan = {"memory_per_gpu_gib": 40.0, "step_time_s": 0.5, "mfu_assumed": 0.3, "tokens_per_sample": {"mean": 1000}}
    train = {"peak_allocated_gib": 44.0, "step_time_s_median": 1.0}
    got = compare(plan, train, {"tokens_per_sample": {"mean": 950}})
    assert got == {"tokens_measured_over_plan": 0.95, "memory_measured_over_plan": 1.1, "step_time_measured_over_plan": 2.0,
                   "mfu_measured": 0.15, "mfu_assumed": 0.3}
    assert compare(None, None, None)["mfu_measured"] is None


def test_a_phase_that_fails_is_recorded_and_the_rest_still_report():
    check = _module().Check(budget_s=60)
    assert check.run("boom", lambda: 1 / 0) is None and check.run("fine", lambda: 7) == 7
    assert check.phases["boom"]["ok"] is False and "ZeroDivisionError" in check.phases["boom"]["error"] and check.phases["fine"]["ok"]
