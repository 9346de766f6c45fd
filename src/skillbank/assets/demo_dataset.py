"""The synthetic demo dataset: LLaVA-format video QA about a coloured square moving on black.

Three task families, each with a short constrained answer so exact-match evaluation is meaningful:
- yes_no: "Is the ball red? Answer yes or no." (balanced yes / no over the four ball colours)
- directionality: "Which way does the ball move? Answer left, right or straight." (straight = static
  or vertical motion; balanced over the three answers)
- colour: "What colour is the ball? Answer with one word." Without this family a tiny model never
  learns yes_no: nothing pushes it to read the colour first (docs: cpu-stack).

Every fourth yes_no question of the train split asks about a colour no ball has ("Is the ball white?",
answer no; DISTRACTORS). Why: yes_no's answer depends on question and clip together (asked colour ==
seen colour), so for a balanced set neither alone says anything and nothing pushes the answer position to
read the asked colour until a late jump, at a step that depends on the seed (seed 3 was still at chance
after 1,000 steps of 32). A distractor's answer follows from the asked word alone, which teaches the
model to carry the asked colour to the answer early; the comparison follows within a few hundred steps
(benchmarks/demo_seeds.md). The held-out split asks only about the four ball colours, balanced, so its
yes_no accuracy measures the comparison.

Clips: 16 frames of 64x64 at 8 fps (2 s), a 20-px square moving ~2.5 px per frame, written with PyAV;
no two clips have the same pixels, so no validation clip repeats a training clip.
Layout: <out>/{train,val}/annotations.json and <out>/{train,val}/videos/<id>.mp4 (paths in records
are relative to the split folder, which is the spec's media_path).
"""

from __future__ import annotations

import json
import math
import os
import random
from dataclasses import dataclass
from pathlib import Path

from skillbank.assets import store

KIND = "demo-dataset"
FRAMES = 16
SIZE = 64
FPS = 8
SQUARE = 20
SPEED = 2.5  # pixels per frame

COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (230, 30, 30),
    "green": (30, 200, 30),
    "blue": (40, 60, 240),
    "yellow": (235, 225, 30),
}
DISTRACTORS = ("white", "black", "brown")  # asked about in train yes_no questions, never a ball's colour
DISTRACTOR_EVERY = 4  # every 4th train yes_no question asks about one
FAMILIES = ("yes_no", "directionality", "colour")
MOTIONS = ("left", "right", "static", "up", "down")
DIRECTIONS = ("left", "right", "straight")
ANSWER_WORDS = ("yes", "no", *DIRECTIONS, *COLOURS)

PROMPTS = {
    "yes_no": "Is the ball {colour}? Answer yes or no.",
    "directionality": "Which way does the ball move? Answer left, right or straight.",
    "colour": "What colour is the ball? Answer with one word.",
}


def prompts_for(colour: str) -> list[str]:
    return [p.format(colour=colour) for p in PROMPTS.values()]


def direction_of(motion: str) -> str:
    return motion if motion in ("left", "right") else "straight"


@dataclass(frozen=True)
class Clip:
    colour: str
    motion: str
    x0: float
    y0: float

    def frames(self):
        """uint8 array (T, H, W, 3)."""
        import numpy as np

        dx = {"left": -SPEED, "right": SPEED}.get(self.motion, 0.0)
        dy = {"up": -SPEED, "down": SPEED}.get(self.motion, 0.0)
        video = np.zeros((FRAMES, SIZE, SIZE, 3), dtype=np.uint8)
        for t in range(FRAMES):
            x, y = round(self.x0 + dx * t), round(self.y0 + dy * t)
            video[t, y : y + SQUARE, x : x + SQUARE] = COLOURS[self.colour]
        return video

    def key(self) -> tuple:
        """What decides the clip's pixels (and so its mp4 bytes): the colour and the square's place in every frame."""
        dx = {"left": -SPEED, "right": SPEED}.get(self.motion, 0.0)
        dy = {"up": -SPEED, "down": SPEED}.get(self.motion, 0.0)
        return (self.colour, *((round(self.x0 + dx * t), round(self.y0 + dy * t)) for t in range(FRAMES)))


