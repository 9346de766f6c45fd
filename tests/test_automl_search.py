"""AutoML search machinery: space from the schema, weighted choices, Optuna study, resume, workers, outputs.

The trial runner here is a cheap stand-in for training (a function of the sampled values), so the
study machinery (real Optuna, real SQLite, real processes and SIGKILL) is tested in seconds; the
real trials on the tiny model are in test_automl_trials.py.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import jsonschema
import optuna
import pyarrow.parquet as pq
import pytest

from helpers import ROOT, SKILL
from skillbank.automl.report import write_outputs
from skillbank.redaction import redact
from skillbank.automl.sampling import weighted_choice
from skillbank.automl.space import build_space, load_schema
from skillbank.automl.study import StudySettings, TrialOutcome
from skillbank.automl.worker import run_study
from skillbank.errors import InputError

SCHEMA = load_schema(ROOT / "skills" / "models" / SKILL / "schemas" / "train.schema.json")


def base_spec(**lora) -> dict:
    spec = json.loads(json.dumps(SCHEMA["default"]))
    spec["policy"]["lora"].update(lora)
    return spec


def test_default_space_comes_from_the_schema():
    space = build_space(SCHEMA, base_spec())
    assert space.keys() == ["train.epoch", "train.optm_lr", "train.optm_decay_type", "custom.vision.fps"]
    lr = space.params[1]
    assert lr.log and (lr.low, lr.high) == (1e-6, 1e-4)  # full fine-tuning: a decade either side of its 1e-5
    decay = space.params[2]
    assert decay.choices == ("linear", "sqrt", "cosine", "none") and decay.weights == (0.1, 0.1, 0.4, 0.4)
    assert set(space.skipped) == {"policy.lora.r", "policy.lora.lora_alpha", "policy.lora.lora_dropout"}


def test_depends_on_enables_lora_params_and_math_cond_is_powers_of_two():
    space = build_space(SCHEMA, base_spec(enable=True))
    rank = next(p for p in space.params if p.key == "policy.lora.r")
    assert rank.pow2 and (rank.low, rank.high) == (4, 128)
    lr = next(p for p in space.params if p.key == "train.optm_lr")
    assert (lr.low, lr.high) == (1e-5, 1e-3)  # LoRA: a decade either side of its 1e-4 (specification.learning_rate)


def test_user_ranges_and_choices_override_the_schema():
    space = build_space(SCHEMA, base_spec(), params=["train.optm_lr"], ranges={"train.optm_lr": (1e-5, 1e-4)},
                        choices={"train.optm_decay_type": ["cosine", "none"]})
    assert space.keys() == ["train.optm_lr", "train.optm_decay_type"]
    assert space.params[0].low == 1e-5 and space.params[1].choices == ("cosine", "none")


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"params": ["train.train_policy.mini_batch"]}, "never searched"),
        ({"params": ["train.nope"]}, "not a key"),
        ({"ranges": {"train.optm_lr": (0.5, 2.0)}}, "leaves the valid range"),
        ({"choices": {"train.optm_decay_type": ["bogus"]}}, "not a valid value"),
    ],
)
def test_bad_search_requests_are_input_errors(kwargs, words):
    with pytest.raises(InputError, match=words):
        build_space(SCHEMA, base_spec(), **kwargs)


def test_weighted_choices_follow_option_weights():
    rng = __import__("random").Random(0)
    counts = collections.Counter(weighted_choice(("a", "b", "c", "d"), (0.1, 0.1, 0.4, 0.4), rng.random()) for _ in range(20000))
    assert abs(counts["c"] / 20000 - 0.4) < 0.02 and abs(counts["a"] / 20000 - 0.1) < 0.02


def fake_runner(trial_dir: Path, spec: dict, report) -> TrialOutcome:
    """Accuracy peaks at lr 1e-4; one 'epoch' per reported value."""
    import math

    acc = 1.0 - abs(math.log10(spec["train"]["optm_lr"]) + 4) / 3
    history = []
    for epoch in range(1, 4):
        value = acc * epoch / 3
        history.append((epoch, value))
        if report(epoch, value):
            return TrialOutcome(value, epoch, None, pruned=True, history=history)
    return TrialOutcome(acc, 3, str(trial_dir / "ckpt"), history=history)


def settings(tmp_path: Path, **kw) -> StudySettings:
    return StudySettings(study_name="s", storage=f"sqlite:///{tmp_path / 'study.db'}", **kw)


def test_study_runs_baseline_first_and_writes_outputs(tmp_path):
    space = build_space(SCHEMA, base_spec(), params=["train.optm_lr", "train.optm_decay_type"])
    study = run_study(settings(tmp_path, max_trials=6, algorithm="hyperband"), space, base_spec(), tmp_path / "trials", fake_runner)
    trials = study.get_trials()
    assert trials[0].user_attrs["baseline"] and trials[0].user_attrs["values"]["train.optm_lr"] == pytest.approx(1e-5)
    rec = write_outputs(study, skill=SKILL, algorithm="hyperband", metric="accuracy", storage="sqlite:///x", out_dir=tmp_path)
    jsonschema.validate(rec, json.loads((ROOT / "schemas" / "best_rec.schema.json").read_text()))
    assert rec["baseline"]["trial_number"] == 0 and rec["trials"]["total"] == 6
    assert set(rec["best_params"]) == {"train.optm_lr", "train.optm_decay_type"}
    table = pq.read_table(tmp_path / "trials.parquet").to_pylist()
    assert len(table) == 6 and {"number", "state", "value", "epochs_run", "params"} <= set(table[0])
    assert (tmp_path / "history.png").read_bytes()[:4] == b"\x89PNG"


def test_invalid_recommendation_is_pruned_with_the_reason(tmp_path):
    space = build_space(SCHEMA, base_spec(), params=["train.optm_lr"])
    check = lambda trial_dir, spec: "preflight failed: too few records" if spec["train"]["optm_lr"] > 1e-5 else None  # noqa: E731
    study = run_study(settings(tmp_path, max_trials=8, algorithm="random"), space, base_spec(), tmp_path / "t", fake_runner, check=check)
    pruned = [t for t in study.get_trials() if t.state.name == "PRUNED"]
    assert pruned and all("too few records" in t.user_attrs["pruned_reason"] for t in pruned)


def test_environment_failures_fail_and_are_retried_on_resume_spec_failures_stay_pruned(tmp_path):
    """A spec reason (the check's answer) prunes for good; an environment reason (TrialFailed from the
    check, or the trainer crashing) fails the trial, and --resume runs its parameters again, the
    baseline's included; only COMPLETE and PRUNED count toward max_trials."""
    from skillbank.automl.study import TrialFailed

    space = build_space(SCHEMA, base_spec(), params=["train.optm_lr"], ranges={"train.optm_lr": (1e-6, 1e-3)})
    broken = {"env": True}

    def check(trial_dir, spec):
        if spec["train"]["optm_lr"] > 3e-4:
            return "preflight failed: spec.steps_per_rank: zero steps"
        if broken["env"] and spec["train"]["optm_lr"] > 1e-4:
            raise TrialFailed("preflight (environment) failed: env.disk: no space left")
        return None

    def runner(trial_dir, spec, report):
        if broken["env"] and spec["train"]["optm_lr"] == pytest.approx(1e-5):
            raise TrialFailed("training failed (exit 1)")  # the baseline crashes the first time
        return fake_runner(trial_dir, spec, report)

    st = settings(tmp_path, max_trials=6, algorithm="random", seed=1)
    first = run_study(st, space, base_spec(), tmp_path / "t", runner, check=check)
    trials = first.get_trials()
    assert trials[0].user_attrs["baseline"] and trials[0].state.name == "FAIL"
    assert "exit 1" in trials[0].user_attrs["fail_reason"]
    failed = {t.number: t.params for t in trials if t.state.name == "FAIL"}
    pruned = {t.number for t in trials if t.state.name == "PRUNED"}
    assert len(failed) >= 2 and pruned and all("zero steps" in trials[n].user_attrs["pruned_reason"] for n in pruned)

    broken["env"] = False  # the environment is fixed: resume
    st.resume = True
    resumed = run_study(st, space, base_spec(), tmp_path / "t", runner, check=check).get_trials()
    retries = {t.user_attrs["retry_of"]: t for t in resumed if "retry_of" in t.user_attrs}
    assert set(retries) == set(failed) and set(retries).isdisjoint(pruned)
    assert all(retries[n].params == failed[n] and retries[n].state.name in ("COMPLETE", "PRUNED") for n in failed)
    assert retries[0].user_attrs["baseline"] and retries[0].state.name == "COMPLETE"
    assert sum(t.state.name in ("COMPLETE", "PRUNED") for t in resumed) == 6
    rec = write_outputs(optuna.load_study(study_name="s", storage=st.storage), skill=SKILL, algorithm="random",
                        metric="accuracy", storage=st.storage, out_dir=tmp_path)
    assert rec["baseline"]["trial_number"] == retries[0].number and rec["baseline"]["metric_value"] is not None


