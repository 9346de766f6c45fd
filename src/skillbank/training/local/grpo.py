"""GRPO on one machine (`skillbank rl --backend local`): one process, CPU or one GPU, where the policy
samples its own rollouts (cosmos-rl runs a separate vLLM engine for that).

One policy step, as cosmos-rl's GRPO worker does it with its defaults:
1. rollouts: the next train_batch_per_replica / rollout.n_generation prompts of the epoch's seeded order
   (train_policy.dataloader_seed), rollout.n_generation samples each from the current policy at
   train_policy.temperature, at most rollout.max_response_length tokens, rollout.batch_size prompts per
   generate call (the chat, frames and pixel budget are SFT's: skillbank.data.examples);
2. rewards: skillbank.training.rewards, the weighted sum of train_policy.reward_function;
3. advantages: per prompt, (r - mean) / (std + 1e-6) over its samples (cosmos-rl's GRPO);
4. loss: cosmos-rl's default `token-mean` of the dual-clip PPO objective (ratio clipped to
   [1 - epsilon_low, 1 + epsilon_high], lower bound 3) plus kl_beta x the k3 estimate of the KL to the
   reference policy (the starting weights, loaded once when kl_beta > 0), over train_policy.mini_batch
   samples per forward/backward, each mini batch's loss scaled by its share of the samples (cosmos-rl's
   loss_scaling) and the gradients accumulated, and one optimizer step per policy step
   (cosmos-rl's default mu_iterations 1: the ratio is 1 when the gradient is taken; the clip and the
   ratio are kept so the objective is cosmos-rl's term for term).
Learning rate: cosmos-rl's linear warm-up from 0 (optm_warmup_steps; training/local/schedule.py), then constant. The gradient norm is clipped to
optm_grad_norm_clip.

Checkpoints and exports are the SFT local backend's (checkpoints/step_N/policy with rank-0 files and
the complete marker, safetensors/step_N); --resume continues from the newest complete checkpoint with
the same data order and RNG. Rows of metrics.jsonl: step, epoch, reward_mean, reward_std,
reward_<name> (each reward's mean), correct (exact_match's mean, when named), kl, loss, policy_loss,
response_length, zero_std_groups (prompts whose samples all scored alike: no signal), lr, grad_norm,
samples_per_s, iteration_time; train.log has one line per step; a tqdm bar shows reward and KL.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from skillbank.runs import layout
from skillbank.training.local import checkpoint as ckpt
from skillbank.training.local import schedule
from skillbank.training.local.data import epoch_order

ADV_EPS = 1e-6  # cosmos-rl's GRPO: (r - mean) / (std + eps)
LOWER_BOUND_RATIO = 3.0  # cosmos-rl's dual-clip lower bound (train_policy.lower_bound_ratio default)
KL_CLAMP = (-20.0, 20.0)
KL_LOSS_CLAMP = (-10.0, 10.0)
SMALL_DECODE_PARAMS = 1e8  # a policy under this many parameters decodes on one CPU thread on a busy machine (GrpoSampler._decode_threads)
BUSY_LOAD_PER_CPU = 1.5  # busy: a 1-minute load average above this many runnable processes per CPU


def group_advantages(rewards: list[float], group: int) -> list[float]:
    """(r - mean) / (std + 1e-6) within each consecutive group of `group` samples (population std)."""
    out: list[float] = []
    for start in range(0, len(rewards), group):
        chunk = rewards[start : start + group]
        mean = sum(chunk) / len(chunk)
        std = math.sqrt(sum((r - mean) ** 2 for r in chunk) / len(chunk))
        out += [(r - mean) / (std + ADV_EPS) for r in chunk]
    return out


def flat_groups(rewards: list[float], group: int) -> int:
    """Groups (consecutive `group` samples of one prompt) whose rewards are all equal: their advantages
    are all 0, so they teach nothing."""
    return sum(1 for start in range(0, len(rewards), group) if len(set(rewards[start : start + group])) == 1)


def grpo_token_loss(logps, old_logps, ref_logps, advantages, mask, *, eps_low: float, eps_high: float, kl_beta: float):
    """cosmos-rl's GRPO objective on [B, T] token tensors: (sum of per-token loss, sum of per-token KL),
    both over the masked (completion) tokens; the caller divides by the token count (token-mean)."""
    import torch

    ratio = torch.exp(torch.clamp(logps - old_logps, *KL_CLAMP))
    adv = advantages.unsqueeze(1).expand_as(logps)
    clipped = torch.clamp(ratio, 1 - eps_low, 1 + eps_high)
    clip_loss = -torch.min(ratio * adv, clipped * adv)
    per_token = torch.where(adv < 0, torch.min(-LOWER_BOUND_RATIO * adv, clip_loss), clip_loss)
    if kl_beta and ref_logps is not None:
        log_ratio = torch.clamp(ref_logps - logps, *KL_CLAMP)
        kl = torch.clamp(torch.exp(log_ratio) - log_ratio - 1, *KL_LOSS_CLAMP)
    else:
        kl = torch.zeros_like(per_token)
    m = mask.to(per_token.dtype)
    return (per_token * m).sum(), (kl * m).sum()


@contextlib.contextmanager
def _threads(n: int):
    """torch's intra-op threads set to `n` for the block, restored after."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class GrpoPlan:
    """How many prompts a step takes and how many steps the run has (cosmos-rl's count: the epoch's
    samples // train_batch_per_replica)."""

    def __init__(self, spec, prompts: int) -> None:
        g, batch = spec.rollout.n_generation, spec.train.train_batch_per_replica
        self.prompts = prompts
        self.group = g
        self.prompts_per_step = batch // g
        self.steps_per_epoch = prompts * g // batch
        total = self.steps_per_epoch * spec.train.epoch
        if spec.train.max_num_steps is not None:
            total = min(total, spec.train.max_num_steps)
        self.total_steps = total

    def epoch_of(self, step: int) -> int:
        return step // self.steps_per_epoch if self.steps_per_epoch else 0

    def prompt_indices(self, seed: int, step: int) -> list[int]:
        """The prompts of the 0-based policy step `step`: a pure function of (seed, epoch, step)."""
        order = epoch_order(self.prompts, seed, self.epoch_of(step))
        start = (step % self.steps_per_epoch) * self.prompts_per_step
        return order[start : start + self.prompts_per_step]


