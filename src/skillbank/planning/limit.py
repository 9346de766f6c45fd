"""A run longer than one job: `skillbank plan --time-limit H` (the partition's limit, in hours).

A Slurm job that reaches its --time is signalled SIGNAL_BEFORE_LIMIT_S before it (`--signal=B:USR1@<s>`, the
job requeues itself and the next attempt resumes from its newest complete checkpoint: the platform's job script
reads the same constant). Each attempt pays the start-up again; the work since the last checkpoint is lost at a
stop. The cadence that minimises checkpoint time + work lost per stop, for stops a whole attempt apart, saves
every sqrt(save seconds x working seconds of an attempt) (the deterministic case of Young's interval,
sqrt(2 x checkpoint cost x time between failures)); it is given in optimizer steps (train.ckpt.save_freq,
with save_freq_in_epoch 0: cosmos-rl ignores save_freq while save_freq_in_epoch > 0).

attempts: 1 when the run (the cadence's saves included) fits in one attempt's working time, else 1 + the
remaining work over what an attempt keeps (its working time less one save interval and one save lost at the
stop, the worst case). time_per_attempt: the limit when several attempts are needed or the Slurm margin does not
fit under it, else the plan's slurm_time.
"""

from __future__ import annotations

import math
from typing import Any

from skillbank.errors import InputError
from skillbank.planning import timing

SIGNAL_BEFORE_LIMIT_S = 300  # seconds before --time at which Slurm signals the job to requeue itself (--signal=B:USR1@300)


