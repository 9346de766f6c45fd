"""Probe: does TRL's GRPOTrainer fit skillbank's video GRPO on one machine (issue 16, item 4)?

A probe, not a product path: trl is NOT installed by scripts/setup.sh. Install it beside the venv:

    .venv/bin/pip install --no-deps --target /tmp/trl_site trl==1.16.0     # or the wheel file
    PYTHONPATH=/tmp/trl_site .venv/bin/python benchmarks/trl_grpo_probe.py [--steps 2] [--records 4] [--json]

Builds the tiny Qwen2.5-VL (the tests' fixture, cached under $SKILLBANK_CACHE) and the demo dataset's mp4s,
turns records into GRPO prompts exactly as the cosmos-rl dataset script does
(skillbank.training.cosmos_rl.grpo_script.GrpoPromptDataset: system + user [video part, text]), and runs
`trl.GRPOTrainer` on CPU (use_cpu, bf16 off, num_generations 4) with our reward
(grpo_script.exact_match_reward, answer_type "short"). A forward pre-hook on the model records, per call,
whether pixel_values_videos / video_grid_thw reach it, split into generation (no grad) and loss (grad).

GRPOTrainer takes only a datasets.Dataset, so every attempt goes through one. Attempts, each recorded with
the TRL step that fails and its error:
  A  TRL's documented input: the prompts as Arrow rows (string contents wrapped as text parts), video by
     path, fps in chat_template_kwargs (what TRL forwards to processor.apply_chat_template);
  B  our prompt exactly (kept as JSON, decoded on access with Dataset.with_transform), video by path;
  C  as B with the video part holding frames decoded and sampled by skillbank.data.video (our fps rule);
  D  as C with a small GRPOTrainer subclass that carries the video tensors into the loss forward.
Also: whether a `datasets.Dataset` keeps the prompt shape (Arrow unifies the content parts' keys), seconds
per step when a run finishes, and the checkpoint layout TRL writes vs the one our backends write.
Prints a short verdict (or, with --json, one JSON document).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

INSTALL = (
    "trl is not importable. It is a probe dependency, not part of setup; install it beside the venv:\n"
    "    .venv/bin/pip install --no-deps --target /tmp/trl_site trl==1.16.0\n"
    "    PYTHONPATH=/tmp/trl_site .venv/bin/python benchmarks/trl_grpo_probe.py\n"
    "(its dependencies accelerate, datasets, transformers, pandas, pyarrow are already in the venv)"
)
FPS = 2.0  # the spec default (custom.vision.fps)
SYSTEM_PROMPT = "You are a helpful assistant. Answer the question about the video with a short answer."  # rl, answer_type short


def dependency_check() -> list[str]:
    """trl's declared requirements that the venv does not satisfy (a pip-check in a few lines)."""
    from importlib.metadata import PackageNotFoundError, distribution, version

    from packaging.requirements import Requirement

    try:
        dist = distribution("trl")
    except PackageNotFoundError:
        return ["trl has no dist-info on sys.path"]
    problems = []
    for line in dist.requires or []:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue  # extras (deepspeed, peft, vllm, ...)
        try:
            have = version(req.name)
        except PackageNotFoundError:
            problems.append(f"{req.name} missing (needs {req.specifier or 'any'})")
            continue
        if req.specifier and not req.specifier.contains(have, prereleases=True):
            problems.append(f"{req.name} {have} does not satisfy {req.specifier}")
    return problems