def _random_clip(rng: random.Random, colour: str, motion: str, used: set[tuple] | None = None) -> Clip:
    """A clip whose pixels no clip in `used` has (redrawn until then; `used` gains it), so no validation
    clip repeats a training clip byte for byte (skillbank compare's overlap check would flag it)."""
    for _ in range(1000):
        clip = _draw(rng, colour, motion)
        if used is None or clip.key() not in used:
            break
    if used is not None:
        used.add(clip.key())
    return clip


def _draw(rng: random.Random, colour: str, motion: str) -> Clip:
    travel = SPEED * (FRAMES - 1)
    free = SIZE - SQUARE
    lo, hi = {
        "right": (0.0, free - travel),
        "down": (0.0, free - travel),
        "left": (travel, free),
        "up": (travel, free),
    }.get(motion, (0.0, free))
    along = rng.uniform(lo, hi)
    across = rng.uniform(0.0, free)
    x0, y0 = (along, across) if motion in ("left", "right") else (across, along)
    return Clip(colour, motion, x0, y0)


def make_record(rng: random.Random, split: str, index: int, family: str, nth_in_family: int, used: set[tuple] | None = None) -> tuple[dict, Clip]:
    """One record and its clip; answers are balanced by `nth_in_family`; the clip is none of `used`.
    In the train split every DISTRACTOR_EVERY-th yes_no record asks about a DISTRACTORS colour (no)."""
    colours = list(COLOURS)
    if family == "yes_no":
        distractor = split == "train" and nth_in_family % DISTRACTOR_EVERY == DISTRACTOR_EVERY - 1
        nth = nth_in_family - nth_in_family // DISTRACTOR_EVERY if split == "train" else nth_in_family  # among ball colours
        asked = rng.choice(DISTRACTORS if distractor else colours)
        answer = "yes" if nth % 2 == 0 and not distractor else "no"
        colour = asked if answer == "yes" else rng.choice([c for c in colours if c != asked])
        motion = rng.choice(MOTIONS)
        prompt = PROMPTS["yes_no"].format(colour=asked)
    elif family == "directionality":
        answer = DIRECTIONS[nth_in_family % 3]
        motion = answer if answer != "straight" else rng.choice(("static", "up", "down"))
        colour = rng.choice(colours)
        prompt = PROMPTS["directionality"]
    else:
        colour = colours[nth_in_family % len(colours)]
        motion = rng.choice(MOTIONS)
        answer = colour
        prompt = PROMPTS["colour"]
    clip = _random_clip(rng, colour, motion, used)
    rid = f"{split}_{index:05d}"
    record = {
        "id": rid,
        "video": f"videos/{rid}.mp4",
        "video_fps": float(FPS),
        "family": family,
        "conversations": [
            {"from": "human", "value": f"<video>\n{prompt}"},
            {"from": "gpt", "value": answer},
        ],
        "attributes": {"colour": colour, "motion": motion, "direction": direction_of(motion)},
    }
    return record, clip


