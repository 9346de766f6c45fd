"""The flags more than one command takes, declared once (argparse only; nothing here imports a spec model).

`command_parser`: a command's parser, its one-line help from skillbank.cli's table. The common flags
(--skill, --spec, --json, --set, --backend, --gpus-per-node / --nodes, --dry-run, ...) take the help text
the command gives them; their names, types and defaults live here. The AutoML search, storage and metric flags: `skillbank automl`, train's AutoML handoff
(commands.automl_run.run_from_train) and `skillbank submit --action automl` all parse with them.
--path-map: every command that plans for another machine (skillbank.specification.pathmap parses and
applies the maps). Type parsers raise argparse.ArgumentTypeError (argparse's usage line, exit 2)."""

from __future__ import annotations

import argparse
from typing import Any

DEFAULT_SKILL = "tao-finetune-cosmos-reason"


def command_parser(sub: Any, name: str, description: str | None = None, *, epilog: str | None = None, raw: bool = True,
                   formatter_class: Any = None) -> argparse.ArgumentParser:
    """One command's parser: its help line from skillbank.cli's table, its description shown as written
    (`raw`; False: argparse rewraps it), or `formatter_class`."""
    from skillbank.cli import summary

    formatter = formatter_class or (argparse.RawDescriptionHelpFormatter if raw else argparse.HelpFormatter)
    return sub.add_parser(name, help=summary(name), description=description, epilog=epilog, formatter_class=formatter)


def add_json(p: Any, help: str) -> None:
    p.add_argument("--json", action="store_true", help=help)


def add_dry_run(p: Any, help: str) -> None:
    p.add_argument("--dry-run", action="store_true", help=help)


def add_skill(p: Any, help: str, *, required: bool = False, default: str | None = None) -> None:
    p.add_argument("--skill", required=required, default=default, help=help)


def action_names(skill: str = DEFAULT_SKILL) -> str:
    """The model skill's actions for a --action help ("train, evaluate, ... or rl"), from its skill_info.yaml (generated from
    the spec registry; read here so that building a parser imports no spec model)."""
    from skillbank.skillinfo import skill_info

    names = list(skill_info(skill).get("actions", {}))
    return ", ".join(names[:-1]) + f" or {names[-1]}"


def add_spec(p: Any, help: str, *, required: bool = False, metavar: str | None = None) -> None:
    p.add_argument("--spec", required=required, metavar=metavar, help=help)


def add_assignments(p: Any, help: str) -> None:
    """--set KEY=VALUE (repeatable): dotted keys or the skill's shorthands, as `skillbank spec` applies them."""
    p.add_argument("--set", dest="assignments", action="append", default=[], metavar="KEY=VALUE", help=help)


def add_backend(p: Any, help: str, *, default: str | None = None) -> None:
    from skillbank.training.backends import BACKENDS

    p.add_argument("--backend", choices=BACKENDS, default=default, help=help)


def add_gpus_per_node(p: Any, help: str, *, metavar: str | None = None) -> None:
    p.add_argument("--gpus-per-node", type=int, metavar=metavar, help=help)


def add_nodes(p: Any, help: str, *, metavar: str | None = None) -> None:
    p.add_argument("--nodes", type=int, metavar=metavar, help=help)


def add_model_family(p: Any, help: str) -> None:
    from skillbank.training.cosmos_rl.family import FAMILIES

    p.add_argument("--model-family", choices=tuple(FAMILIES), default=None, help=help)


def add_start_check(p: Any, help: str) -> None:
    """--start-check bounded|full|off (rl's GRPO start check, training.local.grpo_start) and --no-start-check (= off)."""
    from skillbank.training.local.grpo_start import MODES, START_CHECK_PROMPTS, START_CHECK_SECONDS, START_CHECK_TOKENS

    p.add_argument("--start-check", choices=MODES, default="bounded",
                   help=f"{help}. bounded (default): the first {START_CHECK_PROMPTS} prompts of the run's order, at most {START_CHECK_TOKENS} tokens a "
                        f"sample (the run's rollout.max_response_length when shorter), {START_CHECK_SECONDS:g} s of sampling after the model load: what was "
                        "sampled by then decides, a group holding a sample cut before it ended is undecided; full: the same prompts to the "
                        "run's max_response_length, no time cap; off: skip it")
    p.add_argument("--no-start-check", action="store_true", help="skip the start check (= --start-check off)")


def start_check_mode(args: Any) -> str:
    """off, bounded or full, from --start-check and --no-start-check."""
    return "off" if args.no_start_check else args.start_check


