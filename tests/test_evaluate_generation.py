"""How evaluate generates (issue 14 items 1, 5, 7): answer type and its default prompts per model family,
the seed's generation settings reaching `generate`, retries of unscorable answers, the optional vLLM
engine, and the padded-batch attention mask behind batched evaluation's speed.

Real tiny Qwen2.5-VL / Qwen3-VL models (conftest) and demo clips throughout; `model.generate` is
wrapped by a spy that records its keywords and calls the real method. The one test double is vLLM's
`LLM` / `SamplingParams` (vllm needs a GPU and is not installed here), injected through sys.modules.
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from skillbank.cli import main
from test_evaluate import config_for, force_answer, run_cli, write_toml


@pytest.fixture(scope="module")
def setup(tiny_model_dir, demo_dataset_dir):
    data = demo_dataset_dir / "val"
    return {"model": Path(tiny_model_dir), "data": data, "records": json.loads((data / "annotations.json").read_text())}


@pytest.fixture
def generate_calls(monkeypatch):
    """Every model.generate call of an evaluate run: {kwargs, prompts (decoded input_ids)}; the real generate runs."""
    from skillbank.evaluation import model as model_module

    calls: list[dict] = []
    real_load = model_module.load_model

    def load_and_spy(*args, **kwargs):
        loaded = real_load(*args, **kwargs)
        real_generate = loaded.model.generate

        def spy(**kw):
            prompts = loaded.processor.tokenizer.batch_decode(kw["input_ids"], skip_special_tokens=False)
            calls.append({"kwargs": {k: v for k, v in kw.items() if k not in ("input_ids", "pixel_values_videos")}, "prompts": prompts,
                          "rows": kw["input_ids"].shape[0]})
            return real_generate(**kw)

        loaded.model.generate = spy
        return loaded

    monkeypatch.setattr(model_module, "load_model", load_and_spy)
    return calls


# ---- the spec ----------------------------------------------------------------------------------


SEED_CONFIG = {  # the seed's evaluation config (cosmos-reason2 examples/benchmark)
    "evaluation": {"answer_type": "reasoning", "seed": 1},
    "vision": {"fps": 4.0},
    "generation": {"max_retries": 10, "max_tokens": 1024, "temperature": 0.6, "repetition_penalty": 1.0,
                   "presence_penalty": 0.0, "frequency_penalty": 0.0},
}


def test_seed_settings_round_trip_and_nulls_follow_the_answer_type(tmp_path):
    from skillbank.specification.evaluate import EvaluateSpec
    from skillbank.specification.io import load_spec

    toml = write_toml(tmp_path / "seed.toml", **SEED_CONFIG)
    spec = load_spec(str(toml), EvaluateSpec)
    assert EvaluateSpec.model_validate(spec.model_dump()) == spec
    assert spec.generation.resolved("reasoning") == {"max_tokens": 1024, "temperature": 0.6, "top_p": 0.95, "top_k": 0,
                                                      "repetition_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0,
                                                      "max_retries": 10}
    short = EvaluateSpec()  # nulls: short answers decode greedily in a few tokens, no retries, the short prompt
    assert short.evaluation.answer_type is None and short.dataset.system_prompt is None  # null: the model's recipe, else short
    assert (short.vision.fps, short.vision.num_frames, short.evaluation.prompt_family) == (None, None, "auto")
    assert short.generation.resolved("short") | {"top_k": 0} == {"max_tokens": 16, "temperature": 0.0, "top_p": 1.0, "top_k": 0,
                                                                 "repetition_penalty": 1.0, "presence_penalty": 0.0,
                                                                 "frequency_penalty": 0.0, "max_retries": 0}
    assert EvaluateSpec.model_validate({"evaluation": {"answer_type": "reasoning"}}).generation.resolved("reasoning")["max_tokens"] == 1024


def test_bad_generation_settings_name_their_key(tmp_path, capsys):
    for section, key in ((("evaluation", {"answer_type": "long"}), "evaluation.answer_type"),
                         (("generation", {"presence_penalty": 3.0}), "generation.presence_penalty"),
                         (("evaluation", {"engine": "vllm"}), "evaluation.engine")):
        extra = {"num_gpus": 0, "model": {"enable_lora": True, "base_model_path": "b"}} if key == "evaluation.engine" else {}
        toml = write_toml(tmp_path / "bad.toml", **{section[0]: section[1]}, **extra)
        code, doc = run_cli(capsys, "evaluate", "--config", str(toml))
        assert code == 2 and key in json.dumps(doc["error"]), doc


def test_training_system_prompt_still_flows_to_evaluate_run():
    from skillbank.evaluation.evaluate import spec_for_training

    custom = {"val_dataset": {"annotation_path": "val.json", "media_path": "v"}, "vision": {"fps": 2.0}}
    assert spec_for_training({**custom, "system_prompt": "Answer briefly."}, results_dir="r", source="s").dataset.system_prompt == "Answer briefly."
    assert spec_for_training(custom, results_dir="r", source="s").dataset.system_prompt is None  # the answer type's default
    rl = spec_for_training({**custom, "answer_type": "reasoning", "task_type": "mcq", "system_prompt": "Think, then answer."},
                           results_dir="r", source="s")  # an RL run's custom table: evaluated as it was trained
    assert (rl.evaluation.answer_type, rl.task.type, rl.dataset.system_prompt) == ("reasoning", "mcq", "Think, then answer.")


# ---- prompts and settings reaching generate -------------------------------------------------------


@pytest.mark.parametrize("family", ["qwen2_5_vl", "qwen3_vl"])
def test_reasoning_default_prompt_per_family(family, setup, tiny_qwen3_model_dir, tmp_path, capsys, generate_calls):
    from skillbank.specification.evaluate import COSMOS_REASON1_REASONING, COSMOS_REASON2_REASONING, SHORT_SYSTEM_PROMPT

    model = setup["model"] if family == "qwen2_5_vl" else tiny_qwen3_model_dir
    config = config_for(setup, tmp_path / "out", model, evaluation={"answer_type": "reasoning", "limit": 2},
                        generation={"max_tokens": 2, "max_retries": 0})
    code, doc = run_cli(capsys, "evaluate", "--config", str(write_toml(tmp_path / "r.toml", **config)), "--quiet")
    assert code == 0 and doc["generation"]["model_type"] == family
    prompt = generate_calls[0]["prompts"][0]
    question = setup["records"][0]["conversations"][0]["value"].split("\n", 1)[1]
    if family == "qwen2_5_vl":  # Cosmos-Reason1: the reasoning system prompt, the question as is
        assert f"<|im_start|>system\n{COSMOS_REASON1_REASONING}<|im_end|>" in prompt
        assert f"{question}<|im_end|>" in prompt
    else:  # Cosmos-Reason2: its usual system prompt; the reasoning instruction follows the question
        assert "<|im_start|>system\nYou are a helpful assistant.<|im_end|>" in prompt
        assert f"{question}\n\n{COSMOS_REASON2_REASONING}<|im_end|>" in prompt
    assert SHORT_SYSTEM_PROMPT not in prompt
    assert doc["generation"]["temperature"] == 0.6 and doc["generation"]["top_p"] == 0.95  # the reasoning defaults
    assert setup["records"][0]["conversations"][0]["value"].endswith(question)  # the input records are not modified


def test_generation_settings_reach_generate(setup, tmp_path, capsys, generate_calls):
    from skillbank.evaluation.generate import PresenceFrequencyPenalty

    config = config_for(setup, tmp_path / "out", setup["model"], evaluation={"limit": 3, "batch_size": 3, "seed": 7},
                        generation={"max_tokens": 3, "temperature": 0.7, "top_p": 0.9, "top_k": 5, "repetition_penalty": 1.1,
                                    "presence_penalty": 0.5, "frequency_penalty": 0.25})
    code, doc = run_cli(capsys, "evaluate", "--config", str(write_toml(tmp_path / "g.toml", **config)), "--quiet")
    assert code == 0 and len(generate_calls) == 1
    kw = generate_calls[0]["kwargs"]
    assert {k: kw[k] for k in ("do_sample", "temperature", "top_p", "top_k", "repetition_penalty", "max_new_tokens")} == {
        "do_sample": True, "temperature": 0.7, "top_p": 0.9, "top_k": 5, "repetition_penalty": 1.1, "max_new_tokens": 3}
    (penalty,) = kw["logits_processor"]
    assert isinstance(penalty, PresenceFrequencyPenalty)
    assert (penalty.presence, penalty.frequency, penalty.prompt_length) == (0.5, 0.25, kw["attention_mask"].shape[1])
    assert doc["generation"]["seed"] == 7 and doc["generation"]["presence_penalty"] == 0.5

    generate_calls.clear()  # the short defaults: greedy, 16 tokens, no penalty processor
    config = config_for(setup, tmp_path / "out2", setup["model"], evaluation={"limit": 2}, generation={})
    config["generation"] = {}
    code, _ = run_cli(capsys, "evaluate", "--config", str(write_toml(tmp_path / "d.toml", **config)), "--quiet")
    kw = generate_calls[0]["kwargs"]
    assert code == 0 and kw["do_sample"] is False and kw["max_new_tokens"] == 16 and "logits_processor" not in kw


def test_presence_and_frequency_penalties_count_only_generated_tokens():
    import torch

    from skillbank.evaluation.generate import PresenceFrequencyPenalty

    ids = torch.tensor([[5, 6, 7, 7, 8]])  # prompt 5 6, generated 7 7 8
    scores = PresenceFrequencyPenalty(0.5, 0.25, prompt_length=2)(ids, torch.zeros(1, 10))
    expected = torch.zeros(1, 10)
    expected[0, 7], expected[0, 8] = -(0.5 + 2 * 0.25), -(0.5 + 0.25)  # OpenAI: presence once, frequency per occurrence
    assert torch.equal(scores, expected)


@pytest.mark.parametrize("family", ["cosmos-reason1", "cosmos-reason2"])
def test_a_custom_prompt_keeps_the_chosen_familys_reasoning_instruction(family, setup, tmp_path, capsys, generate_calls):
    """evaluation.prompt_family chooses the instruction (a Qwen2.5-VL checkpoint asked as Cosmos-Reason2,
    a warning), and a custom system prompt no longer drops it: it follows the question."""
    from skillbank.specification.evaluate import COSMOS_REASON1_REASONING, COSMOS_REASON2_REASONING

    config = config_for(setup, tmp_path / "out", setup["model"], dataset={"system_prompt": "Be careful."},
                        evaluation={"answer_type": "reasoning", "limit": 1, "prompt_family": family},
                        generation={"max_tokens": 2, "max_retries": 0})
    code, doc = run_cli(capsys, "evaluate", "--config", str(write_toml(tmp_path / "r.toml", **config)), "--quiet")
    prompt = generate_calls[0]["prompts"][0]
    instruction = COSMOS_REASON1_REASONING if family == "cosmos-reason1" else COSMOS_REASON2_REASONING
    assert code == 0 and "<|im_start|>system\nBe careful.<|im_end|>" in prompt and f"\n\n{instruction}<|im_end|>" in prompt
    assert doc["generation"]["prompt_family"] == family and doc["generation"]["question_suffix"] == f"\n\n{instruction}"
    foreign = [w for w in doc["warnings"] if "prompt_family is cosmos-reason2" in w]
    assert bool(foreign) == (family == "cosmos-reason2")  # the checkpoint is Qwen2.5-VL: Cosmos-Reason1's family


# ---- retries -------------------------------------------------------------------------------------


def test_retries_regenerate_exactly_the_flagged_rows():
    """The retry loop over H4's unscorable(): pass k asks the engine for the still-flagged rows only,
    with the seed's escalation. The engine here is a script of responses (our Engine interface)."""
    from skillbank.scoring.answers import unscorable
    from skillbank.evaluation.generate import GenerationSettings, generate_with_retries

    truths = ["yes", "no", "yes", "no"]
    script = {  # pass -> responses of the rows it is asked for
        0: {0: "<think>a</think> yes", 1: "<think>b", 2: "", 3: "<answer>no</answer>"},
        1: {1: "<think>b</think> no", 2: "<think>c"},
        2: {2: "<answer>maybe</answer>"},
        3: {2: "<think>c</think> yes"},
    }
    calls = []

    def engine(indices, settings):
        calls.append((indices, settings))
        return [script[len(calls) - 1][i] for i in indices]

    def flagged(responses):
        return unscorable([{"gt": g, "response": r} for g, r in zip(truths, responses)], "", "reasoning")

    base = GenerationSettings(max_new_tokens=1024, temperature=0.6, top_p=0.95, seed=1)
    responses, passes = generate_with_retries(engine, 4, base, max_retries=10, unscorable=flagged)
    # pass 2 fixes nothing: the retries stop there (max_retries is a ceiling, not a count)
    assert [c[0] for c in calls] == [[0, 1, 2, 3], [1, 2], [2]]
    assert [(s.max_new_tokens, s.temperature, s.seed) for _, s in calls[1:]] == [(1280, 0.65, 2), (1536, 0.7, 3)]
    assert responses == ["<think>a</think> yes", "<think>b</think> no", "", "<answer>no</answer>"]
    assert [(p["regenerated"], p["fixed"]) for p in passes] == [(2, 1), (1, 0)]

    calls.clear()  # max_retries 0: one pass; a row never fixed keeps its first response
    responses, passes = generate_with_retries(engine, 4, base, max_retries=0, unscorable=flagged)
    assert len(calls) == 1 and passes == [] and responses[2] == ""


