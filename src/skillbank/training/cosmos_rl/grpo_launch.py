"""Run a GRPO TOML with cosmos-rl under skillbank's log watcher (`skillbank rl --backend cosmos-rl --launch`): what an rl
job runs (a Slurm job's node 0, a local or Docker job), and a person on a GPU machine.

The TOML is the one `skillbank rl` wrote into its run folder, or the one submit rendered into the job folder
(cosmos-rl.toml; cosmos-rl-resume.toml, with train.resume, for a requeued attempt). Its train.output_dir is the run
folder. A copy goes into the run folder as cosmos_rl.toml (a run folder keeps its spec: the recipe of every export is
read from it) and the launcher runs on that copy with skillbank's GRPO dataset script. The rest is the SFT launch's
(launch.run_watched): the same LogWatcher, which reads GRPO's step lines from the controller's log, metrics.jsonl,
tensorboard/, the recipe stamped into every export, result.json and the job record (a submitted job's attempt in node.json).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Callable

from skillbank import atomic
from skillbank.errors import InputError
from skillbank.training.cosmos_rl.launch import GRPO_SCRIPT, TOOLS, RunLayout, launch_env, launcher, missing_tools, run_watched


def read_grpo_toml(toml: Path) -> tuple[str, dict[str, Any]]:
    """(text, config) of a GRPO TOML; anything else is bad input naming the file."""
    try:
        text = toml.read_text(encoding="utf-8")
        config = tomllib.loads(text)
    except FileNotFoundError:
        raise InputError(f"{toml} does not exist", where="--toml", fix="pass the cosmos_rl.toml `skillbank rl` wrote, or a job folder's cosmos-rl.toml") from None
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {toml} as TOML ({exc})", where="--toml", fix="pass the TOML `skillbank rl` or `skillbank submit --action rl` wrote") from None
    train = config.get("train") if isinstance(config.get("train"), dict) else {}
    if (train.get("train_policy") or {}).get("type") != "grpo":
        raise InputError(f"{toml} is not a GRPO config: train.train_policy.type is not \"grpo\"", where=f"{toml}: train.train_policy.type",
                         fix="pass the TOML `skillbank rl` or `skillbank submit --action rl` wrote (an SFT TOML runs with `skillbank train`)")
    if not train.get("output_dir"):
        raise InputError(f"{toml} names no run folder", where=f"{toml}: train.output_dir", fix="pass the TOML `skillbank rl` wrote (it names its run folder)")
    return text, config


def launch_grpo(toml: Path, *, log_dir: Path | None = None, launcher_args: list[str] | None = None, job: Any = None,
                log: Callable[[str], None] = print) -> int:
    """Launch cosmos-rl on `toml` here and watch it to the end. Returns 0; a failed run raises RunError (result.json says why)."""
    text, config = read_grpo_toml(Path(toml))
    train = config["train"]
    env = launch_env()
    missing = missing_tools(env)
    if missing:
        why, fix = TOOLS[missing[0]]
        raise InputError(f"{missing[0]} is not on PATH ({why})", where="PATH", fix=fix)
    layout = RunLayout.new(train["output_dir"], run_dir=train["output_dir"], log_dir=log_dir)
    run_toml = layout.toml_path
    if not run_toml.exists() or run_toml.resolve() != Path(toml).resolve():
        atomic.write_text(run_toml, text)  # the run folder keeps the config it ran (its exports' recipe is read from it)
    argv = [launcher(env), "--config", str(run_toml), "--log-dir", str(layout.log_dir), *(launcher_args or []), str(GRPO_SCRIPT)]
    ckpt = train.get("ckpt") or {}
    for line in ("cosmos-rl GRPO launch", f"  run folder : {layout.run_dir}", f"  TOML       : {run_toml} (from {toml})",
                 f"  logs       : {layout.log_dir}/logs_latest (launcher output: {layout.launcher_log})", f"  job runs   : {' '.join(argv)}",
                 f"  resume     : {train.get('resume', False)}"):
        log(line)
    fields = {"backend": "cosmos-rl", "argv": argv, **layout.paths()}
    # cosmos-rl's GRPO trainer exports safetensors with every checkpoint it saves at the final step, whatever
    # export_safetensors says (grpo_trainer.py should_export_checkpoint: is_final or export_safetensors)
    return run_watched(argv, layout, expect_export=bool(ckpt.get("enable_checkpoint")), job=job, fields=fields, log=log)
