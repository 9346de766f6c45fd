"""A DEFT loop as a job: `skillbank submit --action deft --config deft.yaml` on local, Docker and Slurm
(issue 37, item 6). The jobs are rendered (--dry-run) and their commands parsed by `skillbank deft`'s own
parser; the gate is the real DEFT preflight on the tiny model and the demo clips. The job that runs,
requeued between its rounds, is in test_slurm_real.py."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import yaml

from skillbank import cli
from skillbank.specification.deft import DeftConfig
from test_deft_loop import bench_dir, make_inputs  # noqa: F401  (fixture)
from test_platform import _env, run_cli, submit_json  # noqa: F401  (fixture: autouse _env)


def deft_args(line: str) -> tuple[list[str], object]:
    """The rendered `... deft --config ...` line parsed by `skillbank deft`'s parser (its argv, the Namespace)."""
    argv = shlex.split(line.split("srun", 1)[-1].strip().removeprefix("exec "))
    i = argv.index("deft")
    return argv, cli.build_parser().parse_args(argv[i:])


def test_render_local_docker_slurm_runs_the_loop_resumed_on_the_jobs_allocation(tmp_path, capsys, tiny_model_dir, demo_dataset_dir, bench_dir):
    config = make_inputs(tmp_path / "in", tiny_model_dir, demo_dataset_dir, bench_dir)
    out = tmp_path / "in" / "out"
    given = yaml.safe_load(config.read_text())
    for platform in ("local", "docker", "slurm"):
        doc = submit_json(capsys, "--platform", platform, "--action", "deft", "--config", str(config), "--gpus-per-node", "0", "--dry-run")
        record = doc["record"]
        assert record["action"] == "deft" and record["id"].startswith("deft-") and record["backend"] == "local" and record["status"] == "rendered"
        job_dir = Path(record["outputs"]["job_dir"])
        assert job_dir.parent == out / "jobs" and record["outputs"]["deft_dir"] == str(out)  # beside the loop's state
        assert record["spec"]["path"] == str(config) and record["spec"]["copy_path"] == str(job_dir / "deft.yaml")
        copied = yaml.safe_load((job_dir / "deft.yaml").read_text())
        assert DeftConfig.model_validate(copied) == DeftConfig.model_validate(given) and "paths" not in copied  # the config as the node reads it
        pre = record["preflight"]
        assert pre["ran"] and pre["runs_on"] == "node" and pre["deft"]["benchmark_disjoint"] is True
        assert pre["deft"]["rounds_train_on"] == {"backend": "local", "nodes": 1, "ranks_per_node": 1}
        assert any("every attempt runs `skillbank deft --resume`" in n for n in record["notes"])
        script = Path(record["script"])
        assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
        text = (job_dir / "container.sh" if platform == "docker" else script).read_text()
        line = next(ln for ln in text.splitlines() if " deft --config " in ln)
        argv, args = deft_args(line)
        assert args.config == "$JOB_DIR/deft.yaml" and args.resume and (args.nodes, args.gpus_per_node) == (1, 0) and not args.dry_run
        first = next(ln for ln in text.splitlines() if " preflight --skill " in ln)
        assert text.index(first) < text.index(line)  # the environment check on the node comes first, with the rounds' train spec
        assert f"--spec {given['train_spec']}" in first and "--only env --runs-on here --backend local" in first
        if platform == "slurm":
            assert "#SBATCH --cpus-per-task=1" in text and '--cpus-per-task="$SLURM_CPUS_PER_TASK"' in line and "DEFT loop (local rounds)" in text
            assert "trap on_usr1 USR1" in text and "#SBATCH --signal=B:USR1@" in text and line.startswith("run_step ")  # requeued near --time
        if platform == "docker":  # the sets, the specs and the loop's folder are mounted where the config names them
            mounts = [a for a in record["argv"] if ":" in a and a.startswith("/")]
            for folder, ro in ((given["pool"]["media_dir"], ":ro"), (str(Path(given["benchmark"]["annotation_path"]).parent), ":ro"),
                               (str(tmp_path / "in"), "")):
                assert any(m.split(":")[0] in (folder, *map(str, Path(folder).parents)) for m in mounts), (folder, mounts)
        if platform == "local":  # the detached launch runs the same command, the job folder spelled out
            assert record["argv"][record["argv"].index("deft"):] == [a.replace("$JOB_DIR", str(job_dir)) for a in argv[argv.index("deft"):]]


