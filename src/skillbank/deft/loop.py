"""The DEFT loop, stage by stage. Each stage reads what earlier stages recorded in state.json and
writes only under <output_dir>/round_N/<stage>/; state.json records it; log.jsonl narrates it.

round_0/evaluate           the starting model on proxy and benchmark (the baseline, the first "best")
round_N/gaps               failures of the best model so far on the PROXY set (unparseable answers included)
round_N/mine               pool records nearest to the gaps (or random: the control)
round_N/curate             base train set + everything mined so far, deduplicated, never a benchmark item
round_N/train              retrain (from the starting model or the best so far)
round_N/evaluate           every checkpoint on the proxy; the best by the PROXY metric on the benchmark
round_N/decide             adopt only if the benchmark improved (regression guard); stop rule
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

from skillbank import atomic, modelref
from skillbank.deft import rules
from skillbank.deft.sets import ContentIndex, eval_spec_for
from skillbank.deft.state import LoopState
from skillbank.errors import RunError
from skillbank.specification.deft import DeftConfig

Log = Callable[[str], None]


class Loop:
    def __init__(self, config: DeftConfig, inputs: dict[str, Any], state: LoopState, *, log: Log = print, progress: bool = False,
                 rank_stdout: Any = None) -> None:
        self.config = config
        self.sets = inputs["sets"]
        self.train_spec = inputs["train_spec"]
        self.eval_config = inputs["eval_config"]
        self.state = state
        self.log = log
        self.progress = progress
        self.rank_stdout = rank_stdout
        self.out = Path(config.output_dir).resolve()
        self._bench_content: ContentIndex | None = None

    # ---- helpers ----------------------------------------------------------------------------------
    def eval_spec(self, role: str, model: str, results_dir: Path) -> Any:
        return eval_spec_for(self.eval_config, model=model, data=self.sets[role], results_dir=results_dir, source=self.config.eval_config)

    @property
    def best(self) -> dict[str, Any]:
        return self.state.data["best"]

    def rounds(self) -> list[dict[str, Any]]:
        return self.state.data["rounds"]

    def decision_value(self, bench: dict[str, Any]) -> float:
        """What adoption, min_gain and target judge: stop.adopt_on's family accuracy, else the benchmark metric."""
        family = self.config.stop.adopt_on
        return float(accuracies(bench).get(family, 0.0)) if family else float(bench["value"])

    def best_entry(self, r: int, model: str, bench: dict[str, Any], proxy: dict[str, Any]) -> dict[str, Any]:
        return {"round": r, "model": model, "benchmark": self.decision_value(bench), "benchmark_families": accuracies(bench),
                "proxy": proxy["value"], "proxy_results_dir": proxy["results_dir"]}

    def results_of(self, role: str, model: str, results_dir: Path) -> dict[str, Any]:
        from skillbank.evaluation.evaluate import evaluate

        doc = evaluate(self.eval_spec(role, model, results_dir), model_name=model, results_dir=results_dir, progress=self.progress)
        return summarise(doc, results_dir)

    # ---- stages -----------------------------------------------------------------------------------
    def baseline(self, folder: Path, interrupted: bool) -> dict[str, Any]:
        model = self.config.model
        self.log(f"round 0: evaluate the starting model on proxy and benchmark ({model})")
        proxy = self.results_of("proxy", model, folder / "proxy")
        bench = self.results_of("benchmark", model, folder / "benchmark")
        entry = {"round": 0, "model": model, "proxy": proxy, "benchmark": bench, "adopted": True}
        self.state.data["rounds"] = [entry]
        self.state.data["best"] = self.best_entry(0, model, bench, proxy)
        return {"outputs": {"proxy": folder / "proxy", "benchmark": folder / "benchmark"}, "proxy": proxy["value"], "benchmark": bench["value"]}

    def gaps(self, r: int, folder: Path, interrupted: bool) -> dict[str, Any]:
        from skillbank.deft.mining import gap_ids

        proxy = self.sets["proxy"]
        out = folder / "gaps.parquet"
        ids, summary = gap_ids(self.best["proxy_results_dir"], out, proxy, self.eval_spec("proxy", self.best["model"], folder))
        failing = set(ids)
        families = count_families([rec for rec in proxy.records if str(rec.get("id")) in failing])
        self.log(f"round {r}: {len(ids)} gap(s) of {summary['total']} on the proxy set (model of round {self.best['round']}); "
                 f"{summary['unparseable']} unparseable")
        atomic.write_json(folder / "gap_ids.json", ids)
        return {"outputs": {"gaps_parquet": out, "gaps_summary": summary["summary_path"], "gap_ids": folder / "gap_ids.json"},
                "gaps": len(ids), "total": summary["total"], "unparseable": summary["unparseable"], "families": families}

    def used_pool_indices(self, before: int) -> list[int]:
        used: list[int] = []
        for r in range(1, before):
            entry = self.state.stage(r, "mine")
            if entry and entry["status"] == "done":
                used += json.loads(Path(entry["outputs"]["selection"]).read_text(encoding="utf-8"))["pool_indices"]
        return used

    def mine(self, r: int, folder: Path, interrupted: bool) -> dict[str, Any]:
        from skillbank.deft.mining import mine

        ids = json.loads(Path(self.state.stage(r, "gaps")["outputs"]["gap_ids"]).read_text(encoding="utf-8"))
        embed_model = self.config.model if self.config.mining.embed_with == "base" else self.best["model"]
        spec = self.eval_spec("proxy", embed_model, folder)
        result = mine(self.config.mining, pool=self.sets["pool"], proxy=self.sets["proxy"], gap_ids=ids, eval_spec=spec,
                      model=embed_model, used=self.used_pool_indices(r), out=folder, cache_dir=self.out / "embeddings", log=self.log, round_no=r)
        self.log(f"round {r}: mined {result['selected']} pool record(s) ({self.config.mining.strategy}, {result.get('index') or '-'} index) "
                 f"{result['families']}")
        return result

    def curate(self, r: int, folder: Path, interrupted: bool) -> dict[str, Any]:
        from skillbank.deft.curate import curate, whole, write_training_set

        train = self.sets["train"]
        already = [whole(rec, train) for rec in train.records]
        for prev in range(1, r):
            entry = self.state.stage(prev, "curate")
            already += json.loads(Path(entry["outputs"]["added"]).read_text(encoding="utf-8"))
        mined = json.loads(Path(self.state.stage(r, "mine")["outputs"]["mined"]).read_text(encoding="utf-8"))
        if self._bench_content is None:
            bench = self.sets["benchmark"]
            self._bench_content = ContentIndex([bench.video(x) for x in bench.records])
        added, dropped = curate(mined, self.sets["pool"], already=already, benchmark=self.sets["benchmark"],
                                benchmark_content=self._bench_content)
        write_training_set(folder / "added.json", added)
        write_training_set(folder / "train.json", already + added)
        self.log(f"round {r}: curated {len(added)} new record(s) (dropped {dropped}); training set {len(already) + len(added)}")
        return {"outputs": {"added": folder / "added.json", "train_annotations": folder / "train.json"},
                "added": len(added), "dropped": dropped, "train_records": len(already) + len(added), "families": count_families(added)}

    def _merged(self, adapter: str, out: Path, r: int) -> str:
        """The LoRA adapter merged into its base (skillbank export), once per round, in the train spec's dtype."""
        from skillbank.export.run import export
        from skillbank.specification.actions import ExportSpec

        if not (out / "config.json").is_file() or modelref.is_adapter(out):
            export(ExportSpec(source=str(adapter), output_dir=str(out), dtype=self.train_spec.train.param_dtype), overwrite=True)
            self.log(f"round {r}: merged the LoRA adapter {adapter} into {out} (training starts from a whole model)")
        return str(out)

    def train(self, r: int, folder: Path, interrupted: bool) -> dict[str, Any]:
        from skillbank.specification.io import write_spec
        from skillbank.runs import fitting

        start = self.config.model if self.config.retrain.start_from == "base" else self.best["model"]
        if modelref.is_adapter(start):  # a LoRA round exports an adapter; training starts from a whole model
            start = self._merged(start, folder / "start", r)
        spec = self.train_spec.model_copy(deep=True)
        spec.policy.model_name_or_path = start
        spec.custom.train_dataset.annotation_path = self.state.stage(r, "curate")["outputs"]["train_annotations"]
        spec.custom.train_dataset.media_path = str(folder)  # records carry absolute video paths
        spec.train.output_dir = str(folder / "runs")
        spec.train.ckpt.enable_checkpoint = True
        spec.train.ckpt.export_safetensors = True
        spec.results_dir = str(folder)
        spec, fits = fitting.fit_to_data(spec)  # base + mined records: the train spec's batches are ceilings
        for fit in fits:
            self.log(f"round {r}: fitted {fit.line()}")
        spec_path = write_spec(folder / "train.yaml", spec)
        if interrupted:
            still = live_writers(folder / "runs")
            if still:
                raise RunError(f"round {r}: training processes of the interrupted attempt still run (pids {', '.join(map(str, still))}); "
                               "they would write into the same run folder. Stop them (kill PID), then --resume again")
        self.log(f"round {r}: retrain from {start} ({self.config.retrain.backend}){' - resuming the interrupted run' if interrupted else ''}")
        if self.config.retrain.backend == "local":
            from skillbank.training.local.launch import train_local

            result = train_local(spec, spec_path=spec_path, resume=interrupted, log=self.log, stdout=self.rank_stdout)
            run_dir = result["run_dir"]
        else:
            from skillbank.runs import layout
            from skillbank.training.cosmos_rl.launch import train_cosmos_rl

            train_cosmos_rl(spec, spec_path=spec_path, resume=interrupted, dry_run=False, log=self.log)
            run_dir = str(layout.newest_run_dir(spec.train.output_dir))
            result = {"run_dir": run_dir}
        return {"outputs": {"spec": spec_path, "run_dir": run_dir}, "start_model": start, "fitted": [f.to_dict() for f in fits],
                **{k: result.get(k) for k in ("last_step", "first_loss", "last_loss")}}

    def evaluate(self, r: int, folder: Path, interrupted: bool) -> dict[str, Any]:
        from skillbank.evaluation.evaluate import evaluate_run

        run_dir = self.state.stage(r, "train")["outputs"]["run_dir"]
        picked = evaluate_run(run_dir, self.eval_spec("proxy", self.config.model, folder / "proxy"), progress=self.progress)
        model = picked["path"]
        proxy = summarise(json.loads(Path(picked["metrics_json"]).read_text(encoding="utf-8")), Path(picked["results_dir"]))
        bench = self.results_of("benchmark", model, folder / "benchmark")
        self.log(f"round {r}: best checkpoint by proxy: step {picked['step']} (proxy {proxy['value']:.4f}); benchmark {bench['value']:.4f}")
        return {"outputs": {"proxy": folder / "proxy", "best_checkpoint": folder / "proxy" / "best_checkpoint.json",
                            "benchmark": folder / "benchmark"},
                "model": model, "step": picked["step"], "proxy": proxy, "benchmark": bench}

    def decide(self, r: int, folder: Path, interrupted: bool) -> dict[str, Any]:
        ev = self.state.stage(r, "evaluate")["result"]
        best, stop = dict(self.best), self.config.stop
        value = self.decision_value(ev["benchmark"])
        if stop.adopt_on:
            verdict = rules.adopt_on_family(accuracies(ev["benchmark"]), best.get("benchmark_families") or {}, stop.adopt_on,
                                            min_gain=stop.min_gain, max_drop=stop.max_family_drop)
            adopted, why = verdict.adopted, verdict.reason
        else:
            adopted = rules.adopt(value, best["benchmark"], stop.min_gain)
            why = "" if adopted else f"benchmark {value:.4f} <= best {best['benchmark']:.4f} + {stop.min_gain}"
        if adopted:
            self.state.data["best"] = self.best_entry(r, ev["model"], ev["benchmark"], ev["proxy"])
        entry = {"round": r, "model": ev["model"], "step": ev["step"], "proxy": ev["proxy"], "benchmark": ev["benchmark"], "adopted": adopted,
                 "gaps": self.state.stage(r, "gaps")["result"], "mined": _without(self.state.stage(r, "mine")["result"], "pool_indices"),
                 "curated": self.state.stage(r, "curate")["result"], "train": self.state.stage(r, "train")["result"],
                 "decided_on": {"on": f"family {stop.adopt_on}" if stop.adopt_on else "benchmark", "value": value, "why_not": why}}
        self.state.data["rounds"] = [x for x in self.rounds() if x["round"] != r] + [entry]
        self.log(f"round {r}: {'adopted' if adopted else f'not adopted ({why})'}; best so far: round {self.best['round']} ({self.best['benchmark']:.4f}"
                 + (f", {stop.adopt_on}" if stop.adopt_on else "") + ")")
        return {"adopted": adopted, "benchmark": ev["benchmark"]["value"], "decided_on": value, "best_round": self.best["round"]}

    # ---- the loop ---------------------------------------------------------------------------------
    def stop_decision(self, rounds_done: int, gaps: int | None = None, pool_left: int | None = None) -> rules.StopDecision:
        s = self.config.stop
        adopted = [x["adopted"] for x in self.rounds() if x["round"] > 0]
        return rules.should_stop(best=self.best["benchmark"], rounds_done=rounds_done, adopted=adopted, target=s.target,
                                 max_rounds=s.max_rounds, patience=s.patience, gaps=gaps, pool_left=pool_left)

    def run(self) -> dict[str, Any]:
        from skillbank.deft.report import write_report

        started = time.perf_counter()
        st = self.state
        st.run_stage(0, "evaluate", self.baseline)
        r = 1
        while True:
            decision = self.stop_decision(r - 1)
            if decision.stop:
                break
            gaps = st.run_stage(r, "gaps", lambda f, i, r=r: self.gaps(r, f, i))
            decision = self.stop_decision(r - 1, gaps=gaps["gaps"])
            if decision.stop:
                break
            mined = st.run_stage(r, "mine", lambda f, i, r=r: self.mine(r, f, i))
            decision = self.stop_decision(r - 1, pool_left=mined["selected"])
            if decision.stop:
                break
            for name, fn in (("curate", self.curate), ("train", self.train), ("evaluate", self.evaluate), ("decide", self.decide)):
                st.run_stage(r, name, lambda f, i, fn=fn, r=r: fn(r, f, i))
            write_report(st, self.out)
            r += 1
        st.data["status"] = "done"
        st.data["stop"] = {"reason": decision.reason, "after_round": r - 1, "best": self.best}
        st.save()
        st.log("stop", reason=decision.reason, best_round=self.best["round"], best_model=self.best["model"])
        self.log(f"stopped: {decision.reason}; best model: round {self.best['round']}, {self.best['model']} "
                 f"(benchmark {self.best['benchmark']:.4f})")
        paths = write_report(st, self.out)
        return {"ok": True, "stop_reason": decision.reason, "best": self.best, "rounds": len(self.rounds()) - 1,
                "report": {k: str(v) for k, v in paths.items()}, "state": str(self.out / "state.json"),
                "wall_s": round(time.perf_counter() - started, 1)}