def test_a_worker_joins_a_study_with_the_same_search_and_is_refused_another(tmp_path):
    """The same command joins (no --resume needed; the baseline is not enqueued again); another search
    under the same study name is refused, naming what differs."""
    space = build_space(SCHEMA, base_spec(), params=["train.optm_lr"])
    search = {"space": [p.describe() for p in space.params]}
    run_study(settings(tmp_path, max_trials=2, search=search), space, base_spec(), tmp_path / "t", fake_runner)
    joined = run_study(settings(tmp_path, max_trials=3, search=search), space, base_spec(), tmp_path / "t", fake_runner)
    assert sum(bool(t.user_attrs.get("baseline")) for t in joined.get_trials()) == 1 and len(joined.get_trials()) == 3
    other = build_space(SCHEMA, base_spec(), params=["train.optm_lr", "train.optm_decay_type"])
    with pytest.raises(InputError, match="searches differently .*space"):
        run_study(settings(tmp_path, max_trials=4, search={"space": [p.describe() for p in other.params]}), other, base_spec(),
                  tmp_path / "t", fake_runner)


def test_each_trial_is_seeded_by_its_number_not_the_process(tmp_path):
    """Two studies with the same seed draw the same values for the same trial number, whatever ran
    before in the process; two trials never share a seed (the duplicates of two workers)."""
    from skillbank.automl.study import trial_seed

    space = build_space(SCHEMA, base_spec(), params=["train.optm_lr"])
    values = []
    for name in ("a", "b"):
        st = StudySettings(study_name=name, storage=f"sqlite:///{tmp_path / 'study.db'}", max_trials=5, algorithm="random", baseline=False)
        values.append([t.params["train.optm_lr"] for t in run_study(st, space, base_spec(), tmp_path / name, fake_runner).get_trials()])
    assert values[0] == values[1] and len(set(values[0])) == 5
    assert len({trial_seed(0, n) for n in range(1000)}) == 1000