def test_evaluate_retries_unscorable_answers_with_the_real_model(setup, tmp_path, capsys, generate_calls):
    """A model that answers "yes" without <think>/<answer> in reasoning mode: every row is unscorable,
    so the first retry pass regenerates all of them, with more tokens and a higher temperature; it fixes
    none, so the retries stop there (of max_retries 2)."""
    model = force_answer(setup["model"], tmp_path / "yes", "yes")
    config = config_for(setup, tmp_path / "out", model, evaluation={"answer_type": "reasoning", "limit": 3, "batch_size": 3},
                        generation={"max_tokens": 4, "max_retries": 2})
    code, doc = run_cli(capsys, "evaluate", "--config", str(write_toml(tmp_path / "r.toml", **config)), "--quiet")
    assert code == 0
    assert [(c["rows"], c["kwargs"]["max_new_tokens"], c["kwargs"]["temperature"]) for c in generate_calls] == [
        (3, 4, 0.6), (3, 260, 0.65)]
    assert [(p["pass"], p["regenerated"], p["fixed"]) for p in doc["generation"]["retries"]] == [(1, 3, 0)]
    assert doc["generation"]["unscorable"] == 3


# ---- the vLLM engine (a double: vllm needs a GPU) ---------------------------------------------------


class FakeVllm:
    """Stands in for the vllm module: records LLM(...) and SamplingParams(...) keywords and every prompt;
    answers the first prompt's first pass with nothing (so it is retried), everything else with a reasoned yes."""

    def __init__(self) -> None:
        self.llm_kwargs: dict = {}
        self.sampling: list[dict] = []
        self.prompts: list[list[dict]] = []
        fake = self

        class LLM:
            def __init__(self, **kwargs):
                fake.llm_kwargs = kwargs

            def generate(self, prompts, params, use_tqdm=True):
                fake.prompts.append(prompts)
                first = len(fake.prompts) == 1
                texts = ["" if first and i == 0 else "<think>\nthe ball\n</think>\n\nyes" for i in range(len(prompts))]
                return [types.SimpleNamespace(outputs=[types.SimpleNamespace(text=t)]) for t in texts]

        class SamplingParams:
            def __init__(self, **kwargs):
                fake.sampling.append(kwargs)

        self.module = types.ModuleType("vllm")
        self.module.LLM, self.module.SamplingParams = LLM, SamplingParams