def live_writers(folder: Path) -> list[int]:
    """Pids of processes (other than this one) whose command line names `folder`: training ranks that
    outlived a killed loop (torchrun starts each rank in a session of its own, so a SIGKILL to the
    loop's process group does not reach them)."""
    import os

    import psutil

    needle, me, found = str(folder), os.getpid(), []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            cmdline = proc.info["cmdline"] or []
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if proc.info["pid"] != me and any(needle in part for part in cmdline):
            found.append(proc.info["pid"])
    return sorted(found)


def summarise(doc: dict[str, Any], results_dir: Path) -> dict[str, Any]:
    """What a round keeps of a metrics.json: the primary metric, accuracy, per-family accuracy."""
    primary = doc.get("primary_metric") or {}
    if primary.get("value") is None:
        raise RunError(f"{results_dir}: metrics.json has no primary_metric value")
    families = {name: {"accuracy": m.get("accuracy"), "total": m.get("total")} for name, m in (doc.get("families") or {}).items()}
    return {"metric": primary.get("name"), "value": float(primary["value"]), "accuracy": doc.get("accuracy"),
            "families": families, "results_dir": str(results_dir), "total": doc.get("num_samples") or doc.get("total")}


def accuracies(summary: dict[str, Any]) -> dict[str, float]:
    """{family: accuracy} of a round's benchmark (or proxy) summary."""
    return {name: float(m.get("accuracy") or 0.0) for name, m in (summary.get("families") or {}).items()}


def count_families(records: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for rec in records:
        name = str(rec.get("family") or "-")
        counts[name] = counts.get(name, 0) + 1
    return dict(sorted(counts.items()))


def _without(d: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k != key}
