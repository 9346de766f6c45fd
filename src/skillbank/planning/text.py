"""The plan for a person: the same numbers as `skillbank plan --json`, in GiB and hours."""

from __future__ import annotations

from typing import Any

from skillbank.runs.steps import gib_value_text


def _tokens_line(t: dict[str, Any]) -> str:
    extra = []
    if t.get("probed"):
        extra.append(f"{t['probed']:,} read from the clips' headers")
    if t.get("budget"):
        extra.append(f"{t['budget']:,} unreadable clip(s) at the vision budget")
    said = f"; {', '.join(extra)}" if extra else ""
    return f"tokens per sample: mean {t['mean']:,}, max {t['max']:,} ({t['source']}; bound {t['bound']}{said})"


def _time_line(p: dict[str, Any]) -> str:
    b = p.get("time_breakdown_h")
    if not b:
        return "time: unknown (records not counted)"
    parts = ", ".join(f"{k} {b[k]:.2f}" for k in ("compute", "startup", "checkpoint", "validation") if k in b)
    slurm = f"; Slurm --time {p['slurm_time']['value']} ({p['slurm_time']['margin']})" if p.get("slurm_time") else ""
    return f"time: {b['total']:.2f} h = {parts} h{slurm}"


def count_text(n: float) -> str:
    """A parameter count at one precision: 3.75B, 74.0M."""
    return f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.1f}M"


def params_line(total: int, trained: int, lora: int) -> str:
    """One figure per count: '3.75B parameters, all trained' or '3.75B parameters, 74.0M trained (LoRA)'."""
    if trained >= total:
        return f"{count_text(total)} parameters, all trained"
    return f"{count_text(total)} parameters, {count_text(trained)} trained" + (" (LoRA)" if lora else "")


def plan_text(p: dict[str, Any]) -> str:
    if p.get("action") == "rl":
        return rl_text(p)
    lines = [
        f"model {p['model']}: {params_line(p['params'], p['trainable_params'], p['lora_params'])}",
        _tokens_line(p["tokens_per_sample"]),
        f"on {p['nodes']} node(s) x {p['gpus_per_node']} {p['gpu']}: {p['memory_per_gpu_gib']:.1f} GiB per GPU "
        f"({'fits' if p['fits'] else 'DOES NOT FIT'}; gradient checkpointing {'on' if p['gradient_checkpointing'] else 'off'}"
        f"{'; fused loss' if p.get('fused_loss') else ''}; mini_batch {p['mini_batch']})",
    ]
    lines += [f"  {k:<17} {v:8.2f} GiB" for k, v in p["memory_breakdown_gib"].items()]
    a = p["activations_gib"]
    lines.append(f"  (activations with gradient checkpointing {a['with_checkpointing']:.2f} GiB, without {a['without_checkpointing']:.2f} GiB)")
    for fix in p.get("fits_with") or []:
        lines.append(f"  fits with {' '.join(fix['set'])}: {fix['memory_per_gpu_gib']:.1f} GiB per GPU")
    steps_ = f", {p['total_steps']:,} steps" if p["total_steps"] is not None else ""
    lines.append(f"step {p['step_time_s']:.1f} s (global batch {p['global_batch']}, {p['train_batch_per_replica']} per rank{steps_})")
    lines.append(_time_line(p))
    d = p["disk"]
    lines.append(f"checkpoints: {gib_value_text(d['checkpoint_gib'])} each, {gib_value_text(d['disk_gib'])} on disk ({d['detail']})")
    if p.get("time_limit"):
        from skillbank.planning.limit import limit_lines

        lines += limit_lines(p["time_limit"])
    if p.get("study"):
        from skillbank.planning.study import study_lines

        lines += study_lines(p["study"])
    lines.append("")
    lines.append(f"{'nodes':>5} {'GPUs':>5} {'GiB/GPU':>8} {'fits':>5} {'batch':>6} {'/rank':>6} {'steps':>7} {'step s':>7} {'hours':>7} {'GPU-h':>8}")
    notes = []
    for r in p["layouts"]:
        steps_, hours, gpuh = (f"{r[k]:,}" if isinstance(r[k], int) else (f"{r[k]:.2f}" if r[k] is not None else "-") for k in ("total_steps", "total_time_h", "gpu_hours"))
        lines.append(f"{r['nodes']:>5} {r['gpus']:>5} {r['memory_per_gpu_gib']:>8.1f} {'yes' if r['fits'] else 'NO':>5} {r['global_batch']:>6} "
                     f"{r['train_batch_per_replica']:>6} {steps_:>7} {r['step_time_s']:>7.1f} {hours:>7} {gpuh:>8}")
        if r.get("batch_note"):
            notes.append(f"  {r['nodes']} node(s): {r['batch_note']}")
    lines += notes
    rec = p["recommendation"]
    lines.append(f"recommendation: {rec['nodes']} node(s): {rec['reason']}" if rec["nodes"] else f"recommendation: {rec['reason']}")
    lines.append("assumptions:")
    lines += [f"  - {a}" for a in p["assumptions"] + ((p.get("study") or {}).get("assumptions") or [])]
    return "\n".join(lines)


def rl_text(p: dict[str, Any]) -> str:
    t, pol, rol, st = p["tokens_per_sample"], p["policy"], p["rollout"], p["step_time_s"]
    lines = [
        f"model {p['model']}: {p['params'] / 1e9:.2f}B parameters (GRPO: policy + rollout engines, {p['gpus']} GPU(s) {p['gpu']})",
        _tokens_line(t) + f"; sequences up to {t['sequence_max']:,} tokens (+ max_response_length {t['max_response_length']:,})",
        f"policy: {pol['gpus']} GPU(s), {pol['memory_per_gpu_gib']:.1f} GiB per GPU ({'fits' if pol['fits'] else 'DOES NOT FIT'})",
    ]
    lines += [f"  {k:<17} {v:8.2f} GiB" for k, v in pol["memory_breakdown_gib"].items()]
    lines.append(f"rollout: {rol['gpus']} GPU(s) in {rol['engines']} vLLM engine(s) of tp {rol['tp_size']}, {rol['memory_per_gpu_gib']:.1f} GiB per GPU of "
                 f"{rol['room_gib']:.1f} ({'fits' if rol['fits'] else 'DOES NOT FIT'}; {rol['sequences_in_flight']} sequences in flight, room for {rol['most_sequences_that_fit']})")
    lines += [f"  {k:<17} {v:8.2f} GiB" for k, v in rol["memory_breakdown_gib"].items()]
    steps_ = f"{p['total_steps']:,} policy steps" if p["total_steps"] is not None else "steps unknown (prompts not counted)"
    lines.append(f"step {st['total']:.1f} s = rollout {st['rollout']:.1f} s + policy {st['policy']:.1f} s; {steps_}")
    lines.append(_time_line(p))
    d = p["disk"]
    lines.append(f"checkpoints: {gib_value_text(d['checkpoint_gib'])} each, {gib_value_text(d['disk_gib'])} on disk ({d['detail']})")
    lines.append("assumptions:")
    lines += [f"  - {a}" for a in p["assumptions"]]
    return "\n".join(lines)