class GrpoSampler:
    """The policy and its prompts: what samples rollouts (the trainer's, and `skillbank rl`'s start check)."""

    def __init__(self, spec, *, model_path: str, gradient_checkpointing: bool = False) -> None:
        import torch

        from skillbank.compat import padded_causal_mask
        from skillbank.data.chat import prompt_and_answer
        from skillbank.data.examples import VisionSettings
        from skillbank.data.media import media_root
        from skillbank.data.records import load_records
        from skillbank.data.prompts import PromptBuilder
        from skillbank.training.cosmos_rl.grpo import system_prompt
        from skillbank.training.local.model import compute_dtype, load_policy
        from skillbank.training.rewards import reference_json

        self.spec, self.model_path = spec, model_path
        train = spec.train
        random.seed(train.seed)
        torch.manual_seed(train.seed)
        self.device = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
        self.dtype = compute_dtype(train.param_dtype, self.device.type)
        if self.device.type == "cpu":
            torch.set_flush_denormal(True)
        padded_causal_mask.install()  # left-padded rollout batches (skillbank.compat)
        self.model, self.processor = load_policy(model_path, gradient_checkpointing=gradient_checkpointing)
        self.model.to(self.device)
        self.param_count = sum(p.numel() for p in self.model.parameters())
        self.tokenizer = self.processor.tokenizer
        pad = self.tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else 0
        # a sampled image / video placeholder would be read as a vision slot by the loss forward (and fail it)
        tokens = [getattr(self.processor, name, None) for name in ("image_token", "video_token")]
        self.placeholders = [self.tokenizer.convert_tokens_to_ids(t) for t in tokens if t]

        custom = spec.custom
        vp = self.processor.video_processor
        vision = self.vision = VisionSettings.from_spec(spec, patch_size=int(vp.patch_size), merge_size=int(vp.merge_size))
        media = media_root(custom.train_dataset.media_path, custom.train_dataset.annotation_path)
        self.builder = PromptBuilder(self.processor, vision=vision, system_prompt=system_prompt(spec), media_path=media)
        self.records = load_records(custom.train_dataset.annotation_path)
        self.references = []
        for record in self.records:
            question, answer = prompt_and_answer(record)
            self.references.append(reference_json(answer, question))
        self.prompts: dict[int, dict[str, Any]] = {}  # prepared prompt tensors by record index (decoded once)

    def score(self, indices: list[int], texts: list[str]) -> tuple[list[float], dict[str, list[float]]]:
        """The rewards of n_generation samples per prompt of `indices` (skillbank.training.rewards)."""
        from skillbank.training.rewards import score

        g, custom = self.spec.rollout.n_generation, self.spec.custom
        refs = [self.references[i] for i in indices for _ in range(g)]
        return score(texts, refs, self.spec.train.train_policy.reward_function, answer_type=custom.answer_type, task_type=custom.task_type)

    # ---- rollouts ---------------------------------------------------------------------------------
    def _prompt(self, index: int) -> dict[str, Any]:
        if index not in self.prompts:
            self.prompts[index] = self.builder(self.records[index])
        return self.prompts[index]

    def rollouts(self, indices: list[int]) -> tuple[list[dict[str, Any]], list[Any], list[str]]:
        """n_generation samples per prompt: (prompt item per sample, completion token ids per sample, texts)."""
        completions, _ = self.sample(indices)
        texts = [t.strip() for t in self.tokenizer.batch_decode(completions, skip_special_tokens=True)]
        g = self.spec.rollout.n_generation
        return [self._prompt(i) for i in indices for _ in range(g)], completions, texts

    def sample(self, indices: list[int], *, max_new_tokens: int | None = None, max_time: float | None = None) -> tuple[list[Any], list[bool]]:
        """n_generation samples per prompt of `indices`, rollout.batch_size prompts per generate call, at most
        `max_new_tokens` (default rollout.max_response_length) each, every call stopped after `max_time`
        seconds when given: (completion token ids, the EOS kept; whether each sample ended with an EOS)."""
        import torch

        from skillbank.data.prompts import collate_left

        g, per_call = self.spec.rollout.n_generation, self.spec.rollout.batch_size
        items = [self._prompt(i) for i in indices]
        eos = torch.tensor(self._eos_ids(), dtype=torch.long)
        completions, ended = [], []
        self.model.eval()
        for start in range(0, len(items), per_call):  # rollout.batch_size prompts per generate call
            # each prompt repeated n_generation times (not num_return_sequences: Qwen3-VL's expansion of video
            # inputs fails in transformers 4.57)
            group = [item for item in items[start : start + per_call] for _ in range(g)]
            batch = {k: v.to(self.device) for k, v in collate_left(group, self.pad_id).items()}
            batch["pixel_values_videos"] = batch["pixel_values_videos"].to(next(self.model.parameters()).dtype)
            with torch.inference_mode(), self._autocast(), self._decode_threads():
                out = self.model.generate(
                    **batch, do_sample=True, temperature=self.spec.train.train_policy.temperature, top_p=1.0, top_k=0,
                    max_new_tokens=max_new_tokens or self.spec.rollout.max_response_length, use_cache=True, pad_token_id=self.pad_id,
                    suppress_tokens=self.placeholders or None, eos_token_id=eos.tolist(), max_time=max_time,
                )
            new = out[:, batch["input_ids"].shape[1] :].cpu()
            hit = torch.isin(new, eos)  # generate pads a finished row after its EOS: cut after the first one
            has = hit.any(dim=1)
            lengths = torch.where(has, hit.int().argmax(dim=1) + 1, new.shape[1]).tolist()
            completions += [row[:n].clone() for row, n in zip(new, lengths)]  # keep the EOS: its probability is trained too
            ended += has.tolist()
        self.model.train()
        return completions, ended

    def _eos_ids(self) -> list[int]:
        ids = self.model.generation_config.eos_token_id
        ids = ids if isinstance(ids, list) else [ids]
        return [i for i in ids if i is not None] or [self.tokenizer.eos_token_id]

    def _decode_threads(self):
        """One CPU thread while a small policy decodes on a busy machine: there OpenMP's barriers between threads that
        wait for a core cost more than the split saves (the tiny model, 4 prompts x 8 samples to 128 tokens at load ~28
        on 2 cores: 31-61 s on one thread, 297-310 s on two). On a machine with cores to spare the split pays (the rl
        template's step, 32 samples to 1,042 tokens, quiet 2 cores: 14.8 s on two threads, 27.2 s on one), so torch keeps
        its threads unless the 1-minute load average is above BUSY_LOAD_PER_CPU per CPU."""
        import torch

        if self.device.type != "cpu" or self.param_count >= SMALL_DECODE_PARAMS or torch.get_num_threads() == 1:
            return contextlib.nullcontext()
        if os.getloadavg()[0] <= BUSY_LOAD_PER_CPU * (os.cpu_count() or 1):
            return contextlib.nullcontext()
        return _threads(1)

    def _autocast(self):
        import torch

        if self.device.type == "cuda" and self.dtype != torch.float32:
            return torch.autocast("cuda", dtype=self.dtype)
        return contextlib.nullcontext()