def add_resume_from(p: Any, help: str) -> None:
    p.add_argument("--resume-from", metavar="CHECKPOINT", default=None, help=help)


def add_launcher_flags(p: Any) -> None:
    """--log-dir and --launcher-args: the cosmos-rl launcher's, as a job's node 0 runs it (train and rl)."""
    p.add_argument("--log-dir", metavar="DIR", default=None, help="cosmos-rl: the launcher's --log-dir (default <run folder>/logs); a folder named "
                   "node_<i> is one node of a multi-node job: the watcher reads every node_<j> beside it")
    p.add_argument("--launcher-args", metavar="ARGS", default=None,
                   help="cosmos-rl: more launcher flags, one shell-quoted string (a Slurm job's node 0: --num-workers N --worker-idx 0 "
                        "--node-ip-list 'a;b' --port P --rdzv-port R); the other nodes run the launcher alone")


def add_results_dir(p: Any) -> None:
    """The evaluation results a scorer reads: `skillbank score` and `skillbank gaps`."""
    p.add_argument("--results-dir", required=True, metavar="DIR", help="evaluation results_dir (or a results.json), local or URL")


def add_answer_format(p: Any) -> None:
    """How a scorer reads the answers (the task, the answer format): `skillbank score` and `skillbank gaps`."""
    from skillbank.scoring.answers import ANSWER_TYPES

    p.add_argument("--task", choices=("", "its_directionality", "mcq"), default=None,
                   help='task type (default: metrics.json\'s task_type, else "")')
    p.add_argument("--answer-format", dest="answer_type", choices=ANSWER_TYPES, default=None,
                   help="how responses hold the answer (default: metrics.json's answer_type, else short)")


def add_output(p: Any) -> None:
    """--out of a command that writes a model folder from a spec (export, quantize)."""
    p.add_argument("--out", metavar="DIR", help="output folder (spec: output_dir)")


def add_overwrite(p: Any) -> None:
    p.add_argument("--overwrite", action="store_true", help="replace a non-empty output folder")


def add_quiet(p: Any) -> None:
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _range(text: str) -> tuple[str, tuple[float, float]]:
    key, _, span = text.partition("=")
    low, sep, high = span.partition(":")
    try:
        return key, (float(low), float(high))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--range wants KEY=MIN:MAX, got {text!r}") from None


def _choices(text: str) -> tuple[str, list[str]]:
    key, sep, values = text.partition("=")
    if not sep or not values:
        raise argparse.ArgumentTypeError(f"--choices wants KEY=A,B,..., got {text!r}")
    return key, [v.strip() for v in values.split(",") if v.strip()]


def parse_count(text: str) -> int:
    """The --decode-sample / --probe-sample value: a count >= 0, or "all" (every video record)."""
    from skillbank.preflight.decode import ALL

    if text.strip().lower() == "all":
        return ALL
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--decode-sample wants a count or 'all', got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("--decode-sample must be 0 or more (or 'all')")
    return value


def add_search_arguments(p: argparse.ArgumentParser, *, trials_flags: tuple[str, ...] = ("--max-trials",)) -> None:
    """What a study searches and how: shared by `skillbank automl` and train's AutoML handoff."""
    from skillbank.automl import ALGORITHMS, DEFAULT_ALGORITHM, DEFAULT_TRIALS

    p.add_argument("--algorithm", choices=ALGORITHMS, default=DEFAULT_ALGORITHM, help="search algorithm (default: %(default)s)")
    p.add_argument(*trials_flags, dest="max_trials", type=int, default=DEFAULT_TRIALS, metavar="N",
                   help="finished (complete or pruned) trials of the study, baseline included (default: %(default)s)")
    add_space_arguments(p)
    p.add_argument("--study", metavar="NAME", help="study name (default: the spec file's stem)")


def add_space_arguments(p: Any) -> None:
    """What a study searches: `skillbank automl`, train's handoff, submit --action automl and plan --trials."""
    p.add_argument("--param", action="append", metavar="KEY", help="search these dotted keys instead of the schema's automl_default_parameters")
    p.add_argument("--range", action="append", type=_range, default=[], metavar="KEY=MIN:MAX", help="override a search range")
    p.add_argument("--choices", action="append", type=_choices, default=[], metavar="KEY=A,B", help="override enum choices")
    p.add_argument("--search", action="append", default=[], metavar="KEY",
                   help="search KEY too, even though the spec fixes it (a key in its user_set, set with `skillbank spec --set`: "
                        "left out of the search otherwise, as is a key --param, --range or --choices does not name)")