def short_error(exc: BaseException) -> dict:
    """The error and the innermost frames in trl / transformers (where it broke)."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = [f"{Path(f.filename).parts[-2]}/{Path(f.filename).name}:{f.lineno} {f.name}" for f in frames
             if "/trl/" in f.filename or "/transformers/" in f.filename or "trl_grpo_probe" in f.filename]
    trl_steps = [f.name for f in frames if f.filename.endswith("grpo_trainer.py")]
    return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}",
            "trl_step": trl_steps[-1] if trl_steps else None, "frames": where[-6:]}


class ForwardSpy:
    """Forward pre-hook on the model: which visual inputs reach it, in generation (no grad) and in the loss."""

    KEYS = ("pixel_values_videos", "video_grid_thw", "second_per_grid_ts", "pixel_values", "image_grid_thw")

    def __init__(self) -> None:
        self.calls = {"generate": 0, "loss": 0}
        self.with_video = {"generate": 0, "loss": 0}
        self.first_keys: dict[str, list[str]] = {}
        self.video_tokens: dict[str, int] = {}

    def __call__(self, module, args, kwargs):
        import torch

        phase = "loss" if torch.is_grad_enabled() else "generate"
        self.calls[phase] += 1
        present = sorted(k for k, v in kwargs.items() if v is not None and k != "past_key_values")
        self.first_keys.setdefault(phase, present)
        if kwargs.get("pixel_values_videos") is not None:
            self.with_video[phase] += 1
        ids = kwargs.get("input_ids")
        video_id = getattr(module.config, "video_token_id", None)
        if ids is not None and video_id is not None and phase not in self.video_tokens and ids.shape[-1] > 1:
            self.video_tokens[phase] = int((ids == video_id).sum())
        return None

    def summary(self) -> dict:
        return {"forward_calls": self.calls, "calls_with_pixel_values_videos": self.with_video,
                "first_call_kwargs": self.first_keys, "video_pad_tokens_in_first_input_ids": self.video_tokens}


class StepTimer:
    def __init__(self) -> None:
        self.times: list[float] = []
        self.grad_norms: list[dict] = []
        self._t = 0.0

    def callback(self):
        from transformers import TrainerCallback

        timer = self

        class _CB(TrainerCallback):
            def on_step_begin(self, args, state, control, **kw):
                timer._t = time.perf_counter()

            def on_step_end(self, args, state, control, **kw):
                timer.times.append(time.perf_counter() - timer._t)

            def on_pre_optimizer_step(self, args, state, control, model=None, **kw):
                # which parts of the model the GRPO loss reaches: the vision tower only gets a gradient when
                # the loss forward sees the video
                norms = {}
                for part, prefix in (("visual", "model.visual."), ("language_model", "model.language_model.")):
                    sq = [float(p.grad.pow(2).sum()) for n, p in model.named_parameters() if n.startswith(prefix) and p.grad is not None]
                    norms[part] = round(sum(sq) ** 0.5, 6) if sq else None
                timer.grad_norms.append(norms)

        return _CB()


def frames_part(part: dict, media_fps_fallback: float = 2.0) -> dict:
    """The video part with decoded frames (our sampling, skillbank.data.video) instead of a path."""
    import numpy as np

    from skillbank.data import video

    def pick(total: int, rate: float):
        return video.sample_indices(total, rate or media_fps_fallback, fps=part.get("fps"), nframes=part.get("nframes"))

    frames, _meta = video.decode_video(part["video"], pick)
    return {"type": "video", "video": np.stack([np.asarray(f) for f in frames])}


def with_frames(prompt: list[dict]) -> list[dict]:
    return [{**m, "content": [frames_part(p) if p.get("type") == "video" else p for p in m["content"]]}
            if isinstance(m["content"], list) else m for m in prompt]


def make_dataset(name: str, rows: list[dict]):
    """GRPOTrainer takes only a datasets.Dataset / IterableDataset (a torch Dataset is refused at init).
    A: rows through Arrow as TRL documents it (string contents wrapped as text parts so Arrow accepts them);
    B: the prompt kept as JSON and decoded on access (with_transform): our prompt exactly, video path part;
    C: as B with the video part's path replaced by the decoded frames."""
    from datasets import Dataset

    if name == "A":
        wrapped = [{**r, "prompt": [{**m, "content": [{"type": "text", "text": m["content"]}]} if isinstance(m["content"], str) else m
                                    for m in r["prompt"]]} for r in rows]
        return Dataset.from_list(wrapped)
    table = Dataset.from_list([{"prompt_json": json.dumps(r["prompt"]), "reference": r["reference"]} for r in rows])

    def decode(batch):
        prompts = [json.loads(p) for p in batch["prompt_json"]]
        if name in ("C", "D"):
            prompts = [with_frames(p) for p in prompts]
        return {"prompt": prompts, "reference": batch["reference"]}

    return table.with_transform(decode)


