"""Training overlap by content: which evaluated items the model may have seen in training.

A held-out set that holds training clips under new names measures memory, not skill, and nothing in
the numbers shows it. The model's recipe (skillbank_recipe.json) names its training data
(`training_data.annotation_path`, its sha256, and since issue 28 its `media_path`); an evaluated item
overlaps it when
- by_video: its clip's bytes equal a training clip's (sha256, cached per file by path, size and mtime;
  only clips whose size matches a clip on the other side are hashed at all, so a large training set
  costs a stat per clip), or
- by_question_answer: its (question, answer), lower-cased with whitespace collapsed, is a training
  record's, for a question asked about one training clip only. A question asked about several
  training clips is a template ("Is the ball red? Answer yes or no."): sharing it says nothing.

`check` returns the `training_overlap` block of metrics.json: checked, count and every overlapping id
(and the record indices, `indices`, which evaluate drops before writing), by_video, by_question_answer,
templated_questions, the training data read, and `reason` when the check could not run (no recipe,
training data not on this machine): never silent. The joins are DuckDB queries over two small tables.
"""

from __future__ import annotations

import json
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from skillbank.data import chat
from skillbank.data.media import media_root

_SPACE = re.compile(r"\s+")
SHOWN = 5  # ids named in a warning before "..."


def _text(value: Any) -> str:
    return _SPACE.sub(" ", str(value or "")).strip().lower()


def _clip(record: dict[str, Any], media: str) -> str | None:
    try:
        return os.path.abspath(chat.video_path(record, media))
    except Exception:  # a record without a video: only its text is compared
        return None


def _rows(records: list[dict[str, Any]], media: str) -> tuple[list[str | None], list[str], list[str]]:
    """Each record's clip (absolute path), normalised question and answer."""
    clips, questions, answers = [], [], []
    for record in records:
        question, answer = chat.prompt_and_answer(record)
        clips.append(_clip(record, media))
        questions.append(_text(question))
        answers.append(_text(answer))
    return clips, questions, answers


def _size(path: str | None) -> int | None:
    try:
        return os.stat(path).st_size if path else None
    except OSError:
        return None


@lru_cache(maxsize=4)
def _training(annotation_path: str, size: int, mtime_ns: int, media: str) -> tuple[list[str | None], list[str], list[str], list[int | None]]:
    """The training records' clips, questions, answers and clip sizes (kept while the file is unchanged:
    a prompt search evaluates the same model many times)."""
    from skillbank.data.records import load_records

    clips, questions, answers = _rows(load_records(annotation_path), media)
    return clips, questions, answers, [_size(c) for c in clips]


def not_checked(reason: str, training_data: str | None = None) -> dict[str, Any]:
    return {"checked": False, "reason": reason, "training_data": training_data, "count": 0, "ids": []}


def check(records: list[dict[str, Any]], media: str, recipe: dict[str, Any] | None, *, recipe_source: str | None = None) -> dict[str, Any]:
    """The training_overlap block of evaluating `records` (clips under `media`) with a model whose recipe is `recipe`."""
    if not recipe:
        return not_checked("the model has no recipe (skillbank_recipe.json), so its training data is unknown")
    data = recipe.get("training_data") or {}
    annotation = data.get("annotation_path")
    if not annotation:
        return not_checked(f"the model's recipe ({recipe_source or 'skillbank_recipe.json'}) names no training data")
    path = Path(annotation)
    if not path.is_file():
        return not_checked(f"the recipe's training data {annotation} is not on this machine: the overlap was not checked", annotation)
    train_media = str(data.get("media_path") or media_root("", annotation))
    st = path.stat()
    try:
        t_clips, t_questions, t_answers, t_sizes = _training(str(path.resolve()), st.st_size, st.st_mtime_ns, train_media)
    except Exception as exc:  # an unreadable training file: say so, evaluate the rest
        return not_checked(f"the recipe's training data {annotation} could not be read ({exc})", annotation)
    e_clips, e_questions, e_answers = _rows(records, media)
    e_sizes = [_size(c) for c in e_clips]
    e_hash, t_hash = _hashes(e_clips, e_sizes, t_clips, t_sizes)
    ids = [str(r.get("id", i)) for i, r in enumerate(records)]
    found = _join(ids, [e_hash.get(c) if c else None for c in e_clips], e_questions, e_answers,
                  t_clips, [t_hash.get(c) if c else None for c in t_clips], t_questions, t_answers)
    missing = sum(1 for c, size in zip(t_clips, t_sizes) if c and size is None)
    out = {"checked": True, "training_data": annotation, "media_path": train_media, "training_records": len(t_clips), **found,
           "training_clips_missing": missing}
    recorded = data.get("sha256")
    if recorded:
        from skillbank.hashing import sha256_many

        now = sha256_many([str(path)]).get(str(path))
        out["training_data_changed"] = bool(now and now != recorded)
    if missing:
        out["note"] = f"{missing} of {len(t_clips)} training clips are not on this machine: those were compared by (question, answer) only"
    return out