def test_a_config_written_for_the_cluster_travels_with_its_map_and_bad_jobs_are_refused(tmp_path, capsys, tiny_model_dir, demo_dataset_dir,
                                                                                         bench_dir):
    config = make_inputs(tmp_path / "in", tiny_model_dir, demo_dataset_dir, bench_dir)
    data = yaml.safe_load(config.read_text())
    local = str(tmp_path / "in")
    remote = {k: (json.loads(json.dumps(v).replace(local, "/lustre/in")) if isinstance(v, (dict, str)) else v) for k, v in data.items()}
    remote["paths"] = {"map": [f"{local}=/lustre/in"]}  # as `deft init --path-map` writes it
    mapped = tmp_path / "in" / "mapped.yaml"
    mapped.write_text(yaml.safe_dump(remote))
    record = submit_json(capsys, "--platform", "slurm", "--action", "deft", "--config", str(mapped), "--gpus-per-node", "0", "--dry-run")["record"]
    job_dir = Path(record["outputs"]["job_dir"])
    assert job_dir.parent == tmp_path / "in" / "out" / "jobs" and record["outputs"]["deft_dir"] == "/lustre/in/out"
    copied = yaml.safe_load((job_dir / "deft.yaml").read_text())
    assert copied["output_dir"] == "/lustre/in/out" and copied["pool"] == remote["pool"] and "paths" not in copied
    assert record["path_map"] == [f"{local}=/lustre/in"]
    text = Path(record["script"]).read_text()
    assert f"--spec /lustre/in/train.yaml" in text and local + "/" not in text.replace(str(job_dir), "")

    def refused(*flags: str) -> dict:
        code, out, _ = run_cli("submit", "--platform", "slurm", *flags, "--dry-run", "--json", capsys=capsys)
        assert code == 2, out
        return json.loads(out)["error"]

    assert refused("--action", "deft")["where"] == "--config"
    assert refused("--action", "deft", "--config", str(config), "--spec", str(config))["where"] == "--spec"
    assert refused("--spec", str(config), "--config", str(config))["where"] == "--config"
    assert refused("--action", "deft", "--config", str(config), "--backend", "cosmos-rl")["where"] == "--backend"
    assert refused("--action", "deft", "--config", str(config), "--gpus-per-node", "0", "--resume-from", str(tmp_path))["where"] == "--resume-from"
    train = yaml.safe_load(Path(data["train_spec"]).read_text())
    train["policy"]["parallelism"]["dp_replicate_size"] = 2
    (tmp_path / "in" / "two.yaml").write_text(yaml.safe_dump(train))
    two = tmp_path / "in" / "two-nodes.yaml"
    two.write_text(yaml.safe_dump({**data, "train_spec": str(tmp_path / "in" / "two.yaml"), "retrain": {"backend": "cosmos-rl"}}))
    error = refused("--action", "deft", "--config", str(two), "--gpus-per-node", "1")
    assert error["where"] == "policy.parallelism.dp_replicate_size" and "one node" in error["message"]
    leaky = tmp_path / "in" / "leaky.yaml"
    leaky.write_text(yaml.safe_dump({**data, "benchmark": data["pool"]}))
    assert refused("--action", "deft", "--config", str(leaky), "--gpus-per-node", "0")["where"] == "benchmark.annotation_path"
    assert not list((tmp_path / "in" / "out" / "jobs").glob("*/job.sbatch"))[1:]  # only the one rendered job


