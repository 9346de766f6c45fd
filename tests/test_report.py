"""`skillbank report` on a real tiny run: `skillbank demo --quick` trains the tiny model and evaluates it
before and after; the report of that run must parse as HTML, open in a real headless chromium with every
picture decoded and nothing fetched, carry the summary with its caveats and every section with data (and
none without), each failing item named; bad input exits 2 and writes nothing."""

from __future__ import annotations

import base64
import copy
import hashlib
import io
import json
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from browser import probe
from helpers import ROOT, skillbank

SECTIONS = {"training", "accuracy", "confusion", "failures", "recipe", "comparison"}


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> dict[str, Path]:
    """The quick demo's run folder and its two evaluations (untrained, trained): 9 held-out items each."""
    out = tmp_path_factory.mktemp("report-demo") / "demo"
    proc = skillbank("demo", "--quick", "--out", str(out), "--json", timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    art = json.loads(proc.stdout)["artifacts"]
    return {"run": Path(art["run_dir"]), "base": Path(art["eval_base"]), "trained": Path(art["eval_trained"])}


class Page(HTMLParser):
    """Section ids, image sources and the text of an HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: list[str] = []
        self.images: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "section":
            self.sections.append(attrs.get("id"))
        if tag == "img":
            self.images.append(attrs.get("src", ""))

    def handle_data(self, data):
        self.text.append(data)


def _parse(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    page.close()
    return page


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_report_of_a_tiny_run_parses_its_pictures_decode_and_every_section_is_there(tmp_path, demo):
    from PIL import Image

    before = {k: _digest(demo[k]) for k in ("base", "trained")}
    out = tmp_path / "report"
    proc = skillbank("report", "--run", str(demo["run"].parent), "--eval", str(demo["trained"]), "--base", str(demo["base"]),
                     "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert {k for k, s in doc["sections"].items() if s["shown"]} == SECTIONS  # --base and --eval: the comparison too

    page = _parse(out / "report.html")
    assert page.sections == ["summary", "training", "accuracy", "confusion", "failures", "recipe", "comparison"]  # the summary on top
    html_text = (out / "report.html").read_text()
    assert "http://" not in html_text and "https://" not in html_text and "<script" not in html_text
    seen = probe(out / "report.html", tmp_path / "browser")  # a real chromium: every picture decodes, nothing is fetched
    assert seen["images"] == seen["decoded"] == len(doc["images"]) > 0 and seen["fetched"] == []
    assert all(w > 0 and h > 0 for w, h in seen["sizes"])
    assert page.images and all(src.startswith("data:image/png;base64,") for src in page.images)  # one file, offline
    for src in page.images:
        with Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1]))) as img:
            img.verify()
    text = " ".join(page.text)
    results = json.loads((demo["trained"] / "results.json").read_text())
    failing = [r["video_id"] for r in results if not r["correct"]]
    assert doc["failures"] == {"eval_trained": len(failing)}
    trained = json.loads((demo["trained"] / "metrics.json").read_text())
    assert doc["accuracy"]["after: eval_trained"]["all"]["total"] == trained["total"] == len(results)
    assert doc["accuracy"]["after: eval_trained"]["all"]["ci95"] == trained["ci95"]["accuracy"]  # read, not recomputed
    assert all(i in text for i in failing)  # each failing item named by id
    assert "before: eval_base" in text and "after: eval_trained" in text
    assert "eval_trained: 0 evaluated item(s) overlap the training data" in text  # evaluate checked it against the recipe
    assert "skillbank_recipe.json" in text  # the recipe of the run's newest export

    # what ran, not the caps: the last logged training step and its epoch, beside train.epoch 1000
    rows = [json.loads(line) for line in (demo["run"] / "metrics.jsonl").read_text().splitlines()]
    trained = [r for r in rows if "loss" in r]
    training = doc["sections"]["training"]
    assert training["steps_run"] == trained[-1]["step"] and training["epochs_run"] == trained[-1]["epoch"]
    assert training["caps"]["train.epoch"] == 1000 and training["images"] == ["training.png"]
    vals = [r for r in rows if "val_loss" in r]
    assert training["validation_points"] == len(vals) == 2 and training["curves"]["validation loss"] == "markers"
    assert f"{trained[-1]['step']} step(s) run in {trained[-1]['epoch']} epoch(s)" in text and "train.epoch (a cap, not what ran)" in text
    # the summary: the paired verdict, the training, and the caveats (the demo evaluates its own validation split, 9 items)
    summary = doc["summary"]
    assert summary["findings"][0].startswith("**eval_trained vs eval_base** on 9 paired items")
    assert any(line.startswith("Training: ") for line in summary["findings"])
    assert any("the run's own validation split" in c for c in summary["caveats"])
    assert any("group(s) under 30 samples" in c for c in summary["caveats"])
    assert "Not in this report" not in text and "(needs " not in text  # every section had data: no hint of a missing one
    assert "eval_trained vs eval_base" in doc["comparison"] and doc["comparison"]["eval_trained vs eval_base"]["overall"]["n"] == 9

    markdown = (out / "report.md").read_text()
    pictures = [line.split("](", 1)[1].rstrip(")| ").split(")")[0] for line in markdown.splitlines() if "![" in line]
    assert pictures and all((out / p).is_file() for p in pictures)  # the PNGs beside report.md
    assert len(pictures) == len(page.images) == len(doc["images"])
    assert {k: _digest(demo[k]) for k in ("base", "trained")} == before  # inputs untouched


def test_a_recorded_training_overlap_and_two_evaluations_are_shown(tmp_path, demo):
    evals = []
    for name in ("base", "trained"):
        copy_dir = tmp_path / f"eval_{name}"
        shutil.copytree(demo[name], copy_dir)
        evals.append(copy_dir)
    metrics = json.loads((evals[1] / "metrics.json").read_text())
    metrics["training_overlap"] = {"count": 2, "ids": ["val_00001", "val_00004"]}
    metrics["families"]["colour"]["ci95"] = {"accuracy": [0.0, 0.25]}  # a recorded interval is taken as it is
    (evals[1] / "metrics.json").write_text(json.dumps(metrics))
    out = tmp_path / "report"
    proc = skillbank("report", "--eval", str(evals[0]), "--eval", str(evals[1]), "--out", str(out), "--no-frames", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    page = _parse(out / "report.html")
    text = " ".join(page.text)
    assert "eval_trained: 2 evaluated item(s) overlap the training data: val_00001, val_00004" in text
    assert "eval_base: training overlap not checked: " in text  # evaluate recorded why (the untrained model has no recipe)
    assert "[0.0%, 25.0%] 0/3" in text  # colour of eval_trained: metrics.json's ci95
    assert "[0.0%, 56.2%] 0/3" in text  # the others: Wilson 0/3 = [0, 0.5615]
    assert "training" not in page.sections and "not shown" not in text  # no empty section in the page ...
    assert "Not in this report: Training and validation loss: no --run given (needs --run" in text  # ... named once, with its flag
    assert "Comparison of the two evaluations" in text
    html_text = (out / "report.html").read_text()
    assert html_text.count("<li>eval_base: ") >= 4  # metrics.json warnings as a list, not one paragraph
    assert any(c.startswith("eval_trained: 2 evaluated item(s) share content with the training data") for c in json.loads(proc.stdout)["summary"]["caveats"])
    table = (out / "report.md").read_text()  # skillbank compare's own table: its statistics, not the report's
    assert "| family | n | A accuracy [95% CI] |" in table and "| **all** | 9 |" in table and "p (Holm)" in table
    assert not list(out.glob("failures_*"))  # --no-frames: no clip read


def test_bad_input_exits_2_names_the_file_and_writes_nothing(tmp_path, demo):
    out = tmp_path / "report"
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = skillbank("report", "--eval", str(empty), "--out", str(out))
    assert proc.returncode == 2 and "no results.json" in proc.stderr and "fix:" in proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()

    # an unreadable clip: the evaluated annotations point at a file that is not a video
    broken = tmp_path / "broken_eval"
    shutil.copytree(demo["trained"], broken)
    metrics = json.loads((broken / "metrics.json").read_text())
    records = json.loads(Path(metrics["annotation_path"]).read_text())
    media = tmp_path / "media"
    (media / "videos").mkdir(parents=True)
    for r in records:
        (media / r["video"]).write_bytes(b"not a video")
    (media / "annotations.json").write_text(json.dumps(records))
    metrics.update(annotation_path=str(media / "annotations.json"), media_dir=str(media))
    (broken / "metrics.json").write_text(json.dumps(metrics))
    proc = skillbank("report", "--eval", str(broken), "--out", str(out))
    assert proc.returncode == 2, proc.stderr
    assert "cannot read the clip" in proc.stderr and str(media / "videos") in proc.stderr and "--no-frames" in proc.stderr
    assert not out.exists()

    # metrics.json naming no annotation file (as `skillbank score` writes it): the fix names --annotations, which works
    scored = tmp_path / "scored_eval"
    shutil.copytree(demo["trained"], scored)
    metrics = json.loads((scored / "metrics.json").read_text())
    evaluated = metrics.pop("annotation_path")
    (scored / "metrics.json").write_text(json.dumps(metrics))
    proc = skillbank("report", "--eval", str(scored), "--out", str(out))
    assert proc.returncode == 2 and "metrics.json names none" in proc.stderr and "--annotations FILE" in proc.stderr and not out.exists()
    proc = skillbank("report", "--eval", str(scored), "--out", str(out), "--annotations", evaluated, "--max-failures", "1")
    assert proc.returncode == 0, proc.stderr
    shutil.rmtree(out)

    # results without evaluate's verdicts
    rows = json.loads((broken / "results.json").read_text())
    (broken / "results.json").write_text(json.dumps([{k: v for k, v in r.items() if k != "correct"} for r in rows]))
    proc = skillbank("report", "--eval", str(broken), "--out", str(out), "--json")
    assert proc.returncode == 2 and json.loads(proc.stdout)["error"]["where"].endswith("results.json")
    assert not out.exists()


def test_curves_of_a_cosmos_rl_run_launched_without_skillbank_come_from_its_logs(tmp_path):
    """A cosmos-rl run folder with logs and no metrics.jsonl: lines as cosmos-rl 0.4.7 writes them."""
    from skillbank.reporting.inputs import read_run

    run = tmp_path / "20250101120000"
    logs = run / "logs" / "logs_latest"
    logs.mkdir(parents=True)
    (run / "checkpoints").mkdir()
    lines = ["Training epoch 1/1"]
    for step in range(1, 5):
        lines.append(f"[rank0]: Step: {step}/4, Loss: {3.0 - 0.5 * step:.3f}, Grad norm: 1.0, Iteration time: 0.5s, optimizer/lr_0: {step * 1e-5}")
    lines.append("[rank0]: [SFT] Validation loss: 1.25 for train step 4/4, epoch 0")
    (logs / "policy_0.log").write_text("\n".join(lines) + "\n")
    got = read_run(tmp_path)
    assert got.folder == run
    assert [r["loss"] for r in got.rows if "loss" in r] == [2.5, 2.0, 1.5, 1.0]
    assert [r["lr"] for r in got.rows if "lr" in r] == pytest.approx([1e-5, 2e-5, 3e-5, 4e-5])
    assert [(r["step"], r["val_loss"]) for r in got.rows if "val_loss" in r] == [(4, 1.25)]
    assert "policy_0.log" in got.rows_from and not (run / "metrics.jsonl").exists()


def test_intervals_come_from_metrics_json_and_wilson_only_stands_in():
    from skillbank.reporting.sections import family_values

    metrics = {"accuracy": 0.5, "correct": 5, "total": 10, "ci95": {"accuracy": [0.1, 0.9]},
               "families": {"a": {"accuracy": 1.0, "correct": 3, "total": 3}, "b": {"accuracy": 0.0, "correct": 0, "total": 7,
                                                                                     "ci95": {"accuracy": [0.0, 0.4]}}}}
    values, computed = family_values(copy.deepcopy(metrics))
    assert values["all"] == (0.5, 0.1, 0.9, 10, 5) and values["b"] == (0.0, 0.0, 0.4, 7, 0)
    assert computed == ["a"] and values["a"][1] == pytest.approx(0.4385, abs=1e-4) and values["a"][2] == 1.0  # Wilson 3/3


def test_report_help_names_each_sections_inputs_and_imports_nothing_heavy():
    probe = ("import sys, io, contextlib\nfrom skillbank import cli\nout = io.StringIO()\n"
             "with contextlib.redirect_stdout(out):\n    try:\n        cli.main(['report', '--help'])\n    except SystemExit:\n        pass\n"
             "print(out.getvalue())\nprint('HEAVY', [m for m in ('torch', 'transformers', 'cosmos_rl', 'optuna', 'matplotlib', 'av') if m in sys.modules])")
    proc = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "HEAVY []"
    for needed in ("Training and validation loss", "Accuracy per family", "Confusion matrices", "Failures", "Recipe and training overlap",
                   "Comparison", "metrics.jsonl", "metrics.json", "results.json", "--media-dir", "--base"):
        assert needed in proc.stdout


def test_json_says_what_was_shown_and_title(tmp_path, demo):
    """--json marks a section without data not shown (a run without metrics: no curve claimed); the title is the page's."""
    from skillbank.reporting.build import Request, build

    run = tmp_path / "run"  # the run's spec, no metrics.jsonl and no logs
    run.mkdir()
    shutil.copy(demo["run"] / "spec.json", run / "spec.json")
    doc = build(Request(out=tmp_path / "r", run=str(run), evals=(str(demo["trained"]),), frames=False, progress=False, title="Colour model, run 3"))
    training = doc["sections"]["training"]
    assert training["shown"] is False and training["images"] == [] and "no per-step metrics" in training["why"]
    assert doc["sections"]["comparison"]["shown"] is False and doc["title"] == "Colour model, run 3"
    page = (tmp_path / "r" / "report.html").read_text()
    assert "<title>Colour model, run 3</title>" in page and "<h1>Colour model, run 3</h1>" in page
    assert "training.png" not in page and not (tmp_path / "r" / "training.png").exists()
    assert (tmp_path / "r" / "report.md").read_text().startswith("# Colour model, run 3\n")
    assert any(line.startswith("No --base") for line in doc["summary"]["findings"])


def test_few_validation_points_are_markers_not_a_line():
    from skillbank.reporting.figures import FEW_POINTS, training_figure

    rows = [{"step": s, "loss": 3 - 0.1 * s} for s in range(1, 21)] + [{"step": 0, "val_loss": 3.1}, {"step": 20, "val_loss": 1.2}]
    fig, drawn = training_figure(rows)
    lines = {line.get_label().split(" (")[0]: line for line in fig.axes[0].get_lines()}
    assert drawn == {"training loss": "line", "validation loss": "markers"}
    assert lines["validation loss"].get_linestyle() == "None" and lines["validation loss"].get_marker() == "o"
    assert lines["training loss"].get_linestyle() == "-"
    many = rows + [{"step": s, "val_loss": 2.0} for s in range(2, 2 + FEW_POINTS)]
    assert training_figure(many)[1]["validation loss"] == "line with markers"