def run_attempt(name: str, model_dir: Path, rows: list[dict], args: argparse.Namespace, work: Path) -> dict:
    import torch
    from transformers import AutoProcessor, Qwen2_5_VLForConditionalGeneration
    from trl import GRPOConfig, GRPOTrainer

    from skillbank.training.cosmos_rl.grpo_script import exact_match_reward

    result: dict = {"attempt": name, "stage": "init"}
    torch.manual_seed(0)
    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(model_dir, dtype=torch.float32)
    processor = AutoProcessor.from_pretrained(model_dir)
    spy = ForwardSpy()
    trainer_class, inject = (video_trainer_class(GRPOTrainer) if name == "D" else (GRPOTrainer, None))
    rewards_seen: list[float] = []
    completions_seen: list[str] = []

    def exact_match(prompts, completions, reference, **_):
        out = []
        for completion, ref in zip(completions, reference, strict=True):
            text = completion[0]["content"] if isinstance(completion, list) else completion
            completions_seen.append(text)
            out.append(exact_match_reward(text, ref, answer_type="short"))
        rewards_seen.extend(out)
        return out

    def varied(completions, **_):
        """--gradient-probe only: a reward that differs between the samples of a prompt (the tiny random
        model never answers right, so exact match alone gives zero advantages and a zero gradient)."""
        return [float(sum(map(ord, c[0]["content"] if isinstance(c, list) else c)) % 2) for c in completions]

    reward_funcs = [exact_match, varied] if args.gradient_probe else exact_match
    train_dataset = make_dataset(name, rows)
    config = GRPOConfig(
        output_dir=str(work / f"trl-{name}"),
        use_cpu=True,
        bf16=False,
        fp16=False,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=args.max_completion,
        max_steps=args.steps,
        learning_rate=1e-4,
        logging_steps=1,
        save_strategy="steps",
        save_steps=args.steps,
        report_to="none",
        dataloader_num_workers=0,
        seed=0,
        # A, B: fps for the processor's own frame sampling. C, D: frames already sampled at FPS; fps still
        # sets second_per_grid_ts (temporal_patch_size / fps, the processor assumes 2.0 without it), and
        # do_sample_frames False stops a second sampling (which would need VideoMetadata, absent from a chat part)
        chat_template_kwargs={"fps": FPS} if name in ("A", "B") else {"fps": FPS, "do_sample_frames": False},
        disable_tqdm=True,
    )
    timer = StepTimer()
    try:
        trainer = trainer_class(model=model, reward_funcs=reward_funcs, args=config, train_dataset=train_dataset,
                                processing_class=processor, callbacks=[timer.callback()])
        if inject is not None:
            model.register_forward_pre_hook(inject(trainer), with_kwargs=True)
        model.register_forward_pre_hook(spy, with_kwargs=True)
        result["stage"] = "train"
        t0 = time.perf_counter()
        trainer.train()
        result["train_seconds"] = round(time.perf_counter() - t0, 2)
        result["stage"] = "done"
        result["ok"] = True
    except Exception as exc:  # the point of the probe: record where it breaks
        result["ok"] = False
        result.update(short_error(exc))
    result["step_seconds"] = [round(t, 2) for t in timer.times]
    result["grad_norms"] = timer.grad_norms
    result["spy"] = spy.summary()
    result["rewards"] = rewards_seen[:16]
    result["completions_sample"] = completions_seen[:4]
    out = work / f"trl-{name}"
    result["files_written"] = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())[:40] if out.exists() else []
    return result