def test_jobs_status_of_a_deft_job_shows_the_loop(tmp_path, capsys, tiny_model_dir, demo_dataset_dir, bench_dir):
    config = make_inputs(tmp_path / "in", tiny_model_dir, demo_dataset_dir, bench_dir)
    record = submit_json(capsys, "--platform", "slurm", "--action", "deft", "--config", str(config), "--gpus-per-node", "0", "--dry-run")["record"]
    record_path = Path(record["outputs"]["job_dir"]).with_suffix(".json")
    code, out, _ = run_cli("jobs", "status", str(record_path), "--json", capsys=capsys)
    assert code == 0 and json.loads(out)["deft"]["ok"] is False  # not started
    out_dir = Path(record["outputs"]["deft_dir"])
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "state.json").write_text(json.dumps({
        "status": "running", "rounds": [{"round": 0}, {"round": 1}], "best": {"round": 1, "model": "m1", "benchmark": 0.5},
        "stages": {"round_0/evaluate": {"status": "done", "attempts": 1}, "round_2/train": {"status": "running", "attempts": 2}}}))
    code, out, _ = run_cli("jobs", "status", str(record_path), "--json", capsys=capsys)
    loop = json.loads(out)["deft"]
    assert loop["ok"] and loop["stages_done"] == 1 and loop["running"] == ["round_2/train"] and loop["attempts"] == {"round_2/train": 2}
    assert loop["rounds"] == 1 and loop["best"] == {"round": 1, "model": "m1", "benchmark": 0.5}
    code, out, _ = run_cli("jobs", "status", str(record_path), capsys=capsys)
    assert "loop:    running, 1 stage(s) done, round 1 decided, running round_2/train" in out



def test_an_allocation_that_changes_the_global_batch_says_so_in_the_dry_run_and_the_jobs_notes(tmp_path, capsys, tiny_model_dir, demo_dataset_dir,
                                                                                                bench_dir):
    # the base train spec: 2 ranks x batch 2 = global 4 over the 6 base records (1 step an epoch); on 1 GPU: global 2
    config = make_inputs(tmp_path / "in", tiny_model_dir, demo_dataset_dir, bench_dir, train={"policy.parallelism.dp_shard_size": 2})
    said = ("the allocation (1 node(s) x 1 GPU(s) per node) changes every round's train spec " + str(tmp_path / "in" / "train.yaml") +
            " (dp_shard_size 2 -> 1): global batch 4 -> 2 (train_batch_per_replica 2 -> 2 per rank x data-parallel ranks 2 -> 1, "
            "dp_shard_size x dp_replicate_size); optimizer steps per epoch 1 -> 3 at 6 train records; set train.train_batch_per_replica=4 to keep 4")
    code, out, err = run_cli("deft", "--config", str(config), "--dry-run", "--runs-on", "node", "--gpus-per-node", "1", capsys=capsys)
    assert code == 0 and f"warning: {said}" in out, err + out
    code, out, err = run_cli("deft", "--config", str(config), "--dry-run", "--runs-on", "node", "--gpus-per-node", "2", "--json", capsys=capsys)
    assert code == 0 and json.loads(out)["preflight"]["batch_change"] is None  # the spec's own shape: nothing changes
    record = submit_json(capsys, "--platform", "local", "--action", "deft", "--config", str(config), "--gpus-per-node", "1", "--dry-run")["record"]
    change = record["preflight"]["deft"]["batch_change"]  # runs.fitting.BatchChange, the shape `spec --from` reports
    assert change["global_batch"] == {"from": 4, "to": 2} and change["data_parallel_ranks"] == {"from": 2, "to": 1}
    assert change["steps_per_epoch"] == {"from": 1, "to": 3} and change["records"] == 6
    assert change["keep"].startswith("set train.train_batch_per_replica=4 to keep 4") and change["line"].startswith(said)
    assert f"DEFT preflight: {change['line']}" in record["notes"]
    _, args = deft_args(" ".join(record["argv"]))
    assert args.gpus_per_node == 1  # every attempt puts the rounds on the job's 1 GPU: the change the note names
