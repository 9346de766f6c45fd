"""Plan here, run there: --path-map LOCAL=REMOTE on spec, preflight, train --dry-run, rl and submit;
job folders that find their files from wherever they are copied; dry runs that write only their job folder.

The "cluster" is a folder name (/cluster/proj) that does not exist here; the laptop is a temp folder
holding the demo data and a model folder. Scripts run under bash with stand-in srun / scontrol /
python / cosmos-rl executables (no Slurm, GPU or cosmos-rl here); everything else is real.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

from skillbank import cli
from skillbank.errors import InputError
from skillbank.runs import layout
from skillbank.specification.pathmap import PathMap

ROOT = Path(__file__).resolve().parents[1]
REMOTE = "/cluster/proj"


@pytest.fixture
def laptop(tmp_path, monkeypatch, demo_dataset_dir):
    """LOCAL: a project folder with the demo data and a model; HOME and the skillbank cache in temp
    folders of their own, so a test can list everything a command writes."""
    root = tmp_path / "laptop"
    shutil.copytree(demo_dataset_dir, root / "data")
    model = root / "models" / "cr2"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps({"model_type": "qwen3_vl"}))
    (model / "model.safetensors").write_bytes(b"\0" * 64)
    for name in ("home", "cache", "bin"):
        (tmp_path / name).mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("SKILLBANK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SKILLBANK_ROOT", str(ROOT))
    monkeypatch.setenv("HF_HOME", str(root / "laptop-hf"))  # must never reach a node's script
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")  # no nvidia-smi, no redis-server: a laptop
    for name in ("HF_TOKEN", "SKILLBANK_JOB_DIR", "SKILLBANK_WORKDIR", "SLURM_JOB_ID", "SLURM_SUBMIT_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(root)
    return root


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def files_under(*folders: Path) -> set[Path]:
    return {p for f in folders for p in f.rglob("*") if p.is_file()}


def node_spec(capsys, laptop: Path, *extra: str) -> Path:
    code, _, err = run_cli(
        capsys, "spec", "--action", "train", "--dataset-root", str(laptop / "data"), "--set", f"policy.model_name_or_path={laptop / 'models' / 'cr2'}",
        "--set", "train.train_batch_per_replica=2", "--set", "mini_batch=1", "--set", "output_dir=out", "--path-map", f"{laptop}={REMOTE}",
        *extra, "-o", "node.yaml")
    assert code == 0, err
    return laptop / "node.yaml"


# --- the map itself ------------------------------------------------------------------------------


def test_parse_validate_and_longest_prefix(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for items, said in ((["noequals"], "is not LOCAL=REMOTE"), (["rel/x=/r"], "not an absolute path"), (["/a=rel"], "not an absolute path"),
                        (["/a=/x", "/a=/y"], "maps /a twice")):
        with pytest.raises(InputError, match=said) as exc:
            PathMap.parse(items)
        assert exc.value.where == "--path-map"
    pm = PathMap.parse([f"{tmp_path}=/r", f"{tmp_path}/a=/ra"], cwd=tmp_path)
    assert pm.to_remote(tmp_path / "a" / "b") == "/ra/b"  # the longest LOCAL wins
    assert pm.to_remote(f"{tmp_path}/ab") == "/r/ab" and pm.to_remote("a/c") == "/ra/c"  # whole components; relative from cwd
    assert pm.to_local("/ra/x") == f"{tmp_path}/a/x" and pm.to_local("/elsewhere/x") == "/elsewhere/x"
    from skillbank.specification.train import TrainSpec

    data = {"policy": {"model_name_or_path": "nvidia/Cosmos-Reason2-8B"}, "custom": {"train_dataset": {"annotation_path": "a/t.json"}}}
    remote, notes = pm.remote(data, TrainSpec)
    assert remote["policy"]["model_name_or_path"] == "nvidia/Cosmos-Reason2-8B"  # a hub id is never a path
    assert remote["custom"]["train_dataset"]["annotation_path"] == "/ra/t.json" and not notes
    # Through the CLI: bad input exits 2 naming the flag; a LOCAL that neither exists nor holds a spec path too.
    for item in ("rel=/x", f"{tmp_path}/nowhere=/x"):
        code, _, err = run_cli(capsys, "spec", "--action", "train", "--path-map", item)
        assert code == 2 and "--path-map" in err and "Traceback" not in err, err


# --- spec, preflight, train --dry-run, submit: REMOTE in every written file ---------------------------


def test_every_written_file_names_remote_and_dry_runs_write_only_their_job_folder(laptop, capsys):
    spec = node_spec(capsys, laptop)
    text = spec.read_text()
    written = yaml.safe_load(text)
    assert written["paths"]["map"] == [f"{laptop}={REMOTE}"]  # the spec records its map, the only LOCAL path it names
    assert str(laptop) not in text.replace(f"{laptop}={REMOTE}", "") and f"{REMOTE}/data/train/annotations.json" in text and f"{REMOTE}/models/cr2" in text
    assert written["results_dir"] == f"{REMOTE}/results"
    pmap = ("--path-map", f"{laptop}={REMOTE}")
    # preflight: the node's spec is checked at LOCAL with the map, given as a flag or recorded in the spec
    for flags in (pmap, ()):
        code, out, _ = run_cli(capsys, "preflight", "--skill", "tao-finetune-cosmos-reason", "--action", "train", "--spec", str(spec), "--runs-on", "node", *flags, "--json")
        report = json.loads(out)
        assert code == 0 and report["stats"]["records"]["train"] == 24 and report["stats"]["path_map"] == [f"{laptop}={REMOTE}"]
    # without the recorded map (a spec copied to the node reads as written) nothing is there here
    bare = laptop / "bare.yaml"
    bare.write_text(yaml.safe_dump({**written, "paths": {"map": []}}))
    code, _, _ = run_cli(capsys, "preflight", "--skill", "tao-finetune-cosmos-reason", "--action", "train", "--spec", str(bare), "--runs-on", "node")
    assert code == 2
    home, cache = Path(os.environ["HOME"]), Path(os.environ["SKILLBANK_CACHE"])
    # train --dry-run (cosmos-rl): one file, the TOML in the job folder it prints; REMOTE paths in it.
    before = files_under(laptop, home, cache)
    code, out, err = run_cli(capsys, "train", "--spec", str(spec), "--automl-policy", "off", "--dry-run", *pmap)
    assert code == 0, err + out
    [toml_path] = files_under(laptop, home, cache) - before
    assert f"job folder: {toml_path.parent}" in out and toml_path.parent.parent == laptop / "results" / "jobs"
    toml = toml_path.read_text()
    assert str(laptop) not in toml and tomllib.loads(toml)["train"]["output_dir"].startswith(f"{REMOTE}/out/")
    assert tomllib.loads(toml)["custom"]["model_family"] == "qwen3_vl"  # read from the model's config.json at LOCAL
    code, _, err = run_cli(capsys, "train", "--spec", str(spec), "--automl-policy", "off", *pmap)
    assert code == 2 and "--dry-run" in err  # a real run trains here: no map
    code, _, err = run_cli(capsys, "submit", "--platform", "local", "--spec", str(spec), *pmap)
    assert code == 2 and "--dry-run" in err
    # submit --dry-run on every platform: the job folder and its record, nothing else (no index under the cache).
    for platform in ("slurm", "docker", "local"):
        before = files_under(laptop, home, cache)
        code, out, err = run_cli(capsys, "submit", "--platform", platform, "--spec", str(spec), "--dry-run", *pmap, "--json")
        assert code == 0, err + out
        record = json.loads(out)["record"]
        job_dir = Path(record["outputs"]["job_dir"])
        new = files_under(laptop, home, cache) - before
        assert new == files_under(job_dir) | {job_dir.with_suffix(".json")}, new
        for path in files_under(job_dir):
            assert str(laptop) not in path.read_text(), (platform, path.name)
            if path.suffix in (".toml", ".yaml"):
                assert REMOTE in path.read_text()
        assert record["path_map"] == [f"{laptop}={REMOTE}"] and record["outputs"]["train_output_dir"] == f"{REMOTE}/out"
        assert record["preflight"]["check_on_node"], platform  # local too: the environment is checked where command.sh runs
        subprocess.run(["bash", "-n", record["script"]], check=True)


def test_the_recorded_map_serves_later_commands_without_the_flag(laptop, capsys):
    """spec --path-map records paths.map; train --dry-run, submit --dry-run, plan and preflight read the data at LOCAL
    without the flag; what they render for the node names REMOTE only (no map); a real run here reads LOCAL."""
    spec = node_spec(capsys, laptop)
    code, out, err = run_cli(capsys, "submit", "--platform", "slurm", "--spec", str(spec), "--dry-run", "--json")
    assert code == 0, err + out
    record = json.loads(out)["record"]
    assert record["path_map"] == [f"{laptop}={REMOTE}"] and record["outputs"]["train_output_dir"] == f"{REMOTE}/out"
    copy = yaml.safe_load((Path(record["outputs"]["job_dir"]) / "spec.yaml").read_text())
    assert copy["paths"]["map"] == [] and copy["custom"]["train_dataset"]["annotation_path"] == f"{REMOTE}/data/train/annotations.json"
    for path in files_under(Path(record["outputs"]["job_dir"])):
        assert str(laptop) not in path.read_text(), path.name
    code, out, err = run_cli(capsys, "train", "--spec", str(spec), "--automl-policy", "off", "--dry-run")
    assert code == 0, err + out
    job = next(Path(line.split(": ", 1)[1].split(" (")[0]) for line in out.splitlines() if line.startswith("job folder: "))
    rendered = files_under(job)
    assert rendered and REMOTE in "".join(p.read_text() for p in rendered) and str(laptop) not in "".join(p.read_text() for p in rendered)
    # the spec as this machine reads it (load_spec): the node's paths at LOCAL
    from skillbank.specification.io import load_spec
    from skillbank.specification.train import TrainSpec

    here = load_spec(spec, TrainSpec)
    assert here.custom.train_dataset.annotation_path == f"{laptop}/data/train/annotations.json" and here.results_dir == f"{laptop}/results"
    # on a machine where no LOCAL exists (the node), the recorded map is not applied: the spec reads as written
    elsewhere = laptop / "elsewhere.yaml"
    elsewhere.write_text(spec.read_text().replace(str(laptop), "/nowhere/laptop"))
    assert load_spec(elsewhere, TrainSpec).custom.train_dataset.annotation_path == f"{REMOTE}/data/train/annotations.json"


# --- a job folder copied anywhere ----------------------------------------------------------------


def stand_ins(folder: Path, log: Path, *, command: str = "") -> Path:
    """srun (runs its command), scontrol (the submitted script's path, node names), python (logs its
    argv and HF_HOME, answers the dataset-script lookup), cosmos-rl (logs)."""
    folder.mkdir(parents=True)
    tools = {
        "srun": 'while [ "${1#--}" != "$1" ]; do shift; done\nexec "$@"',
        "scontrol": f'if [ "$1" = show ] && [ "$2" = job ]; then echo "   Command={command}"; else printf "node0\\n"; fi',
        "python": f'echo "python $* HF_HOME=$HF_HOME" >> {log}\ncase "$*" in *find_spec*) echo /opt/skillbank/script.py;; esac',
        "cosmos-rl": f'echo "cosmos-rl $*" >> {log}',
    }
    for name, body in tools.items():
        (folder / name).write_text("#!/usr/bin/env bash\n" + body + "\n")
        (folder / name).chmod(0o755)
    return folder


def run_script(script: Path, bin_dir: Path, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    base = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": "/nodehome", "SLURM_NNODES": "1", "SLURM_NODEID": "0", "SLURM_JOB_NODELIST": "node0"}
    return subprocess.run(["bash", str(script)], cwd=cwd, capture_output=True, text=True, env=base | env, timeout=60)


def test_a_copied_job_folder_finds_its_files_and_the_nodes_hf_home(laptop, capsys, tmp_path):
    spec = node_spec(capsys, laptop)
    pmap = ("--path-map", f"{laptop}={REMOTE}")
    slurm_job = json.loads(run_cli(capsys, "submit", "--platform", "slurm", "--spec", str(spec), "--dry-run", *pmap, "--json")[1])["record"]
    local_job = json.loads(run_cli(capsys, "submit", "--platform", "local", "--spec", str(spec), "--dry-run", *pmap, "--json")[1])["record"]
    text = Path(slurm_job["script"]).read_text()
    assert str(laptop / "laptop-hf") not in text and 'export HF_HOME="${HF_HOME:-$HOME/.cache/huggingface}"' in text
    assert "#SBATCH --output=slurm-%j.out" in text and slurm_job["argv"][2] == f"--chdir={slurm_job['outputs']['job_dir']}"
    # The folder moves to the cluster (another path); sbatch runs a spooled copy of the script, from $HOME.
    moved = tmp_path / "cluster" / "jobs" / "job-1"
    shutil.copytree(slurm_job["outputs"]["job_dir"], moved)
    shutil.rmtree(slurm_job["outputs"]["job_dir"])
    spool = tmp_path / "spool" / "job9"
    spool.mkdir(parents=True)
    shutil.copy(moved / "job.sbatch", spool / "slurm_script")
    log = tmp_path / "calls.log"
    bins = stand_ins(tmp_path / "node-bin", log, command=str(moved / "job.sbatch"))
    done = run_script(spool / "slurm_script", bins, tmp_path / "home", SLURM_JOB_ID="9", SKILLBANK_VENV="", SKILLBANK_WORKDIR=str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    calls = log.read_text()
    assert f'--spec {moved}/spec.yaml --only env' in calls and "HF_HOME=/nodehome/.cache/huggingface" in calls
    [launch] = [ln for ln in calls.splitlines() if "skillbank.cli train " in ln]  # node 0: skillbank train, cosmos-rl under its log watcher
    run = slurm_job["outputs"]["run_dir"]  # the run folder fixed at submit, as the node names it
    assert run == str(layout.job_run_dir(f"{REMOTE}/out", slurm_job["id"]))
    assert f"train --spec {moved}/spec.yaml --backend cosmos-rl" in launch and f"--run-dir {run} --log-dir {run}/cosmos-rl-logs/node_0" in launch
    # Without scontrol's answer the script's own folder is the job folder (bash job.sbatch by hand).
    log.unlink()
    done = run_script(moved / "job.sbatch", stand_ins(tmp_path / "bin2", log), tmp_path, SKILLBANK_VENV="", SKILLBANK_WORKDIR=str(tmp_path))
    assert done.returncode == 0 and f"train --spec {moved}/spec.yaml" in log.read_text()
    # The local platform's command.sh, copied too.
    other = tmp_path / "elsewhere" / "job-2"
    shutil.copytree(local_job["outputs"]["job_dir"], other)
    log.unlink()
    done = run_script(other / "command.sh", stand_ins(tmp_path / "bin3", log), tmp_path, SKILLBANK_WORKDIR=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert f"train --spec {other}/spec.yaml" in log.read_text()
    # A folder that holds no spec copy says how to point at the job folder.
    stray = tmp_path / "stray.sh"
    shutil.copy(moved / "job.sbatch", stray)
    done = run_script(stray, stand_ins(tmp_path / "bin4", log), tmp_path / "spool")
    assert done.returncode == 2 and "SKILLBANK_JOB_DIR" in done.stderr


# --- rl: a checkpoint only the node has; submit --action rl -------------------------------------------


def rl_spec(capsys, laptop: Path, start: str) -> Path:
    code, _, err = run_cli(capsys, "spec", "--action", "rl", "--set", f"start={start}", "--set", f"annotation_path={laptop / 'data' / 'train' / 'annotations.json'}",
                           "--set", "output_dir=rl-out", "--path-map", f"{laptop}={REMOTE}", "-o", "rl.yaml")
    assert code == 0, err
    return laptop / "rl.yaml"


def test_rl_toml_for_a_node_only_checkpoint_and_submit_action_rl(laptop, capsys):
    start = "/cluster/ckpt/sft/20260101/safetensors/step_10"  # exists only on the node
    spec = rl_spec(capsys, laptop, start)
    pmap = ("--path-map", f"{laptop}={REMOTE}")
    code, _, err = run_cli(capsys, "rl", "--spec", str(spec), *pmap)
    assert code == 2 and "--model-family" in err  # the name tells no family, and nothing can be read here
    code, out, err = run_cli(capsys, "rl", "--spec", str(spec), *pmap, "--model-family", "qwen3_vl", "--json")
    assert code == 0, err
    doc = json.loads(out)
    toml = Path(doc["toml"]).read_text()
    data = tomllib.loads(toml)
    assert data["policy"]["model_name_or_path"] == start and data["custom"]["model_family"] == "qwen3_vl" and str(laptop) not in toml
    assert data["train"]["output_dir"].startswith(f"{REMOTE}/rl-out/") and doc["command"][2].startswith(f"{REMOTE}/rl-out/")
    assert any(line.startswith("env.model") for line in doc["check_on_node"])  # checked on the node, not here
    # Under the map, a checkpoint LOCAL holds gives its family from its config.json.
    export = laptop / "sft" / "safetensors" / "step_10"
    export.mkdir(parents=True)
    (export / "config.json").write_text(json.dumps({"model_type": "qwen2_5_vl"}))
    (export / "model.safetensors").write_bytes(b"\0" * 64)
    spec = rl_spec(capsys, laptop, str(export))
    doc = json.loads(run_cli(capsys, "rl", "--spec", str(spec), *pmap, "--json")[1])
    assert doc["family"] == "qwen2_5_vl" and doc["model"] == f"{REMOTE}/sft/safetensors/step_10"
    # submit --action rl: the GRPO TOMLs in the job folder, the env checks of the rl action first, the GRPO script.
    code, out, err = run_cli(capsys, "submit", "--platform", "slurm", "--action", "rl", "--spec", str(spec), "--dry-run", *pmap, "--json")
    assert code == 0, err + out
    record = json.loads(out)["record"]
    job_dir = Path(record["outputs"]["job_dir"])
    assert record["action"] == "rl" and record["gpus_per_node"] == 8 and record["id"].startswith("rl-")
    fresh = tomllib.loads((job_dir / "cosmos-rl.toml").read_text())
    resume = tomllib.loads((job_dir / "cosmos-rl-resume.toml").read_text())
    assert fresh["train"]["train_policy"]["type"] == "grpo" and resume["train"]["resume"] is True
    assert fresh["policy"]["model_name_or_path"] == f"{REMOTE}/sft/safetensors/step_10"
    text = (job_dir / "job.sbatch").read_text()
    assert "--action rl --spec \"$JOB_DIR/spec.yaml\" --only env" in text and "skillbank.training.cosmos_rl.grpo_script" in text
    assert all(str(laptop) not in p.read_text() for p in job_dir.iterdir())
    subprocess.run(["bash", "-n", str(job_dir / "job.sbatch")], check=True)


# --- the node's environment: vLLM for the GRPO rollouts ----------------------------------------------


def test_rl_env_checks_that_vllm_imports(laptop, capsys, tmp_path, monkeypatch):
    from skillbank.preflight.run import run_preflight

    spec = rl_spec(capsys, laptop, str(laptop / "models" / "cr2"))
    stub = tmp_path / "site"
    findings = lambda report: [f for f in report.findings if f.check == "env.vllm"]  # noqa: E731
    import importlib.util

    real = importlib.util.find_spec
    with monkeypatch.context() as m:  # an environment without vllm (the CPU setup's, or a GPU node set up before it was pinned)
        m.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a))
        report = run_preflight(skill="tao-finetune-cosmos-reason", action="rl", spec_path=spec, only=["env"], runs_on="here")
        [finding] = findings(report)
        assert finding.severity == "error" and "setup.sh --gpu" in finding.fix and "rollout" in finding.message
        report = run_preflight(skill="tao-finetune-cosmos-reason", action="rl", spec_path=spec, only=["env"], runs_on="node")
        assert any(line.startswith("env.vllm") for line in report.summary()["check_on_node"])
    (stub / "vllm").mkdir(parents=True)
    (stub / "vllm" / "__init__.py").write_text("")  # a stand-in package: the check only asks whether it imports
    monkeypatch.syspath_prepend(str(stub))
    report = run_preflight(skill="tao-finetune-cosmos-reason", action="rl", spec_path=spec, only=["env"], runs_on="here")
    assert not findings(report)
    local = run_preflight(skill="tao-finetune-cosmos-reason", action="rl", spec_path=spec, only=["env"], runs_on="here", backend="local")
    assert not findings(local)  # the local backend samples its own rollouts with transformers


# --- docs = behaviour ------------------------------------------------------------------------------


def test_docs_name_the_image_file_and_the_backend_default_as_the_code_does(capsys):
    import re

    [sqsh] = re.findall(r"enroot import -o (\S+\.sqsh)", (ROOT / "Dockerfile").read_text())
    named = {m for p in (ROOT / "skills").rglob("*.md") for m in re.findall(r"[\w.-]+\.sqsh", p.read_text())}
    assert named == {sqsh}, named
    with pytest.raises(SystemExit):
        cli.main(["submit", "--help"])
    import re as _re

    assert "default: cosmos-rl on every platform" in _re.sub(r"\s+", " ", capsys.readouterr().out)
    skill = (ROOT / "skills" / "platform" / "tao-run-platform" / "SKILL.md").read_text()
    [row] = [ln for ln in skill.splitlines() if ln.startswith("| `--backend")]
    assert "`cosmos-rl` on every platform" in row
