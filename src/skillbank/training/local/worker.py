"""One rank of the local backend (started by torchrun): FSDP2 SFT of a Qwen-VL policy.

Reads the validated spec the launcher wrote into the run folder and honours: epoch,
train_batch_per_replica (per data-parallel rank), mini_batch (gradient accumulation), optm_*,
param_dtype (GPU only; float32 on CPU), max_num_steps, model_gradient_checkpointing, policy.lora,
validation (every freq_in_epoch epochs, before training and at the end), train.ckpt, and resume.
Rank 0 writes metrics.jsonl and train.log (cosmos-rl's log lines), TensorBoard events (and wandb,
skillbank.training.monitor), shows a progress bar, and sends train.ckpt.upload_s3 uploads after each
save (skillbank.training.upload; the launcher sends upload_hf after the run).

Data order is a pure function of (dataloader_seed, epoch), so a resumed run sees exactly the
batches the interrupted run would have seen; model, optimizer, scheduler, step and RNG come back
from the checkpoint, so the loss curve continues.
"""

from __future__ import annotations

import json
import math
import os
import random
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillbank.training import upload
from skillbank.runs import layout
from skillbank.runs import steps
from skillbank.runs.disk import trainable_only
from skillbank.training.local import checkpoint as ckpt
from skillbank.training.local import schedule
from skillbank.training.local.model import compute_dtype, load_policy, make_mesh, shard_model
from skillbank.training.local.process import begin



@dataclass
class Dist:
    rank: int
    world: int
    local_rank: int
    device: Any

    @property
    def main(self) -> bool:
        return self.rank == 0


def init_distributed() -> Dist:
    import torch
    import torch.distributed as dist

    rank = int(os.environ.get("RANK", 0))
    world = int(os.environ.get("WORLD_SIZE", 1))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        backend = "nccl"
    else:
        device = torch.device("cpu")
        backend = "gloo"
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group(backend, rank=rank, world_size=world)
    return Dist(rank, world, local_rank, device)


def answer_loss(model, inputs: dict[str, Any]):
    """Mean cross-entropy over the label tokens (`inputs` holds the batch's labels), with logits computed
    only at the positions that predict one (logits_to_keep): the loss the model computes from `labels`,
    without a vocabulary-wide projection and log-softmax of every prompt position (on the demo's clips
    5 of ~58 positions; that was ~12% of a CPU step)."""
    import torch
    import torch.nn.functional as F

    inputs = dict(inputs)
    target = inputs.pop("labels")[:, 1:]
    keep = torch.nonzero((target != -100).any(dim=0)).flatten()  # positions predicting some row's label
    logits = model(**inputs, logits_to_keep=keep).logits
    return F.cross_entropy(logits.float().flatten(0, 1), target[:, keep].flatten(), ignore_index=-100)