def test_storage_passwords_are_redacted():
    assert redact("postgresql://bob:s3cret@db:5432/optuna") == "postgresql://bob:***@db:5432/optuna"


WORKER = textwrap.dedent(
    """
    import json, sys, time
    sys.path.insert(0, {tests!r})
    from pathlib import Path
    from test_automl_search import SCHEMA, base_spec, fake_runner
    from skillbank.automl.space import build_space
    from skillbank.automl.study import StudySettings
    from skillbank.automl.worker import run_study

    def slow(trial_dir, spec, report):
        time.sleep(float(sys.argv[2]))
        return fake_runner(trial_dir, spec, report)

    space = build_space(SCHEMA, base_spec(), params=["train.optm_lr"])
    st = StudySettings(study_name="s", storage="sqlite:///" + sys.argv[1] + "/study.db", max_trials=int(sys.argv[3]), resume=True, seed=int(sys.argv[4]))
    run_study(st, space, base_spec(), Path(sys.argv[1]) / "t", slow)
    """
)


def _worker(tmp_path: Path, sleep: float, trials: int, seed: int) -> subprocess.Popen:
    script = tmp_path / "worker.py"
    script.write_text(WORKER.format(tests=str(Path(__file__).parent)))
    return subprocess.Popen([sys.executable, str(script), str(tmp_path), str(sleep), str(trials), str(seed)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _states(tmp_path: Path) -> collections.Counter:
    study = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'study.db'}")
    return collections.Counter(t.state.name for t in study.get_trials())


def test_two_processes_share_one_sqlite_study(tmp_path):
    """Exactly --max-trials finished trials (claimed under the study's file lock). `skillbank automl --status`
    (no spec: --out names the study folder, its only study) lists them, who ran each, the best so far."""
    from helpers import skillbank

    workers = [_worker(tmp_path, 0.3, 8, seed) for seed in (1, 2)]
    for w in workers:
        out, _ = w.communicate(timeout=180)
        assert w.returncode == 0, out
    states = _states(tmp_path)
    assert states["COMPLETE"] + states["PRUNED"] == 8  # exact: a trial is claimed only under the budget
    assert states["FAIL"] == 0
    status = skillbank("automl", "--out", str(tmp_path), "--status", "--json")
    assert status.returncode == 0, status.stderr
    doc = json.loads(status.stdout)
    assert doc["study"] == "s" and doc["counts"]["finished"] == doc["counts"]["total"] == 8 and doc["max_trials"] == 8
    assert {r["worker"].rsplit(":", 1)[1] for r in doc["trials"]} == {str(w.pid) for w in workers}
    assert doc["trials"][0]["baseline"] and doc["trials"][0]["params"] == {"train.optm_lr": pytest.approx(1e-5)}
    values = [r["value"] for r in doc["trials"] if r["state"] == "COMPLETE"]
    assert doc["trials"][-1]["best_so_far"] == max(values) == doc["best"]["value"]  # maximize
    missing = skillbank("automl", "--out", str(tmp_path / "nowhere"), "--status")
    assert missing.returncode == 2 and "no study database" in missing.stderr and not (tmp_path / "nowhere").exists()


def test_sigkill_then_resume_does_not_rerun_finished_trials(tmp_path):
    worker = _worker(tmp_path, 1.0, 6, 0)
    deadline = time.time() + 120
    while time.time() < deadline:
        time.sleep(0.5)
        if (tmp_path / "study.db").exists():
            try:
                if _states(tmp_path)["COMPLETE"] >= 2:
                    break
            except Exception:  # noqa: BLE001 - the study may not exist yet
                pass
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait()
    done_before = {t.number for t in optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'study.db'}").get_trials() if t.state.name == "COMPLETE"}
    time.sleep(11)  # the killed worker's heartbeat goes stale (GRACE_S = 10)
    resumed = _worker(tmp_path, 0.05, 6, 0)
    out, _ = resumed.communicate(timeout=180)
    assert resumed.returncode == 0, out
    trials = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'study.db'}").get_trials()
    finished = [t for t in trials if t.state.name in ("COMPLETE", "PRUNED")]
    assert len(finished) == 6
    assert done_before <= {t.number for t in finished}
    assert all(t.state.name != "RUNNING" for t in trials)


