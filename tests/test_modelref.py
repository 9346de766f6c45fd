"""skillbank.modelref: one parser for model references, one download with one error mapping."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT
from skillbank import modelref
from skillbank.errors import InputError, RunError

MODEL_KEY = "policy.model_name_or_path"


def test_local_folder(tmp_path: Path) -> None:
    ref = modelref.parse(str(tmp_path))
    assert (ref.kind, ref.path, ref.repo) == ("local", tmp_path, None)


def test_relative_folder_is_taken_from_the_base(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    ref = modelref.parse("./model", base=tmp_path)
    assert (ref.kind, ref.path) == ("local", tmp_path / "model")


def test_hf_scheme_names_a_hub_repo() -> None:
    ref = modelref.parse("hf_model://nvidia/Cosmos-Reason2-8B")
    assert (ref.kind, ref.repo, ref.path) == ("hub", "nvidia/Cosmos-Reason2-8B", None)


def test_bare_owner_repo_is_a_hub_repo(tmp_path: Path) -> None:
    ref = modelref.parse("Qwen/Qwen3-VL-2B-Instruct", base=tmp_path)
    assert (ref.kind, ref.repo) == ("hub", "Qwen/Qwen3-VL-2B-Instruct")


def test_existing_path_wins_over_the_hub_id_it_spells(tmp_path: Path) -> None:
    (tmp_path / "owner" / "repo").mkdir(parents=True)
    assert modelref.parse("owner/repo", base=tmp_path).kind == "local"


def test_missing_relative_path_is_invalid_and_still_a_path(tmp_path: Path) -> None:
    ref = modelref.parse("./no-such-model", base=tmp_path)
    assert ref.kind == "invalid" and "does not exist" in ref.problem
    assert ref.path == tmp_path / "no-such-model"  # a path the training machine may have


@pytest.mark.parametrize("value", ["hf_model://just-a-name", "hf_model://a/b/c", "hf_model://", "hf_model://-bad/repo"])
def test_hf_scheme_with_a_bad_id_is_invalid(value: str) -> None:
    ref = modelref.parse(value)
    assert ref.kind == "invalid" and "expected owner/repo" in ref.problem and ref.path is None


@pytest.mark.parametrize("value", ["", "   "])
def test_empty_is_invalid(value: str) -> None:
    ref = modelref.parse(value)
    assert (ref.kind, ref.problem) == ("invalid", "is empty")


def test_folder_problem(tmp_path: Path) -> None:
    assert "not a model folder (no config.json)" in modelref.folder_problem(tmp_path)
    (tmp_path / "adapter_config.json").write_text("{}")
    assert modelref.folder_problem(tmp_path, ("config.json", "adapter_config.json")) == ""
    assert "is a file" in modelref.folder_problem(tmp_path / "adapter_config.json")


# The hub cannot be reached offline: each test puts a stand-in for huggingface_hub.snapshot_download
# that raises what the hub client raises for that case.


def _hub_raises(monkeypatch: pytest.MonkeyPatch, exc: Exception) -> None:
    import huggingface_hub

    def snapshot_download(repo_id: str, **kwargs: object) -> str:
        raise exc

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)


def test_gated_repo_is_an_input_error_with_a_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub.errors import GatedRepoError

    _hub_raises(monkeypatch, GatedRepoError("403 gated"))
    with pytest.raises(InputError) as info:
        modelref.download("nvidia/Cosmos-Reason2-8B", where=MODEL_KEY)
    assert info.value.where == MODEL_KEY and "gated" in info.value.message and "HF_TOKEN" in info.value.fix


def test_missing_repo_is_an_input_error_with_a_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub.errors import RepositoryNotFoundError

    _hub_raises(monkeypatch, RepositoryNotFoundError("404"))
    with pytest.raises(InputError) as info:
        modelref.download("owner/no-such-repo", where="model.model_name")
    assert info.value.where == "model.model_name" and "not found" in info.value.message and "check the id" in info.value.fix


def test_network_failure_is_a_run_error_without_the_token(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "hf_" + "s3cr3t" * 5
    monkeypatch.setenv("HF_TOKEN", secret)
    _hub_raises(monkeypatch, OSError(f"connection reset (token {secret})"))
    with pytest.raises(RunError) as info:
        modelref.download("owner/repo", where=MODEL_KEY)
    assert "owner/repo" in str(info.value) and secret not in str(info.value)


def test_token_is_read_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub

    seen = {}
    monkeypatch.setenv("HF_TOKEN", "hf_token_value")
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda repo_id, token=None: seen.update(token=token) or "/snap")
    assert modelref.download("owner/repo", where=MODEL_KEY) == "/snap" and seen == {"token": "hf_token_value"}


def test_parsing_imports_nothing_heavy() -> None:
    probe = (
        "import sys; from skillbank import modelref; modelref.parse('hf_model://a/b'); "
        "print(' '.join(m for m in ('huggingface_hub', 'torch', 'transformers') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "", proc.stderr
