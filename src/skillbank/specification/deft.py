"""The DEFT loop's config (`skillbank deft --config FILE`): which model, which sets, how to mine,
how to retrain and when to stop. Every rule of the loop's input lives here or in deft.preflight.

The three sets have three roles and never swap them:
- pool: labelled LLaVA records the loop may add to training (mined from);
- proxy: where gaps are found and the round's best checkpoint is picked;
- benchmark: frozen; decides whether a round is adopted. Never mined, never trained on, never used
  to pick a checkpoint.
Empty paths are the template's placeholders; `skillbank deft` (preflight) names each one still empty.
"""

from __future__ import annotations

from typing import Literal

from skillbank.specification.base import Section
from skillbank.specification.meta import ModelRefStr, PathStr, param
from skillbank.specification.pathmap import PathsSpec


class DeftSetSpec(Section):
    annotation_path: PathStr = param("", "LLaVA annotations.json (id, video, video_fps, conversations).")
    media_dir: PathStr = param("", "Folder the records' video paths are relative to (empty: the annotation file's folder).")


class MiningSpec(Section):
    strategy: Literal["knn", "random"] = param(
        "knn", "knn: nearest pool records of each proxy gap; random: a random pool selection of the same size (the control).")
    embedder: str = param(
        "model", "model: mean-pooled last hidden states of the model being trained over the prompt (video + question); "
        "or module:function, a hook (records, media_dir) -> float32 array [n, d] (e.g. Cosmos-Embed where you have it).")
    embed_with: Literal["base", "adopted"] = param(
        "base", "Which model embeds (embedder model): base embeds the pool once per run (cached); adopted re-embeds it "
        "with each round's adopted model (follows the model, costs one pass over the pool per adoption).")
    k: int = param(8, "Neighbours searched per gap.", ge=1, le=1024)
    records_per_round: int = param(64, "Pool records added to training per round (at most).", ge=1)
    exact_max: int = param(
        100_000, "Pools up to this size use an exact inner-product index; larger ones an IVF index, trained once "
        "and cached (crossover measured by benchmarks/deft_mining.py; see references/mining.md).", ge=1)
    nprobe: int = param(16, "IVF lists probed per query (approximate index only).", ge=1)
    batch_size: int = param(16, "Records per forward pass when embedding.", ge=1)
    seed: int = param(0, "Seed of the random strategy and of IVF training.", ge=0)


class RetrainSpec(Section):
    start_from: Literal["base", "best"] = param(
        "best", "base: each round trains the starting model on base train set + everything mined so far; "
        "best: it continues from the best model so far on the same set.")
    backend: Literal["local", "cosmos-rl"] = param("local", "Training backend (local: torchrun + FSDP2 here; cosmos-rl: GPUs).")


class StopSpec(Section):
    target: float | None = param(None, "Stop when the benchmark metric reaches this value (null: no target).", ge=0, le=1)
    max_rounds: int = param(3, "Rounds of mine -> retrain -> evaluate at most.", ge=1, le=100)
    min_gain: float = param(0.0, "A round is adopted only when it beats the best benchmark metric by more than this.", ge=0, le=1)
    patience: int = param(1, "Stop after this many rounds in a row that were not adopted.", ge=1)
    adopt_on: str | None = param(
        None, "A benchmark family (its records' `family`): rounds are adopted, and target / min_gain judged, on that family's "
        "benchmark accuracy instead of the overall metric, while no other family may fall by more than max_family_drop "
        "(null: the overall metric decides).")
    max_family_drop: float = param(
        0.02, "With adopt_on: the most any other family's benchmark accuracy may fall below the best model's for a round to be "
        "adopted (absolute; 0.02 is two items of a 100-item family; 0 forbids any drop).", ge=0, le=1)


class DeftConfig(Section):
    """DEFT loop config of tao-run-deft: model, pool, proxy, frozen benchmark, mining, retraining, stop rule."""

    model: ModelRefStr = param("", "Starting model: an HF folder, a run's safetensors/step_N folder, hf_model://owner/repo or an HF id.", popular=True)
    pool: DeftSetSpec = param(default_factory=DeftSetSpec, description="Training pool: labelled records mining adds from.")
    proxy: DeftSetSpec = param(default_factory=DeftSetSpec, description="Proxy set: where gaps are found and checkpoints are picked.")
    benchmark: DeftSetSpec = param(default_factory=DeftSetSpec, description="Frozen benchmark: decides adoption; never mined, trained on or used to pick a checkpoint.")
    train_spec: PathStr = param("", "Base train spec (YAML from `skillbank spec --action train`): its train set, steps and optimizer are every round's.", popular=True)
    eval_config: PathStr = param("", "Evaluate config (TOML or YAML): vision, generation, metric and system prompt of every evaluation; its dataset is replaced per set.", popular=True)
    mining: MiningSpec = param(default_factory=MiningSpec, description="Embedding and nearest-neighbour mining.")
    retrain: RetrainSpec = param(default_factory=RetrainSpec, description="How each round retrains.")
    stop: StopSpec = param(default_factory=StopSpec, description="Stop rule.")
    output_dir: PathStr = param("./results/deft", "Run folder: state.json, log.jsonl, round_N/<stage>/..., report.html; a DEFT job's folder: jobs/<id>/.")
    paths: PathsSpec = param(default_factory=PathsSpec, description="The path map this config was written with (`skillbank deft init --path-map`): "
                             "it names the node's paths; applied where its LOCAL folders exist.")