def test_a_stopped_worker_starts_no_new_trial_in_any_thread_and_requeues_its_own(tmp_path):
    """SIGTERM on a worker with --workers 2 (a stand-in runner fails as the real one does when told to stop):
    only the trials running then fail, each is enqueued again for the other workers, and no thread
    burns the budget on trials that fail at once."""
    from skillbank import procs
    from skillbank.automl.study import TrialFailed

    def runner(trial_dir, spec, report):
        procs.request_stop(procs.SIGNALLED)
        time.sleep(0.2)
        raise TrialFailed(procs.stop_reason())

    space = build_space(SCHEMA, base_spec(), params=["train.optm_lr"])
    try:
        study = run_study(settings(tmp_path, max_trials=8, workers=2, algorithm="random", baseline=False), space, base_spec(),
                          tmp_path / "t", runner)
    finally:
        procs.STOPPING.clear()
    trials = study.get_trials()
    failed = {t.number for t in trials if t.state.name == "FAIL"}
    assert 1 <= len(failed) <= 2 and all("this worker was stopped" in trials[n].user_attrs["fail_reason"] for n in failed)
    retries = [t for t in trials if t.number not in failed]
    assert all(t.state.name == "WAITING" for t in retries) and sorted(t.user_attrs["retry_of"] for t in retries) == sorted(failed)