def add_keep_argument(p: Any) -> None:
    """--keep: `skillbank automl` (recorded in the study) and plan --trials (the disk figures follow it)."""
    from skillbank.runs.disk import DEFAULT_KEEP, KEEP_RULES

    p.add_argument("--keep", choices=KEEP_RULES, default=None,
                   help=f"checkpoints a study keeps: best (a new study's default: a finished trial that is not the best so far drops its "
                        f"checkpoints, its metrics, spec and logs stay; the best keeps its best epoch's checkpoint and export) or all; "
                        f"recorded in the study, so a resumed study keeps its rule (default: the study's, else {DEFAULT_KEEP})")


DEFAULT_METRIC = "accuracy"


def add_storage_argument(p: Any) -> None:
    """--storage: shared by `skillbank automl` and `skillbank submit --action automl` (a managed worker per machine)."""
    p.add_argument("--storage", metavar="URL", help="the study's SQLAlchemy URL (default: sqlite:///<study folder>/study.db, one machine); "
                   "postgresql://USER@HOST:PORT/DB lets workers on many machines share the study (a password goes in ~/.pgpass or "
                   "PGPASSWORD, not in the URL); a unix-socket URL (?host=/dir) reaches one machine only")


def add_metric_argument(p: argparse.ArgumentParser) -> None:
    """--metric: shared by `skillbank automl` and `skillbank submit --action automl`."""
    p.add_argument("--metric", default=DEFAULT_METRIC, help="accuracy (default), f1 or balanced_accuracy (of each epoch's export on the validation set), or val_loss")


def add_automl_arguments(p: argparse.ArgumentParser) -> None:
    """Every flag of `skillbank automl` (train's AutoML handoff parses its defaults with them too)."""
    from skillbank.training.backends import BACKEND_HELP, DEFAULT_BACKEND

    add_skill(p, "model skill (default: %(default)s)", default=DEFAULT_SKILL)
    p.add_argument("--action", choices=("train", "evaluate"), default="train",
                   help="train: each trial trains (default); evaluate: prompt search, each trial evaluates --spec (an evaluate spec)")
    add_spec(p, "base train spec (an evaluate spec with --action evaluate; from `skillbank spec`); "
             "required except for --status / --delete-study with --storage or --out", metavar="FILE")
    p.add_argument("--prompts", metavar="FILE", help="--action evaluate: system prompt candidates, one per line or a YAML list (null: the default); "
                   "records opening with their own system turn keep it (counted in the plan and best_rec.json; a proxy set "
                   "where every record does is refused)")
    p.add_argument("--holdout", metavar="ANNOTATIONS[:MEDIA]", help="--action evaluate: held-out set the best trial and the baseline are evaluated on once")
    add_search_arguments(p)
    add_metric_argument(p)
    p.add_argument("--direction", choices=("maximize", "minimize"), help="default: maximize accuracy, minimize val_loss")
    add_storage_argument(p)
    p.add_argument("--out", metavar="DIR", help="study folder (default: <results_dir>/automl/<study>)")
    p.add_argument("--workers", type=int, default=1, metavar="K", help="trials at once on this machine (default: %(default)s)")
    add_keep_argument(p)
    p.add_argument("--resume", action="store_true", help="continue an existing study: finished trials are kept, failed ones (and an unfinished baseline) "
                   "run again, a --stop-study is lifted (joining a running study needs no --resume)")
    p.add_argument("--allow-spec-change", action="store_true", help="join a study whose base spec differs from --spec (without it such a worker "
                   "exits 2 naming the differing keys: its trials would differ in more than the searched values)")
    p.add_argument("--seed", type=int, default=0, help="sampler seed (default: %(default)s)")
    p.add_argument("--no-baseline", action="store_true", help="skip the baseline trial of the base spec")
    add_backend(p, f"each trial's {BACKEND_HELP}", default=DEFAULT_BACKEND)
    add_dry_run(p, "print the study plan and the start / resume commands; create and start nothing")
    add_json(p, "print best_rec.json's content (the plan with --dry-run) as one JSON document")
    live = p.add_argument_group("a running or finished study (the same --spec / --study / --out / --storage name it; "
                                "--status and --delete-study need no spec: --study NAME with --storage URL or --out DIR)")
    live.add_argument("--status", action="store_true", help="list every trial of the study: number, state, value, best so far, parameters "
                      "(the user's units), retry_of, the worker (host:pid) that ran it, why it was pruned or failed; with --json one document "
                      "(keys: study, storage, direction, metric, algorithm, max_trials, stopped, counts, best, workers, trials)")
    live.add_argument("--stop-study", action="store_true", help="stop every worker of the study, on every machine (their running trials FAIL, "
                      "run again on --resume); waits up to --wait seconds for them and prints which trials stopped; "
                      "SIGTERM on one worker stops that worker only")
    live.add_argument("--wait", type=float, default=60.0, metavar="S", help="--stop-study: seconds to wait for the running trials to stop (default: %(default)s; 0: do not wait)")
    live.add_argument("--delete-study", action="store_true", help="delete the study and its trials from the storage (needs --yes; refused while "
                      "trials run: --stop-study first); the study folder's files stay")
    live.add_argument("--yes", action="store_true", help="confirm --delete-study")
    live.add_argument("--dashboard", action="store_true", help="serve optuna-dashboard on the study's storage at http://127.0.0.1:PORT (this machine only; Ctrl-C ends it)")
    live.add_argument("--port", type=int, default=8080, help="--dashboard's port (default: %(default)s)")