def video_trainer_class(GRPOTrainer):
    """Attempt D: the smallest patch we found that carries the video into the loss (TRL 1.16 private API).

    _tokenize_prompts keeps each prompt's pixel_values_videos / video_grid_thw / second_per_grid_ts;
    _generate_and_score_completions attaches them per sample (a list, so TRL's shuffle and split keep them
    aligned); _compute_loss hands them to the loss forward through a forward pre-hook, because
    _get_per_token_logps_and_entropies passes image fields only. Not covered: the old / reference log-prob
    forwards inside _generate_and_score_completions (num_iterations > 1, beta > 0), which also drop video."""
    import torch

    class VideoGRPOTrainer(GRPOTrainer):
        _loss_video = None

        def _tokenize_prompts(self, prompts):
            prompt_ids, images, fields = super()._tokenize_prompts(prompts)
            grid = fields.get("video_grid_thw")
            self._video_rows = None
            if grid is not None:
                rows = torch.split(torch.as_tensor(fields["pixel_values_videos"]), grid.prod(-1).tolist())
                sec = torch.as_tensor(fields["second_per_grid_ts"], dtype=torch.float32)
                self._video_rows = [{"pixel_values_videos": rows[i], "video_grid_thw": grid[i : i + 1], "second_per_grid_ts": sec[i : i + 1]}
                                    for i in range(len(prompt_ids))]
            return prompt_ids, images, fields

        def _generate_and_score_completions(self, inputs):
            out = super()._generate_and_score_completions(inputs)
            if self._video_rows is not None:
                out["video_inputs"] = self._video_rows
            return out

        def _compute_loss(self, model, inputs):
            rows = inputs.get("video_inputs")
            self._loss_video = None if rows is None else {
                "pixel_values_videos": torch.cat([r["pixel_values_videos"] for r in rows]),
                "video_grid_thw": torch.cat([r["video_grid_thw"] for r in rows]),
                "second_per_grid_ts": torch.cat([r["second_per_grid_ts"] for r in rows]),
            }
            try:
                return super()._compute_loss(model, inputs)
            finally:
                self._loss_video = None

    def inject(trainer):
        def hook(module, args, kwargs):
            if trainer._loss_video is not None and kwargs.get("pixel_values_videos") is None:
                return args, {**kwargs, **trainer._loss_video}
            return None

        return hook

    return VideoGRPOTrainer, inject


def arrow_roundtrip(prompt: list[dict], model_dir: Path) -> dict:
    """What a datasets.Dataset (TRL's documented input) does to our prompt. Our system turn has a string
    content and the user turn a list of parts; Arrow then also unifies the parts' keys (None-filled)."""
    from datasets import Dataset

    out: dict = {}
    try:
        Dataset.from_list([{"prompt": prompt}])
        out["as_built"] = "ok"
    except Exception as exc:
        out["as_built"] = short_error(exc)["error"]
    listed = [{**m, "content": [{"type": "text", "text": m["content"]}]} if isinstance(m["content"], str) else m for m in prompt]
    back = Dataset.from_list([{"prompt": listed}])[0]["prompt"]
    parts = [p for m in back for p in m["content"]]
    out["text_part_after_roundtrip"] = next((p for p in parts if p.get("type") == "text"), None)
    out["video_part_after_roundtrip"] = next((p for p in parts if p.get("type") == "video"), None)
    # Qwen's chat template renders a part as video when it has a "video" key at all, None or not
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(model_dir)
    pad = "<|video_pad|>"
    out["video_placeholders_rendered"] = {
        "before": processor.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True).count(pad),
        "after_roundtrip": processor.apply_chat_template(back, tokenize=False, add_generation_prompt=True).count(pad),
    }
    return out