def test_vllm_engine_through_a_double(setup, tiny_qwen3_model_dir, tmp_path, capsys, monkeypatch):
    """vLLM cannot run here (no GPU, not installed): a double of vllm.LLM / SamplingParams checks what the
    engine passes and that results.json / metrics.json come out as with the transformers engine."""
    import numpy as np
    from transformers import AutoTokenizer

    from skillbank.specification.evaluate import COSMOS_REASON2_REASONING

    model = force_answer(tiny_qwen3_model_dir, tmp_path / "q3", "yes")
    base = config_for(setup, tmp_path / "hf", model, evaluation={"answer_type": "reasoning", "limit": 3, "batch_size": 3},
                      generation={"max_tokens": 4, "max_retries": 0})
    code, reference = run_cli(capsys, "evaluate", "--config", str(write_toml(tmp_path / "hf.toml", **base)), "--quiet")
    assert code == 0

    fake = FakeVllm()
    monkeypatch.setitem(sys.modules, "vllm", fake.module)
    config = config_for(setup, tmp_path / "vllm", model, num_gpus=1, evaluation={"answer_type": "reasoning", "engine": "vllm", "limit": 3},
                        generation={"max_retries": 2})
    code, doc = run_cli(capsys, "evaluate", "--config", str(write_toml(tmp_path / "v.toml", **config)), "--quiet")
    assert code == 0, doc

    assert fake.llm_kwargs == {"model": str(model), "tokenizer": str(model), "dtype": "auto", "tensor_parallel_size": 1, "seed": 1,
                               "limit_mm_per_prompt": {"video": 1, "image": 0}}
    eos = AutoTokenizer.from_pretrained(model).eos_token_id
    assert fake.sampling[0] == {"max_tokens": 4, "temperature": 0.6, "top_p": 0.95, "top_k": -1, "repetition_penalty": 1.0,
                                "presence_penalty": 0.0, "frequency_penalty": 0.0, "seed": 1, "stop_token_ids": [eos]}
    assert fake.sampling[1] == {**fake.sampling[0], "max_tokens": 260, "temperature": 0.65, "seed": 2}  # the retry of record 0
    assert [len(p) for p in fake.prompts] == [3, 1]
    first = fake.prompts[0][0]
    assert first["prompt"].endswith(f"\n\n{COSMOS_REASON2_REASONING}<|im_end|>\n<|im_start|>assistant\n")
    frames, meta = first["multi_modal_data"]["video"]  # Qwen3-VL: frames with their metadata
    assert isinstance(frames, np.ndarray) and frames.dtype == np.uint8 and frames.shape[-1] == 3
    assert meta["frames_indices"] and len(meta["frames_indices"]) == frames.shape[0]
    assert first["mm_processor_kwargs"]["do_sample_frames"] is False and "longest_edge" in first["mm_processor_kwargs"]["size"]

    rows, ref_rows = (json.loads((tmp_path / d / "results.json").read_text()) for d in ("vllm", "hf"))
    assert [set(r) for r in rows] == [set(r) for r in ref_rows]
    assert [r["response"] for r in rows] == ["<think>\nthe ball\n</think>\n\nyes"] * 3
    assert set(doc) == set(reference) and doc["generation"]["engine"] == "vllm"
    assert doc["generation"]["retries"] == [{"pass": 1, "regenerated": 1, "fixed": 1, "max_new_tokens": 260, "temperature": 0.65}]