class Trainer:
    def __init__(self, spec, *, run_dir: Path, model_path: str, resume_from: str | None, dist_info: Dist):
        import torch

        from skillbank.training.local import data as local_data

        self.spec = spec
        self.run_dir = run_dir
        self.model_path = model_path
        self.d = dist_info
        train = spec.train
        random.seed(train.seed)
        torch.manual_seed(train.seed)
        par = spec.policy.parallelism
        if par.dp_replicate_size * par.dp_shard_size != self.d.world:
            raise ValueError(f"world size {self.d.world} != dp_replicate_size * dp_shard_size ({par.dp_replicate_size * par.dp_shard_size})")
        self.dtype = compute_dtype(train.param_dtype, self.d.device.type)
        if self.d.device.type == "cpu":
            torch.set_flush_denormal(True)  # denormal floats take x86 slow paths; flushing them is harmless here

        self.model, self.processor = load_policy(model_path, lora=spec.policy.lora, gradient_checkpointing=spec.policy.model_gradient_checkpointing)
        self.model.to(self.d.device)
        self.mesh = make_mesh(self.d.device.type, par.dp_replicate_size, par.dp_shard_size)
        shard_model(self.model, self.mesh, dtype=self.dtype, reshard_after_forward=train.fsdp_reshard_after_forward != "never")
        self.model.train()
        self.params = [p for p in self.model.parameters() if p.requires_grad]

        self.data = local_data.DataSplits.from_spec(spec, processor=self.processor, model_path=model_path)
        self.plan = steps.step_plan(spec, len(self.data.train))
        if self.plan.total_steps == 0:
            raise ValueError(
                f"zero training steps: {len(self.data.train)} train records give {self.plan.records_per_rank} per rank, "
                f"fewer than train_batch_per_replica {train.train_batch_per_replica} ({self.d.world} ranks)"
            )
        optim_cls = torch.optim.AdamW if train.optm_name == "AdamW" else torch.optim.Adam
        fused = True if self.d.device.type == "cpu" else None  # on CPU the default per-tensor loop was a tenth of a demo step
        self.optimizer = optim_cls(self.params, lr=train.optm_lr, betas=tuple(train.optm_betas), weight_decay=train.optm_weight_decay, fused=fused)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, schedule.lr_lambda(train, self.plan.total_steps))
        self.step = 0
        if resume_from:
            extra = ckpt.load_checkpoint(resume_from, model=self.model, optimizer=self.optimizer, scheduler=self.scheduler, rank=self.d.rank)
            self.step = int(extra["step"])
        self.resumed = resume_from is not None
        self.monitor: Any = None  # rank 0's TensorBoard / wandb writer, started by run()

    # ---- logging (rank 0) -------------------------------------------------------------------------
    def log(self, line: str, *, echo: bool = False) -> None:
        if not self.d.main:
            return
        with open(self.run_dir / layout.LOG_FILE, "a", encoding="utf-8") as f:
            f.write(f"[{time.strftime('%H:%M:%S')}] {line}\n")
        if echo:
            from tqdm import tqdm

            tqdm.write(line, file=sys.stderr)

    def _gpu_memory(self) -> dict[str, float]:
        """Rank 0's peak GPU memory so far, GiB (what `skillbank plan`'s memory_per_gpu_gib predicts:
        allocated; reserved adds the allocator's cache); nothing on CPU."""
        import torch

        if self.d.device.type != "cuda":
            return {}
        return {"gpu_memory_allocated_gib": torch.cuda.max_memory_allocated(self.d.device) / 2**30,
                "gpu_memory_reserved_gib": torch.cuda.max_memory_reserved(self.d.device) / 2**30}

    def metric(self, row: dict[str, Any]) -> None:
        if self.d.main:
            with open(self.run_dir / layout.METRICS_FILE, "a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
                f.flush()
            if self.monitor is not None:
                self.monitor.write(row)

    def _start_monitor(self) -> None:
        """TensorBoard events (and wandb when logging.logger has it) on rank 0: skillbank.training.monitor."""
        self.monitor = None
        if self.d.main:
            from skillbank.training.monitor import Monitor

            logging = self.spec.logging
            self.monitor = Monitor(
                self.run_dir, loggers=logging.logger, project=logging.project_name, run_name=logging.experiment_name,
                config=self.spec.model_dump(mode="json"), resume_step=self.step if self.resumed else None,
                log=lambda line: self.log(line, echo=True),
            )

    def _trim_metrics(self) -> None:
        """On resume, forget rows of steps after the checkpoint (the killed attempt's)."""
        if self.d.main:
            from skillbank import atomic

            rows = [r for r in layout.read_metrics(self.run_dir) if r.get("step", 0) <= self.step]
            atomic.write_text(self.run_dir / layout.METRICS_FILE, "".join(json.dumps(r) + "\n" for r in rows))

    # ---- steps ------------------------------------------------------------------------------------
    def _to_device(self, batch: dict[str, Any]) -> dict[str, Any]:
        out = {k: v.to(self.d.device) for k, v in batch.items()}
        if "pixel_values_videos" in out:
            out["pixel_values_videos"] = out["pixel_values_videos"].to(self.dtype if self.d.device.type == "cuda" else out["pixel_values_videos"].dtype)
        return out

    def train_step(self, items: list) -> tuple[float, float]:
        import torch
        import torch.distributed as dist

        mini = self.spec.train.train_policy.mini_batch
        chunks = [items[i : i + mini] for i in range(0, len(items), mini)]
        batches = [self.data.batch(chunk) for chunk in chunks]
        tokens = [int((b["labels"][:, 1:] != -100).sum()) for b in batches]
        total_tokens = max(1, sum(tokens))
        loss_sum = torch.zeros((), device=self.d.device)
        for i, (batch, n) in enumerate(zip(batches, tokens)):
            self.model.set_requires_gradient_sync(i == len(batches) - 1)
            loss = answer_loss(self.model, self._to_device(batch)) * (n / total_tokens)
            loss.backward()
            loss_sum += loss.detach().float()
        norm = torch.nn.utils.clip_grad_norm_(self.params, self.spec.train.optm_grad_norm_clip)
        norm = norm.full_tensor() if hasattr(norm, "full_tensor") else norm
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        dist.all_reduce(loss_sum)  # gloo has no AVG
        return loss_sum.item() / self.d.world, float(norm)

    def validate(self) -> float | None:
        import torch
        import torch.distributed as dist

        if not self.data.val:
            return None
        size = self.spec.validation.batch_size
        mine = self.data.val[self.d.rank :: self.d.world]
        rounds = math.ceil(math.ceil(len(self.data.val) / self.d.world) / size)
        sums = torch.zeros(2, dtype=torch.float64, device=self.d.device)
        self.model.eval()
        with torch.no_grad():
            for r in range(rounds):
                chunk = mine[r * size : (r + 1) * size]
                real = bool(chunk)
                batch = self.data.batch(chunk or self.data.val[:1])  # every rank runs the same number of forwards
                n = int((batch["labels"][:, 1:] != -100).sum())
                loss = answer_loss(self.model, self._to_device(batch))
                if real:
                    sums[0] += loss.double() * n
                    sums[1] += n
        self.model.train()
        dist.all_reduce(sums)
        return float(sums[0] / sums[1]) if sums[1] > 0 else None

    # ---- checkpoints ------------------------------------------------------------------------------
    def export(self, step: int) -> None:
        """safetensors/step_N from the live (sharded) model: collective, rank 0 writes."""
        state = ckpt.gather_full_state(self.model)
        if self.d.main:
            dtype = None if self.d.device.type == "cpu" else self.dtype
            lora = self.spec.policy.lora
            adapter = ckpt.adapter_config(lora.model_dump(mode="json"), base_model=str(self.model_path)) if lora.enable else None
            path = ckpt.export_safetensors(
                self.run_dir, step, state, model_path=self.model_path, processor=self.processor, dtype=dtype, adapter=adapter,
                custom=self.spec.custom.model_dump(mode="json"), base_model=self.spec.policy.model_name_or_path,
            )
            self.log(f"Exported safetensors to {path}", echo=True)

    def save(self, step: int) -> None:
        import torch.distributed as dist

        config = self.spec.model_dump(mode="json")
        extra = {"epoch": self.plan.epoch_of(step), "total_steps": self.plan.total_steps, "world_size": self.d.world}
        policy = ckpt.save_checkpoint(
            self.run_dir, step, model=self.model, optimizer=self.optimizer, scheduler=self.scheduler,
            extra=extra, rank=self.d.rank, world=self.d.world, config=config, trainable_only=trainable_only(self.spec, "local"),
        )
        dist.barrier()
        self.log(f"checkpoint saved successfully at {policy}", echo=True)
        ckpt_spec = self.spec.train.ckpt
        if ckpt_spec.export_safetensors:
            self.export(step)
        if self.d.main:  # S3 uploads (train.ckpt.upload_s3) before pruning; a failure is recorded, training goes on
            upload.after_save(self.spec, self.run_dir, step, final=step == self.plan.total_steps, log=lambda line: self.log(line, echo=True))
            removed = layout.prune(self.run_dir, ckpt_spec.max_keep)
            if removed:
                self.log(f"pruned checkpoints of steps {removed} (max_keep {ckpt_spec.max_keep})")
        dist.barrier()

    def _due(self, step: int) -> tuple[bool, bool]:
        """(validate, checkpoint) after `step` completed steps."""
        plan, total = self.plan, self.plan.total_steps
        epoch_end = step % plan.steps_per_epoch == 0
        epochs_done = step // plan.steps_per_epoch
        val = self.spec.validation.enable and bool(self.data.val) and (
            step == total or (epoch_end and epochs_done % self.spec.validation.freq_in_epoch == 0)
        )
        c = self.spec.train.ckpt
        if not c.enable_checkpoint:
            return val, False
        if c.save_freq_in_epoch > 0:
            save = epoch_end and epochs_done % c.save_freq_in_epoch == 0
        else:
            save = step % c.save_freq == 0
        return val, save or step == total

    # ---- the loop ---------------------------------------------------------------------------------
    def run(self) -> None:
        self._start_monitor()
        try:
            self._run()
        finally:
            if self.monitor is not None:
                self.monitor.close()

    def _run(self) -> None:
        from tqdm import tqdm

        plan, total = self.plan, self.plan.total_steps
        train = self.spec.train
        if self.resumed:
            self._trim_metrics()
            self.log(f"Resumed from step {self.step}/{total}", echo=True)
            c = self.spec.train.ckpt
            if c.enable_checkpoint and c.export_safetensors and self.step not in layout.list_safetensors_steps(self.run_dir):
                self.export(self.step)  # the kill came between the checkpoint and its export
        self.log(
            f"{len(self.data.train)} train / {len(self.data.val)} val records, {self.d.world} rank(s), "
            f"{plan.steps_per_epoch} steps per epoch, {total} steps, device {self.d.device.type}"
        )
        if not self.resumed and self.spec.validation.enable and self.data.val:
            val = self.validate()
            self.metric({"step": 0, "total_steps": total, "epoch": 0, "val_loss": val, "time": time.time()})
            self.log(f"[SFT] Validation loss: {val:.6f} for train step 0/{total}, epoch 0", echo=True)
        bar = tqdm(total=total, initial=self.step, desc="train", unit="step", disable=not self.d.main, dynamic_ncols=True, file=sys.stderr)
        epoch = plan.epoch_of(self.step)
        while self.step < total:
            epoch = plan.epoch_of(self.step)
            if self.step % plan.steps_per_epoch == 0:
                self.log(f"Training epoch {epoch + 1}/{train.epoch}")
            items = self.data.rank_items(epoch, self.step % plan.steps_per_epoch, rank=self.d.rank, plan=plan)
            started = time.perf_counter()
            lr = self.scheduler.get_last_lr()[0]
            loss, grad_norm = self.train_step(items)
            elapsed = time.perf_counter() - started
            self.step += 1
            row: dict[str, Any] = {  # metrics.jsonl's step row: the watcher writes the same keys from cosmos-rl's lines
                "step": self.step,
                "total_steps": total,
                "epoch": epoch + 1,
                "loss": loss,
                "lr": lr,
                "grad_norm": grad_norm,
                "samples_per_s": plan.global_batch / elapsed if elapsed > 0 else None,
                "iteration_time": elapsed,
                "time": time.time(),
                **self._gpu_memory(),
            }
            self.log(f"Step: {self.step}/{total}, Loss: {loss:.6f}, Learning rate: {lr:.3e}, grad_norm: {grad_norm:.4f}")
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.4f}", lr=f"{lr:.2e}")
            self.metric(row)
            do_val, do_save = self._due(self.step)
            if do_val:  # a row of its own, as cosmos-rl prints validation after the step
                val = self.validate()
                self.metric({"step": self.step, "total_steps": total, "epoch": epoch + 1, "val_loss": val, "time": time.time()})
                self.log(f"[SFT] Validation loss: {val:.6f} for train step {self.step}/{total}, epoch {epoch}", echo=True)
            if do_save:
                self.save(self.step)
        bar.close()
        self.log(f"Training finished at step {self.step}/{total}", echo=True)


def main(argv: list[str] | None = None) -> int:
    from skillbank.specification.train import TrainSpec

    args, spec = begin(sys.argv[1:] if argv is None else argv, prog="skillbank.training.local.worker", model=TrainSpec)
    import torch.distributed as dist

    run_dir = args.run_dir
    d = init_distributed()
    try:
        Trainer(spec, run_dir=run_dir, model_path=args.model_path, resume_from=args.resume_from, dist_info=d).run()
    except BaseException:
        (run_dir / f"error_rank_{d.rank}.txt").write_text(traceback.format_exc(), encoding="utf-8")
        raise
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