class GrpoTrainer(GrpoSampler):
    def __init__(self, spec, *, run_dir: Path, model_path: str, resume_from: str | None) -> None:
        import torch

        from skillbank.training.local.model import load_policy

        super().__init__(spec, model_path=model_path, gradient_checkpointing=spec.policy.model_gradient_checkpointing)
        self.run_dir = run_dir
        train, policy = spec.train, spec.train.train_policy
        self.reference = None
        if policy.kl_beta > 0:
            self.reference, _ = load_policy(model_path)
            self.reference.to(self.device).eval().requires_grad_(False)
        self.plan = GrpoPlan(spec, len(self.records))  # the launcher refused a plan of zero steps
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        optim_cls = torch.optim.AdamW if train.optm_name == "AdamW" else torch.optim.Adam
        self.optimizer = optim_cls(self.params, lr=train.optm_lr, weight_decay=train.optm_weight_decay)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, schedule.lr_lambda(train, self.plan.total_steps))
        self.step = 0
        self.resumed = resume_from is not None
        if resume_from:
            extra = ckpt.load_checkpoint(resume_from, model=self.model, optimizer=self.optimizer, scheduler=self.scheduler, rank=0)
            self.step = int(extra["step"])
        self.monitor: Any = None

    # ---- logging ----------------------------------------------------------------------------------
    def log(self, line: str, *, echo: bool = False) -> None:
        with open(self.run_dir / layout.LOG_FILE, "a", encoding="utf-8") as f:
            f.write(f"[{time.strftime('%H:%M:%S')}] {line}\n")
        if echo:
            from tqdm import tqdm

            tqdm.write(line, file=sys.stderr)

    def metric(self, row: dict[str, Any]) -> None:
        with open(self.run_dir / layout.METRICS_FILE, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
        if self.monitor is not None:
            self.monitor.write(row)

    # ---- the loss ---------------------------------------------------------------------------------
    def _sequences(self, prompts: list[dict[str, Any]], completions: list[Any]) -> dict[str, Any]:
        """Prompt (left-padded) + completion (right-padded) per sample: every completion starts at the
        same position, so only its logits are computed (logits_to_keep)."""
        import torch

        from skillbank.data.prompts import collate_left

        batch = collate_left(prompts, self.pad_id)
        longest = max(1, max(int(c.shape[0]) for c in completions))
        comp = torch.full((len(completions), longest), self.pad_id, dtype=torch.long)
        comp_mask = torch.zeros((len(completions), longest), dtype=torch.long)
        for i, c in enumerate(completions):
            comp[i, : c.shape[0]] = c
            comp_mask[i, : c.shape[0]] = 1
        batch["input_ids"] = torch.cat([batch["input_ids"], comp], dim=1)
        batch["attention_mask"] = torch.cat([batch["attention_mask"], comp_mask], dim=1)
        batch = {k: v.to(self.device) for k, v in batch.items()}
        batch["pixel_values_videos"] = batch["pixel_values_videos"].to(next(self.model.parameters()).dtype)
        return {"inputs": batch, "completion": comp.to(self.device), "mask": comp_mask.to(self.device)}

    def _logps(self, model, seq: dict[str, Any]):
        import torch

        n = seq["completion"].shape[1]
        with self._autocast():
            logits = model(**seq["inputs"], use_cache=False, logits_to_keep=n + 1).logits[:, :-1, :]
        return torch.gather(torch.log_softmax(logits.float(), dim=-1), 2, seq["completion"].unsqueeze(-1)).squeeze(-1)

    def train_step(self, prompts: list[dict[str, Any]], completions: list[Any], advantages: list[float]) -> dict[str, float]:
        import torch

        policy = self.spec.train.train_policy
        mini = policy.mini_batch
        tokens = max(1, sum(int(c.shape[0]) for c in completions))
        loss_sum = kl_sum = 0.0
        for start in range(0, len(completions), mini):
            sl = slice(start, start + mini)
            seq = self._sequences(prompts[sl], completions[sl])
            ref = None
            if self.reference is not None:
                with torch.no_grad():
                    ref = self._logps(self.reference, seq)
            logps = self._logps(self.model, seq)
            adv = torch.tensor(advantages[sl], dtype=logps.dtype, device=logps.device)
            pg, kl = grpo_token_loss(logps, logps.detach(), ref, adv, seq["mask"], eps_low=policy.epsilon_low,
                                     eps_high=policy.epsilon_high, kl_beta=policy.kl_beta)
            # cosmos-rl: the token-mean of each mini batch, scaled by its share of the batch's samples
            share = logps.shape[0] / len(completions)
            loss = (pg + policy.kl_beta * kl) / max(1, int(seq["mask"].sum())) * share
            loss.backward()
            loss_sum += float(loss.detach())
            kl_sum += float(kl.detach())
        norm = torch.nn.utils.clip_grad_norm_(self.params, self.spec.train.optm_grad_norm_clip)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return {"loss": loss_sum, "kl": kl_sum / tokens, "grad_norm": float(norm), "tokens": tokens}

    # ---- checkpoints ------------------------------------------------------------------------------
    def save(self, step: int) -> None:
        c = self.spec.train.ckpt
        extra = {"epoch": self.plan.epoch_of(step), "total_steps": self.plan.total_steps, "world_size": 1}
        policy = ckpt.save_checkpoint(self.run_dir, step, model=self.model, optimizer=self.optimizer, scheduler=self.scheduler,
                                      extra=extra, rank=0, world=1, config=self.spec.model_dump(mode="json"))
        self.log(f"checkpoint saved successfully at {policy}", echo=True)
        if c.export_safetensors:
            self.export(step)
        removed = layout.prune(self.run_dir, c.max_keep)
        if removed:
            self.log(f"pruned checkpoints of steps {removed} (max_keep {c.max_keep})")

    def export(self, step: int) -> None:
        state = {k: v.detach().cpu() for k, v in self.model.state_dict().items()}
        dtype = None if self.device.type == "cpu" else self.dtype
        from dataclasses import asdict

        from skillbank.training.cosmos_rl.grpo import system_prompt

        # the prompt and vision settings the rollouts used (total_pixels resolved)
        custom = {**self.spec.custom.model_dump(mode="json"), "system_prompt": system_prompt(self.spec), "vision": asdict(self.vision)}
        path = ckpt.export_safetensors(self.run_dir, step, state, model_path=self.model_path, processor=self.processor, dtype=dtype,
                                       custom=custom, base_model=self.spec.policy.model_name_or_path)
        self.log(f"Exported safetensors to {path}", echo=True)

    # ---- the loop ---------------------------------------------------------------------------------
    def run(self) -> None:
        from skillbank.training.monitor import Monitor

        logging = self.spec.logging
        self.monitor = Monitor(self.run_dir, loggers=logging.logger, project=logging.project_name, run_name=logging.experiment_name,
                               config=self.spec.model_dump(mode="json"), resume_step=self.step if self.resumed else None,
                               log=lambda line: self.log(line, echo=True))
        try:
            self._run()
        finally:
            self.monitor.close()

    def _run(self) -> None:
        from tqdm import tqdm

        from skillbank import atomic
        from skillbank.training import rewards

        spec, plan = self.spec, self.plan
        policy = spec.train.train_policy
        weights = dict(policy.reward_function)
        total = plan.total_steps
        if self.resumed:
            rows = [r for r in layout.read_metrics(self.run_dir) if r.get("step", 0) <= self.step]
            atomic.write_text(self.run_dir / layout.METRICS_FILE, "".join(json.dumps(r) + "\n" for r in rows))
            self.log(f"Resumed from step {self.step}/{total}", echo=True)
            c = spec.train.ckpt
            if c.enable_checkpoint and c.export_safetensors and self.step not in layout.list_safetensors_steps(self.run_dir):
                self.export(self.step)
        self.log(f"GRPO: {plan.prompts} prompts, {plan.prompts_per_step} per step x {plan.group} samples, {plan.steps_per_epoch} steps per epoch, "
                 f"{total} steps, rewards {weights}, kl_beta {policy.kl_beta}, device {self.device.type}")
        cosmos = [name for name in weights if name in rewards.COSMOS_REWARDS]
        if cosmos:  # imported on the first score; its package logs an ERROR where vLLM is missing (no reward uses vLLM)
            self.log(f"cosmos-rl's reward(s) {', '.join(cosmos)}: loading cosmos-rl (a 'Failed to import VLLM Rollout' "
                     "line from it is harmless here)", echo=True)
        bar = tqdm(total=total, initial=self.step, desc="grpo", unit="step", dynamic_ncols=True, file=sys.stderr)
        while self.step < total:
            started = time.perf_counter()
            indices = plan.prompt_indices(policy.dataloader_seed, self.step)
            prompts, completions, texts = self.rollouts(indices)
            totals, parts = self.score(indices, texts)
            advantages = group_advantages(totals, plan.group)
            lr = self.scheduler.get_last_lr()[0]
            out = self.train_step(prompts, completions, advantages)
            elapsed = time.perf_counter() - started
            self.step += 1
            n = len(totals)
            mean = sum(totals) / n
            zero_std = flat_groups(totals, plan.group)
            row: dict[str, Any] = {
                "step": self.step, "epoch": plan.epoch_of(self.step - 1) + 1,
                "reward_mean": mean, "reward_std": math.sqrt(sum((r - mean) ** 2 for r in totals) / n),
                **{f"reward_{name}": sum(v) / n for name, v in parts.items()},
                **({"correct": sum(parts[rewards.EXACT_MATCH]) / n} if rewards.EXACT_MATCH in parts else {}),
                "kl": out["kl"], "loss": out["loss"], "response_length": out["tokens"] / n, "zero_std_groups": zero_std,
                "lr": lr, "grad_norm": out["grad_norm"], "samples_per_s": n / elapsed if elapsed > 0 else None,
                "iteration_time": elapsed, "time": time.time(),
            }
            self.metric(row)
            self.log(f"Step: {self.step}/{total}, Reward: {mean:.4f}, KL: {out['kl']:.5f}, Loss: {out['loss']:.6f}, "
                     f"Response length: {row['response_length']:.1f}, Learning rate: {lr:.3e}, grad_norm: {out['grad_norm']:.4f}")
            bar.update(1)
            bar.set_postfix(reward=f"{mean:.3f}", kl=f"{out['kl']:.4f}")
            if self._save_due(self.step):
                self.save(self.step)
        bar.close()
        self.log(f"Training finished at step {self.step}/{total}", echo=True)

    def _save_due(self, step: int) -> bool:
        c = self.spec.train.ckpt
        return c.enable_checkpoint and (step % c.save_freq == 0 or step == self.plan.total_steps)


def main(argv: list[str] | None = None) -> int:
    from skillbank.specification.rl import RlSpec
    from skillbank.training.local.process import begin

    args, spec = begin(sys.argv[1:] if argv is None else argv, prog="skillbank.training.local.grpo", model=RlSpec)
    run_dir = args.run_dir
    try:
        GrpoTrainer(spec, run_dir=run_dir, model_path=args.model_path, resume_from=args.resume_from).run()
    except BaseException:
        (run_dir / "error_rank_0.txt").write_text(traceback.format_exc(), encoding="utf-8")
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