def rgb_to_yuv420p(frame):
    """BT.601 limited-range RGB -> planar YUV 4:2:0, in numpy.

    Converting here rather than in PyAV's swscale keeps the encoded bytes reproducible.
    """
    import numpy as np

    f = frame.astype(np.float32)
    r, g, b = f[..., 0], f[..., 1], f[..., 2]
    y = 16 + 0.257 * r + 0.504 * g + 0.098 * b
    u = 128 - 0.148 * r - 0.291 * g + 0.439 * b
    v = 128 + 0.439 * r - 0.368 * g - 0.071 * b
    h, w = y.shape
    u = u.reshape(h // 2, 2, w // 2, 2).mean(axis=(1, 3))
    v = v.reshape(h // 2, 2, w // 2, 2).mean(axis=(1, 3))
    planes = [p.round().clip(0, 255).astype(np.uint8).reshape(-1) for p in (y, u, v)]
    return np.concatenate(planes).reshape(h * 3 // 2, w)


def _yuv_frame(array):
    """An av.VideoFrame filled plane by plane with zeroed line padding (no swscale, no stale bytes)."""
    import av
    import numpy as np

    h, w = array.shape[:2]
    yuv = rgb_to_yuv420p(array)
    planes = (yuv[:h], yuv[h : h + h // 4].reshape(h // 2, w // 2), yuv[h + h // 4 :].reshape(h // 2, w // 2))
    frame = av.VideoFrame(w, h, "yuv420p")
    for plane, data in zip(frame.planes, planes):
        padded = np.zeros((plane.height, plane.line_size), dtype=np.uint8)
        padded[:, : data.shape[1]] = data
        plane.update(padded.tobytes())
    return frame


def write_mp4(path: str | os.PathLike[str], frames, fps: int = FPS) -> None:
    """Write uint8 (T, H, W, 3) frames (even H and W) as H.264 (mpeg4 where libx264 is missing)."""
    import av

    with av.open(str(path), mode="w") as container:
        try:
            stream = container.add_stream("libx264", rate=fps)
            # mbtree off: with it x264 gave different bytes for the same frames now and then
            stream.options = {"crf": "18", "preset": "veryfast", "threads": "1", "x264-params": "mbtree=0"}
        except Exception:  # noqa: BLE001 - codec missing from this PyAV build
            stream = container.add_stream("mpeg4", rate=fps)
            stream.options = {"qscale": "2"}
        stream.width, stream.height = frames.shape[2], frames.shape[1]
        stream.pix_fmt = "yuv420p"
        for array in frames:
            for packet in stream.encode(_yuv_frame(array)):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def split_sizes(records: int) -> dict[str, int]:
    """Train gets `records`; val ~15% of it, at least 3 per family."""
    return {"train": records, "val": max(math.ceil(0.15 * records), 3 * len(FAMILIES))}


def write_demo_dataset(out_dir: str | os.PathLike[str], *, records: int = 2100, seed: int = 0, progress: bool = False) -> Path:
    """Write both splits into an existing empty folder (see build_demo_dataset for caching)."""
    from tqdm import tqdm

    from skillbank import atomic

    out = Path(out_dir)
    sizes = split_sizes(records)
    bar = tqdm(total=sum(sizes.values()), desc="writing clips", unit="clip", disable=not progress)
    used: set[tuple] = set()  # every clip differs from every other, across splits
    for split_index, (split, count) in enumerate(sizes.items()):
        rng = random.Random(f"{seed}/{split_index}")
        (out / split / "videos").mkdir(parents=True, exist_ok=True)
        rows, seen = [], dict.fromkeys(FAMILIES, 0)
        for i in range(count):
            family = FAMILIES[i % len(FAMILIES)]
            record, clip = make_record(rng, split, i, family, seen[family], used)
            seen[family] += 1
            write_mp4(out / split / record["video"], clip.frames())
            rows.append(record)
            bar.update(1)
        atomic.write_text(out / split / "annotations.json", json.dumps(rows, indent=1) + "\n")
    bar.close()
    return out


def build_demo_dataset(
    out_dir: str | os.PathLike[str] | None = None,
    *,
    records: int = 2100,
    seed: int = 0,
    cache: bool = False,
    progress: bool = False,
) -> Path:
    """Build (or reuse) the demo dataset and return its folder (holding train/ and val/).

    out_dir=None returns the copy cached under `skillbank.paths.cache_dir()`; with cache=True and an
    out_dir, the cached copy is built once and copied there. Deterministic given (records, seed).
    """
    if records < len(FAMILIES):
        from skillbank.errors import InputError

        raise InputError(f"--records must be at least {len(FAMILIES)} (one per task family)", where="--records", fix="pass --records 24 or more")
    args = {"records": records, "seed": seed}
    version = store.code_version(__name__)

    def build(tmp: Path) -> None:
        write_demo_dataset(tmp, records=records, seed=seed, progress=progress)

    return store.asset_folder(out_dir, cache=cache, kind=KIND, args=args, version=version, build=build)