def test_a_searched_key_with_a_null_base_value_fps_on_an_nframes_spec_runs_to_the_end(tmp_path):
    """custom.vision.fps searched on a spec that sets nframes (fps null): the baseline keeps fps null and
    samples nothing for it (it trains with nframes); every other trial samples fps and clears nframes (the
    exclusive pair, as `spec --set` does); the real spec model validates each trial's spec."""
    from skillbank.automl.space import exclusive_apply, null_base_notes
    from skillbank.automl.sampling import enqueue_values
    from skillbank.specification.registry import spec_model
    from skillbank.specification.validation import validate

    model = spec_model(SKILL, "train")
    spec = base_spec()
    spec["custom"]["vision"].update(fps=None, nframes=8)
    space = build_space(SCHEMA, spec, params=["custom.vision.fps", "train.optm_lr"])
    assert enqueue_values(space, {"custom.vision.fps": None, "train.optm_lr": 1e-5}) == {"train.optm_lr": 1e-5}
    visions = []

    def check(trial_dir, trial_spec):
        validate(model, trial_spec, source="test")  # both of fps / nframes set would be an InputError here
        visions.append(dict(trial_spec["custom"]["vision"]))

    study = run_study(settings(tmp_path, max_trials=4, algorithm="random"), space, spec, tmp_path / "t", fake_runner, check=check,
                      apply=exclusive_apply(model))
    trials = study.get_trials()
    assert [t.state.name for t in trials] == ["COMPLETE"] * 4
    assert trials[0].user_attrs["baseline"] and trials[0].user_attrs["values"]["custom.vision.fps"] is None
    assert "custom.vision.fps" not in trials[0].params and visions[0]["nframes"] == 8 and visions[0]["fps"] is None
    assert all(v["nframes"] is None and 1.0 <= v["fps"] <= 8.0 for v in visions[1:])
    assert null_base_notes(SKILL, spec, space) == [
        "custom.vision.fps is null in the base spec (custom.vision.nframes=8): the baseline trains with custom.vision.nframes; "
        "the other trials sample custom.vision.fps and clear custom.vision.nframes"]


def test_a_worker_with_another_base_spec_is_refused_naming_the_keys_unless_allowed(tmp_path, capsys):
    """The study stores its base spec (fingerprint.normalized: where a machine writes left out); a worker
    whose spec differs in another key exits 2 naming it; --allow-spec-change joins with a warning line;
    a worker whose spec differs only in where it writes joins as is."""
    from skillbank.automl.fingerprint import normalized

    space = build_space(SCHEMA, base_spec(), params=["train.optm_lr"])
    first = base_spec()
    run_study(settings(tmp_path, max_trials=1, base_spec=normalized(first)), space, first, tmp_path / "t", fake_runner)
    elsewhere = base_spec()
    elsewhere["results_dir"], elsewhere["train"]["output_dir"] = "/other/machine/results", "/other/machine/out"
    assert len(run_study(settings(tmp_path, max_trials=2, base_spec=normalized(elsewhere)), space, elsewhere, tmp_path / "t",
                         fake_runner).get_trials()) == 2
    other = base_spec()
    other["train"]["epoch"] = first["train"]["epoch"] + 2
    with pytest.raises(InputError, match=rf"another base spec.*train.epoch: study {first['train']['epoch']}, this spec {other['train']['epoch']}") as refused:
        run_study(settings(tmp_path, max_trials=3, base_spec=normalized(other)), space, other, tmp_path / "t", fake_runner)
    assert refused.value.where == "--spec" and "--allow-spec-change" in refused.value.fix
    joined = run_study(settings(tmp_path, max_trials=3, base_spec=normalized(other), allow_spec_change=True), space, other,
                       tmp_path / "t", fake_runner)
    assert len(joined.get_trials()) == 3 and "joining study 's'" in capsys.readouterr().err