PATH_MAP_HELP = ("LOCAL=REMOTE (repeatable): data and models are checked at LOCAL on this machine, every file written for the job "
                 "names REMOTE (both absolute; the longest matching LOCAL wins)")


def add_path_map(parser: Any) -> None:
    """The one --path-map flag every command that plans for another machine takes."""
    parser.add_argument("--path-map", dest="path_map", action="append", default=[], metavar="LOCAL=REMOTE", help=PATH_MAP_HELP)


def spec_and_paths(spec_file: str, flags: list[str] | None, *, recorded_too: bool = True) -> tuple[Any, Any]:
    """(the spec file read once: a LoadedSpec, the command's path map): the --path-map flags (a malformed
    one is named before the spec is read) over the map the spec records when `recorded_too` (else the flags alone)."""
    from skillbank.specification.io import LoadedSpec
    from skillbank.specification.pathmap import PathMap

    given = PathMap.parse(flags)
    loaded = LoadedSpec.read(spec_file)
    return loaded, loaded.recorded_map().with_flags(flags or ()) if recorded_too else given


DESCRIBED_HELP = ("the real data, described (when the files here are a sample or absent): train records, clip length, frame size; "
                  "batches are fitted to --records and the time is planned from it")


def add_described(parser: Any, title: str = "the real dataset, described") -> None:
    """--records, --clip-seconds, --resolution, --clip-fps, --text-tokens, --val-records: `plan`, `spec` and `submit` take the
    same description of the data (what the node has when the files here are a sample)."""
    group = parser.add_argument_group(title, DESCRIBED_HELP)
    group.add_argument("--records", type=int, metavar="N", help="train records (one clip each)")
    group.add_argument("--clip-seconds", type=float, metavar="S", help="seconds per clip")
    group.add_argument("--resolution", metavar="WxH", help="frame size (1280x720 or 720p); default: the pixel budget's upper bound per frame")
    group.add_argument("--clip-fps", type=float, default=30.0, metavar="F", help="the clips' native frame rate (default 30; the sampled frames follow custom.vision.fps)")
    group.add_argument("--text-tokens", type=int, default=256, metavar="T", help="question + answer tokens per record (default 256)")
    group.add_argument("--val-records", type=int, metavar="M", help="validation records when the spec names its own val set (default: the spec's split of train)")


def check_described(args: Any) -> None:
    """--records and --clip-seconds go together, counts positive (InputError, exit 2)."""
    from skillbank.errors import InputError

    for name, value in (("--records", args.records), ("--val-records", args.val_records)):
        if value is not None and value < 1:
            raise InputError(f"{name} must be at least 1 (got {value})", where=name, fix=f"pass a positive {name}")
    if (args.records is None) != (args.clip_seconds is None):
        raise InputError("a described dataset needs both --records and --clip-seconds", where="--records" if args.records is None else "--clip-seconds",
                         fix="pass --records N --clip-seconds S [--resolution WxH]")


def described(args: Any) -> Any:
    """The described dataset (planning.tokens.Described), or None without --records."""
    from skillbank.planning.tokens import Described, parse_resolution

    if args.records is None:
        return None
    width, height = parse_resolution(args.resolution) if args.resolution else (None, None)
    return Described(args.records, args.clip_seconds, width, height, args.clip_fps, args.text_tokens, args.val_records)