def verdict(results: list[dict], deps: list[str], arrow: dict) -> list[str]:
    """What the attempts showed, then the call: fits as is / fits with a patch / does not fit."""
    lines = []
    by = {r["attempt"]: r for r in results}
    for r in results:
        spy, grads = r["spy"], r.get("grad_norms") or []
        if r["ok"]:
            vis = [g["visual"] for g in grads]
            lines.append(f"attempt {r['attempt']}: ran {len(r['step_seconds'])} steps, s/step {r['step_seconds']}; pixel_values_videos in "
                         f"{spy['calls_with_pixel_values_videos']['generate']}/{spy['forward_calls']['generate']} generation forwards, "
                         f"{spy['calls_with_pixel_values_videos']['loss']}/{spy['forward_calls']['loss']} loss forwards"
                         + (f"; vision-tower grad norm {vis}" if grads else ""))
        else:
            lines.append(f"attempt {r['attempt']}: failed in GRPOTrainer.{r['trl_step']} ({r['stage']}): {r['error']} "
                         f"(at {' <- '.join(reversed(r['frames'][-3:]))})")
    if deps:
        lines.append(f"unmet requirements: {deps}")
    if arrow["as_built"] != "ok":
        lines.append(f"our prompt does not fit a datasets.Dataset as built ({arrow['as_built']}); wrapped, Arrow adds None keys and the "
                     f"chat template renders {arrow['video_placeholders_rendered']['after_roundtrip']} video placeholders for 1 video: "
                     "an adapter (JSON column + with_transform) is needed")
    blind = [n for n, r in by.items() if r["ok"] and r["spy"]["calls_with_pixel_values_videos"]["generate"] and not r["spy"]["calls_with_pixel_values_videos"]["loss"]]
    patched = [n for n, r in by.items() if r["ok"] and r["spy"]["calls_with_pixel_values_videos"]["loss"]]
    if blind:
        lines.append(f"SILENT BUG in stock GRPOTrainer ({', '.join(blind)}): it samples with the video but computes the policy loss without "
                     "pixel_values_videos / video_grid_thw (only image fields are carried), so the gradient is that of a video-blind model")
    if patched:
        lines.append(f"with the patch ({', '.join(patched)}: 3 private-method overrides + a forward hook) the video reaches the loss; "
                     "still uncovered: old/ref log-probs (num_iterations > 1, beta > 0)")
    any_ok = any(r["ok"] for r in results)
    if not any_ok:
        lines.append("DECISION: does not fit: no attempt completed a step on video prompts")
    elif blind and not patched:
        lines.append("DECISION: does not fit as is: it runs but does not train on the video")
    else:
        lines.append("DECISION: does not fit as is; fits only with a subclass of TRL private methods (they change between releases), "
                     "our own frame decoding (path videos fail here), a datasets adapter, and a checkpoint translation "
                     "(checkpoint-N/ model.safetensors + optimizer.pt vs checkpoints/step_N/policy + safetensors/step_N). "
                     "Use skillbank's own local GRPO loop, which shares skillbank.data with SFT and cosmos-rl's layout")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--records", type=int, default=4, help="prompts used (each sampled 4 times per step)")
    parser.add_argument("--max-completion", type=int, default=8)
    parser.add_argument("--attempts", default="A,B,C,D")
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--gradient-probe", action="store_true",
                        help="add a reward that varies between samples so the loss has a gradient; reports its norm on the vision tower and the LM")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    try:
        import trl
    except ImportError:
        print(INSTALL)
        return 0

    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    import torch

    torch.set_num_threads(2)
    from skillbank.assets.demo_dataset import build_demo_dataset
    from skillbank.assets.tiny_model import build_tiny_model
    from skillbank.data.records import load_records
    from skillbank.training.cosmos_rl.grpo_script import GrpoPromptDataset

    work = args.work or Path(tempfile.mkdtemp(prefix="trl-grpo-probe-"))
    model_dir = build_tiny_model(family="qwen2_5_vl", seed=0)  # the tests' tiny_model_dir, cached
    data = build_demo_dataset(records=24, seed=0)
    train = data / "train"
    records = load_records(train / "annotations.json")[: args.records]
    # the prompts and references exactly as the cosmos-rl GRPO dataset script builds them
    dataset = GrpoPromptDataset(records, media_path=str(train), system_prompt=SYSTEM_PROMPT, vision={"fps": FPS})
    rows_a = [{"prompt": dataset[i], "reference": dataset.get_reference_answer(i)} for i in range(len(dataset))]

    deps = dependency_check()
    arrow = arrow_roundtrip(rows_a[0]["prompt"], model_dir)
    results = []
    # the Trainer prints its log lines to stdout; with --json they go to stderr so stdout is one JSON document
    with contextlib.redirect_stdout(sys.stderr if args.json else sys.stdout):
        for name in args.attempts.split(","):
            results.append(run_attempt(name, model_dir, rows_a, args, work))

    doc = {"trl": trl.__version__, "dependency_problems": deps, "arrow_roundtrip": arrow, "attempts": results,
           "verdict": verdict(results, deps, arrow)}
    if args.json:
        print(json.dumps(doc, indent=1, default=str))
        return 0
    print(f"trl {trl.__version__}; unmet requirements: {deps or 'none'}")
    print(f"datasets.Dataset of our prompt as built: {arrow['as_built']}")
    print(f"  with string contents wrapped as text parts, after the round trip: text part {arrow['text_part_after_roundtrip']}, "
          f"video part {arrow['video_part_after_roundtrip']}; video placeholders the chat template renders {arrow['video_placeholders_rendered']}")
    for r in results:
        files = r.pop("files_written")
        print(json.dumps({k: v for k, v in r.items() if k not in ("completions_sample", "rewards")}, default=str))
        if files:
            print(f"  TRL wrote: {', '.join(files)}")
    print("VERDICT")
    for line in doc["verdict"]:
        print("  " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