def test_vllm_engine_without_vllm_is_an_input_error(setup, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm raises ImportError
    config = config_for(setup, tmp_path / "out", setup["model"], num_gpus=1, evaluation={"engine": "vllm", "limit": 1})
    code, doc = run_cli(capsys, "evaluate", "--config", str(write_toml(tmp_path / "v.toml", **config)), "--quiet")
    assert code == 2 and "vllm is not installed" in doc["error"]["message"]


# ---- the padded-batch mask -------------------------------------------------------------------------


def test_padded_causal_mask_is_the_mask_transformers_builds():
    import torch
    from transformers import masking_utils as mu

    from skillbank.compat.padded_causal_mask import padded_causal_mask

    g = torch.Generator().manual_seed(0)
    for batch, q, kv, offset in [(4, 12, 12, 0), (32, 1, 90, 0), (3, 5, 12, 0), (2, 1, 20, 3), (5, 7, 7, 0)]:
        mask = torch.ones(batch, kv + offset, dtype=torch.bool)
        for b in range(batch):
            mask[b, : int(torch.randint(0, 5, (), generator=g))] = False  # left padding
        position = torch.arange(kv + offset - q, kv + offset)
        theirs = mu.sdpa_mask_recent_torch(batch, position, kv, offset, attention_mask=mask)
        ours = padded_causal_mask(batch, position, kv, offset, mask_function=mu.causal_mask_function, attention_mask=mask)
        assert (theirs is None and ours is None) or torch.equal(theirs, ours)
    window = mu.sliding_window_causal_mask_function(3)  # anything but plain causal goes to transformers unchanged
    position, padded = torch.arange(6), torch.tensor([[False, True, True, True, True, True]] * 2)
    assert torch.equal(padded_causal_mask(2, position, 6, mask_function=window, attention_mask=padded),
                       mu.sdpa_mask_recent_torch(2, position, 6, mask_function=window, attention_mask=padded))


@pytest.mark.parametrize("family", ["qwen2_5_vl", "qwen3_vl"])
def test_batched_answers_equal_one_at_a_time(family, setup, tiny_qwen3_model_dir):
    from skillbank.data.examples import VisionSettings
    from skillbank.evaluation.generate import GenerationSettings, generate_answers
    from skillbank.data.prompts import PromptBuilder
    from skillbank.evaluation.model import load_model

    loaded = load_model(str(setup["model"] if family == "qwen2_5_vl" else tiny_qwen3_model_dir), num_gpus=0)
    builder = PromptBuilder(loaded.processor, vision=VisionSettings(fps=4.0), system_prompt="Answer briefly.", media_path=setup["data"])
    records = setup["records"][:6]  # questions of different lengths: the batch is left-padded
    run = lambda size: generate_answers(loaded.model, loaded.processor, builder, records, device=loaded.device, batch_size=size,
                                        settings=GenerationSettings(max_new_tokens=6), progress=False)
    assert len({builder(r)["input_ids"].shape[0] for r in records}) > 1
    assert run(6) == run(1)


def test_decoding_converts_only_the_sampled_frames(setup):
    """decode_video (one reformatter per clip) gives PyAV's pixels, and with pick=... exactly the picked
    frames of a full decode (batched evaluation's prompts and training examples decode through it)."""
    import torch

    from skillbank.data import video

    import av
    import numpy as np

    path = setup["data"] / setup["records"][0]["video"]
    full, meta = video.decode_video(path)
    with av.open(str(path)) as container:  # PyAV's own per-frame conversion gives the same pixels
        plain = [frame.to_ndarray(format="rgb24") for frame in container.decode(container.streams.video[0])]
    assert torch.equal(full, torch.from_numpy(np.stack(plain)).permute(0, 3, 1, 2))
    picked, picked_meta = video.decode_video(path, lambda total, fps: video.sample_indices(total, fps, fps=2.0))
    indices = video.sample_indices(meta["total_num_frames"], meta["fps"], fps=2.0)
    assert len(indices) < full.shape[0] and torch.equal(picked, full[indices]) and picked_meta == meta