def cadence_steps(save_s: float, work_s: float, step_s: float, total_steps: int) -> int:
    """Optimizer steps between saves: sqrt(save seconds x working seconds) of training, at least one step."""
    interval = math.sqrt(max(save_s, 1.0) * max(work_s, step_s))
    return max(1, min(total_steps, int(interval // step_s) if step_s > 0 else total_steps))


def time_limit(t: Any, gpu: Any, mfu: float, rates: timing.Rates, limit_h: float, *, margin_s: float = SIGNAL_BEFORE_LIMIT_S) -> dict[str, Any] | None:
    """The `time_limit` block of a plan for one layout (planning.layouts.Timed); None when the steps are unknown."""
    shape, plan = t.shape, t.plan
    if plan is None or not plan.total_steps:
        return None
    limit_s = limit_h * 3600
    parts = timing.seconds(shape, gpu, mfu, rates)
    startup, save_s, step_s = parts["startup"], timing.save_seconds(shape, rates), t.step_s
    usable = limit_s - startup - margin_s
    if usable < 2 * (step_s + save_s):
        raise InputError(
            f"--time-limit {limit_h:g} h leaves {usable / 60:.1f} min of work per attempt after the start-up ({startup / 60:.1f} min) and the "
            f"{margin_s:g} s before the limit at which the job is signalled: not two steps and their saves ({(step_s + save_s) / 60:.1f} min each)",
            where="--time-limit", fix="pass a longer limit (the partition's), or plan more nodes (--nodes) for shorter steps")
    work0 = parts["compute"] + parts["validation"]
    every = cadence_steps(save_s, min(usable, work0), step_s, plan.total_steps)
    every = min(every, max(1, int((usable / 2 - save_s) // step_s)))  # an attempt keeps at least half its working time
    now = steps_between_saves(t.spec, plan)
    keep_spec = bool(now) and now <= every  # the spec already saves at least as often: keep its cadence
    every = now if keep_spec else every
    saves = -(-plan.total_steps // every)
    work = work0 + saves * save_s
    lost = every * step_s + save_s  # stopped just before a save completed
    kept = usable - lost
    attempts = 1 + (math.ceil((work - usable) / kept) if work > usable else 0)
    slower = work * (1 + timing.MARGIN)
    attempts_margin = 1 + (math.ceil((slower - usable) / kept) if slower > usable else 0)
    total_h = (work + startup) / 3600
    suggested = timing.slurm_time(total_h)
    if attempts == 1 and suggested is not None and suggested["hours"] <= limit_h:
        per_attempt, why = suggested["value"], f"the plan's slurm_time ({suggested['margin']}), under the limit"
    else:
        per_attempt, why = timing.slurm_format(int(limit_s // 60)), "the limit: every attempt runs until it is signalled"
    ckpt = t.spec.train.ckpt
    return {
        "limit_h": limit_h,
        "attempts": attempts,
        "attempts_with_margin": attempts_margin,
        "save_every_steps": every,
        "lost_per_stop_h": round(lost / 3600, 3),
        "time_per_attempt": per_attempt,
        "time_per_attempt_is": why,
        "total_time_h": round(total_h, 3),
        "wall_time_h": round(((attempts - 1) * limit_s + (work - (attempts - 1) * kept) + startup) / 3600, 3),
        "saves": saves,
        "set": ([] if ckpt.enable_checkpoint else ["train.ckpt.enable_checkpoint=true"])
               + ([] if keep_spec else ["train.ckpt.save_freq_in_epoch=0", f"train.ckpt.save_freq={every}"]),
        "spec_saves_every_steps": now,
        "spec_lost_per_stop_h": round((now * step_s + save_s) / 3600, 3) if now else None,
        "spec_save_rule": f"every {ckpt.save_freq_in_epoch} epoch(s)" if ckpt.save_freq_in_epoch else f"every {ckpt.save_freq} steps",
        "assumptions": {"step_time_s": round(step_s, 2), "checkpoint_s": round(save_s, 1), "startup_per_attempt_s": round(startup, 1),
                        "signal_before_limit_s": margin_s, "working_s_per_attempt": round(usable, 1),
                        "cadence": "sqrt(checkpoint seconds x working seconds) of training between saves (Young's interval for stops one attempt apart)",
                        "lost_per_stop": "one save interval of steps + the save in flight (the worst case)",
                        "attempts_with_margin": f"the work + {timing.MARGIN:.0%} (a slower MFU, slow nodes)"},
    }


def steps_between_saves(spec: Any, plan: Any) -> int | None:
    """The spec's own save interval in optimizer steps (None when checkpoints are off)."""
    c = spec.train.ckpt
    if not c.enable_checkpoint:
        return None
    return c.save_freq_in_epoch * plan.steps_per_epoch if c.save_freq_in_epoch > 0 else c.save_freq


def limit_lines(b: dict[str, Any]) -> list[str]:
    """The block in two or three lines for a person."""
    a = b["assumptions"]
    margin = "" if b["attempts_with_margin"] == b["attempts"] else f" ({b['attempts_with_margin']} if {a['attempts_with_margin']})"
    if not b["set"]:
        spec_now = f" (the spec's own cadence: {b['spec_save_rule']}, as often or more)"
    elif b["spec_saves_every_steps"]:
        spec_now = f"; the spec saves {b['spec_save_rule']} ({b['spec_saves_every_steps']} steps): up to {b['spec_lost_per_stop_h']:.2f} h lost per stop"
    else:
        spec_now = "; the spec saves no checkpoint: a stop loses everything"
    how = f" ({' '.join('--set ' + x for x in b['set'])})" if b["set"] else ""
    return [
        f"time limit {b['limit_h']:g} h: {b['attempts']} attempt(s){margin}, Slurm --time {b['time_per_attempt']} each "
        f"({b['time_per_attempt_is']}); {b['total_time_h']:.2f} h of work, {b['wall_time_h']:.2f} h wall over the attempts",
        f"  save every {b['save_every_steps']} steps{how}: up to {b['lost_per_stop_h']:.2f} h lost per stop, "
        f"{b['saves']} saves of {a['checkpoint_s']:.0f} s{spec_now}",
        f"  assumed: {a['step_time_s']:g} s a step, {a['startup_per_attempt_s'] / 60:.1f} min start-up per attempt, signalled "
        f"{a['signal_before_limit_s']:g} s before the limit (--signal=B:USR1@{a['signal_before_limit_s']:g})",
    ]