def _hashes(e_clips: list[str | None], e_sizes: list[int | None], t_clips: list[str | None],
            t_sizes: list[int | None]) -> tuple[dict[str, str], dict[str, str]]:
    """sha256 of the clips whose size some clip on the other side has (byte-identical files have equal sizes)."""
    from skillbank.hashing import sha256_many

    shared = {s for s in e_sizes if s is not None} & {s for s in t_sizes if s is not None}
    e_pick = sorted({c for c, s in zip(e_clips, e_sizes) if c and s in shared})
    t_pick = sorted({c for c, s in zip(t_clips, t_sizes) if c and s in shared})
    digests = sha256_many(sorted(set(e_pick) | set(t_pick))) if shared else {}
    return {c: digests[c] for c in e_pick if c in digests}, {c: digests[c] for c in t_pick if c in digests}


_JOIN = """
WITH templates AS (SELECT q FROM sb_train WHERE clip IS NOT NULL GROUP BY q HAVING count(DISTINCT clip) > 1),
     pairs AS (SELECT DISTINCT q, a FROM sb_train WHERE q <> '' AND q NOT IN (SELECT q FROM templates)),
     shas AS (SELECT DISTINCT sha FROM sb_train WHERE sha IS NOT NULL)
SELECT e.idx, e.id,
       coalesce(e.sha IN (SELECT sha FROM shas), false) AS by_video,
       EXISTS (SELECT 1 FROM pairs p WHERE p.q = e.q AND p.a = e.a) AS by_qa
FROM sb_eval e ORDER BY e.idx
"""


def _join(ids: list[str], e_sha: list[str | None], e_q: list[str], e_a: list[str],
          t_clips: list[str | None], t_sha: list[str | None], t_q: list[str], t_a: list[str]) -> dict[str, Any]:
    """The overlap as one query over the evaluated and the training items."""
    import duckdb

    from skillbank.scoring import columns

    con = duckdb.connect()
    text = "VARCHAR"
    evaluated = columns.register(con, "sb_eval_in", {"idx": range(len(ids)), "id": ids, "sha": e_sha, "q": e_q, "a": e_a},
                                 {"idx": "BIGINT", "id": text, "sha": text, "q": text, "a": text})
    trained = columns.register(con, "sb_train_in", {"clip": t_clips, "sha": t_sha, "q": t_q, "a": t_a}, dict.fromkeys(("clip", "sha", "q", "a"), text))
    con.execute(f"CREATE TEMP VIEW sb_eval AS {evaluated}")
    con.execute(f"CREATE TEMP VIEW sb_train AS {trained}")
    rows = con.execute(_JOIN).fetchall()
    (templated,) = con.execute("SELECT count(*) FROM (SELECT q FROM sb_train WHERE clip IS NOT NULL GROUP BY q "
                               "HAVING count(DISTINCT clip) > 1)").fetchone()
    con.close()
    hit = [(idx, id_, v, qa) for idx, id_, v, qa in rows if v or qa]
    return {"count": len(hit), "ids": [id_ for _, id_, _, _ in hit], "indices": [idx for idx, _, _, _ in hit],
            "by_video": sum(1 for *_, v, _ in hit if v), "by_question_answer": sum(1 for *_, qa in hit if qa),
            "templated_questions": int(templated)}


def warnings(block: dict[str, Any], evaluated: int) -> list[str]:
    """What the overlap block tells a reader: how many items the model may have seen, or why it was not checked."""
    if not block.get("checked"):
        return [f"training overlap not checked: {block['reason']}"] if block.get("training_data") else []
    out = []
    if block.get("count"):
        shown = ", ".join(block["ids"][:SHOWN]) + (", ..." if block["count"] > SHOWN else "")
        action = ("they were left out of the scores (evaluation.exclude_training_overlap)" if block.get("excluded")
                  else "set evaluation.exclude_training_overlap = true to score only the clean items")
        out.append(f"training overlap: {block['count']} of {evaluated} evaluated items share content with the model's training data "
                   f"{block['training_data']} ({block['by_video']} by clip bytes, {block['by_question_answer']} by question and answer): "
                   f"{shown}; every id is in metrics.json training_overlap; {action}")
    if block.get("training_data_changed"):
        out.append(f"the training data {block['training_data']} changed since the model was trained (its sha256 differs from the "
                   "recipe's): the overlap is against today's file")
    if block.get("note"):
        out.append(f"training overlap: {block['note']}")
    return out


def public(block: dict[str, Any]) -> dict[str, Any]:
    """The block as metrics.json keeps it (record indices are evaluate's own)."""
    return {k: v for k, v in block.items() if k != "indices"}


def from_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    """The overlap of an evaluation from its metrics.json: the block evaluate wrote, else computed now
    from the recipe and annotations it names (an evaluation older than the check), else not checked."""
    if isinstance(metrics.get("training_overlap"), dict):
        return metrics["training_overlap"]
    recipe_file, annotation = metrics.get("recipe"), metrics.get("annotation_path")
    if not recipe_file or not annotation or not Path(str(recipe_file)).is_file() or not Path(str(annotation)).is_file():
        why = "its metrics.json has no training_overlap" + ("" if recipe_file else " and names no recipe")
        return not_checked(why)
    try:
        recipe = json.loads(Path(str(recipe_file)).read_text(encoding="utf-8"))
        from skillbank.data.records import load_records

        records = load_records(str(annotation))
    except Exception as exc:  # what cannot be read is reported, not raised: compare goes on
        return not_checked(f"could not read {recipe_file} or {annotation} ({exc})")
    media = media_root(str(metrics.get("media_dir") or ""), str(annotation))
    return public(check(records, media, recipe, recipe_source=str(recipe_file)))
