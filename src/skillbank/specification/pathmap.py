"""`--path-map LOCAL=REMOTE`: plan on this machine, run on another whose folders have other names.

Data and models are checked where they are here (LOCAL); every file written for the job names them
as the node sees them (REMOTE). One map serves spec, preflight, train --dry-run, rl and submit:

- parse: each item is LOCAL=REMOTE, both absolute; one LOCAL maps to one REMOTE (exit 2 otherwise);
- the longest matching prefix wins (whole path components: /data does not cover /data2);
- which spec keys are paths is declared once, on the spec models (skillbank.specification.meta.PathStr and
  ModelRefStr); a model key holding a hub id (owner/repo, hf_model://) is never rewritten;
- `remote(data)` rewrites a spec dict for the node (relative paths are taken from the working
  directory first, so the node needs no matching working directory); `local(data)` the other way,
  so a spec written for the node is checked against this machine's files;
- `check_used` makes each LOCAL earn its place: it exists here, or is a prefix of a path the spec
  names (an output folder not created yet).
- a spec written with a map records it (`paths.map`, `PathsSpec`): `recorded` reads it back, and every
  command that reads the spec on this machine applies it (`LoadedSpec.model` gives the LOCAL view; its
  `recorded_map()` joins the flags of the commands that render for the node), so later commands need no flags. It
  applies only where one of its LOCAL folders exists: on the node itself the spec is read as written.
  The node's view (`remote`) carries no map: job folders and TOMLs name REMOTE only.
Light imports only: agent-facing commands parse maps.
"""

from __future__ import annotations

import os
import typing
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, field_validator

from skillbank import modelref
from skillbank.errors import InputError
from skillbank.specification.base import Section
from skillbank.specification.keys import submodel
from skillbank.specification.meta import SpecPath, param

FLAG = "--path-map"  # the flag that carries the maps (declared in skillbank.commands.flags); errors name it


def _norm(path: str) -> str:
    return os.path.normpath(path)


def _under(path: str, prefix: str) -> str | None:
    """The rest of `path` below `prefix` ('' for the prefix itself), or None when it is not under it."""
    if path == prefix:
        return ""
    root = prefix if prefix.endswith("/") else prefix + "/"
    return path[len(root):] if path.startswith(root) else None


@dataclass(frozen=True)
class PathMap:
    """(LOCAL, REMOTE) pairs, normalised; empty maps nothing."""

    pairs: tuple[tuple[str, str], ...] = ()
    cwd: Path = field(default_factory=Path.cwd)

    @classmethod
    def parse(cls, items: Iterable[str] | None, *, cwd: Path | None = None) -> PathMap:
        pairs: dict[str, str] = {}
        for item in items or ():
            local, sep, remote = str(item).partition("=")
            local, remote = local.strip(), remote.strip()
            if not sep or not local or not remote:
                raise InputError(f"{FLAG} {item!r} is not LOCAL=REMOTE", where=FLAG, fix=f"write {FLAG} /data/on/this/machine=/data/on/the/node")
            for name, value in (("LOCAL", local), ("REMOTE", remote)):
                if not value.startswith("/"):
                    raise InputError(f"{FLAG} {item!r}: {name} {value!r} is not an absolute path", where=FLAG,
                                     fix=f"give both sides as absolute paths, e.g. {FLAG} {Path(local).expanduser().absolute()}=/lustre/data")
            local, remote = _norm(local), _norm(remote)
            if pairs.get(local, remote) != remote:
                raise InputError(f"{FLAG} maps {local} twice ({pairs[local]} and {remote})", where=FLAG, fix="keep one REMOTE for each LOCAL")
            pairs[local] = remote
        return cls(tuple(pairs.items()), (cwd or Path.cwd()).resolve())

    def __bool__(self) -> bool:
        return bool(self.pairs)

    def items(self) -> list[str]:
        """The map as the flags spell it (what job records keep)."""
        return [f"{local}={remote}" for local, remote in self.pairs]

    def applies_here(self) -> bool:
        """One of its LOCAL folders exists on this machine (on the node, where none does, a recorded map is not applied)."""
        return any(Path(local).exists() for local, _ in self.pairs)

    def with_flags(self, items: Iterable[str]) -> PathMap:
        """This (recorded) map with the flags' pairs added; a flag's LOCAL replaces the recorded REMOTE of that LOCAL."""
        given = PathMap.parse(items, cwd=self.cwd)
        mine = dict(self.pairs)
        mine.update(given.pairs)
        return PathMap(tuple(mine.items()), self.cwd)

    # --- one path --------------------------------------------------------------------------------

    def _swap(self, path: str, *, to_remote: bool) -> str | None:
        """`path` (absolute, normalised) moved across the longest matching prefix, or None."""
        best: tuple[int, str] | None = None
        for local, remote in self.pairs:
            src, dst = (local, remote) if to_remote else (remote, local)
            rest = _under(path, src)
            if rest is not None and (best is None or len(src) > best[0]):
                best = (len(src), os.path.join(dst, rest) if rest else dst)
        return best[1] if best else None

    def to_remote(self, path: str | os.PathLike[str]) -> str:
        """A path as the node sees it: relative ones from the working directory; a path under no LOCAL
        comes back as given."""
        text = str(path)
        if not self or not text:
            return text
        full = Path(text).expanduser()
        full = full if full.is_absolute() else self.cwd / full
        return self._swap(_norm(str(full)), to_remote=True) or text

    def to_local(self, path: str | os.PathLike[str]) -> str:
        """A path as this machine sees it: a path under a REMOTE becomes the LOCAL one; anything else as given."""
        text = str(path)
        if not self or not text.startswith("/"):
            return text
        return self._swap(_norm(text), to_remote=False) or text

    def covered(self, path: str | os.PathLike[str]) -> bool:
        """The path lies under a LOCAL or a REMOTE (so the node knows it by its REMOTE name)."""
        text = str(path)
        full = Path(text).expanduser()
        full = _norm(str(full if full.is_absolute() else self.cwd / full))
        return any(_under(full, p) is not None for pair in self.pairs for p in pair)

    # --- a spec ----------------------------------------------------------------------------------

    def remote(self, data: dict[str, Any], model: type[BaseModel]) -> tuple[dict[str, Any], list[str]]:
        """The spec dict with every path key as the node sees it, and notes on the paths no LOCAL covers.
        The node's view records no map (its LOCAL side means nothing there): paths.map is emptied."""
        notes: list[str] = []

        def move(key: str, value: str) -> str:
            out = self.to_remote(value)
            if out == value and not self.covered(value):
                notes.append(f"{key} {value!r} lies under no {FLAG} LOCAL: written as is (the node must have it there)")
            return out

        out = self._rewrite(data, model, move)
        if isinstance(out.get(SECTION), dict):
            out[SECTION]["map"] = []
        return out, notes

    def local(self, data: dict[str, Any], model: type[BaseModel]) -> dict[str, Any]:
        """The spec dict with every path under a REMOTE moved to its LOCAL (what preflight checks here)."""
        return self._rewrite(data, model, lambda _key, value: self.to_local(value))

    def _rewrite(self, data: dict[str, Any], model: type[BaseModel], move: Any) -> dict[str, Any]:
        import copy

        out = copy.deepcopy(data)
        if self:
            for key, is_model in path_keys(model):
                _apply(out, key.split("."), key, is_model, move)
        return out

    def check_used(self, data: dict[str, Any], model: type[BaseModel]) -> None:
        """Each LOCAL exists here or is a prefix of a path the (local) spec names; else a typo, exit 2."""
        named: list[str] = []
        for key, is_model in path_keys(model):
            _apply(data, key.split("."), key, is_model, lambda _k, v: named.append(_norm(str(self.cwd / Path(v).expanduser()))) or v)
        for local, remote in self.pairs:
            if Path(local).exists() or any(_under(p, local) is not None for p in named):
                continue
            raise InputError(f"{FLAG} {local}={remote}: {local} does not exist here and no path of the spec lies under it",
                             where=FLAG, fix="give LOCAL as this machine's folder that holds the data (or the outputs) the spec names")


def _apply(data: Any, parts: list[str], key: str, is_model: bool, move: Any) -> None:
    """Call move(key, value) on the value at the dotted key, when it is a non-empty path string."""
    for part in parts[:-1]:
        data = data.get(part) if isinstance(data, dict) else None
        if not isinstance(data, dict):
            return
    value = data.get(parts[-1]) if isinstance(data, dict) else None
    if not isinstance(value, str) or not value.strip():
        return
    if is_model and _names_a_hub_model(value):
        return
    data[parts[-1]] = move(key, value)


def _names_a_hub_model(value: str) -> bool:
    """hf_model://owner/repo, or owner/repo that is no path here (skillbank.modelref's reading)."""
    if value.startswith(modelref.HF_SCHEME):
        return True
    return not value.startswith(modelref.PATH_PREFIXES) and modelref.parse(value).kind == "hub"


def path_keys(model: type[BaseModel], prefix: str = "") -> list[tuple[str, bool]]:
    """(dotted key, names a model) of every field typed PathStr / ModelRefStr (skillbank.specification.meta)."""
    out: list[tuple[str, bool]] = []
    for name, info in model.model_fields.items():
        key = f"{prefix}{name}"
        child = submodel(info.annotation)
        if child is not None:
            out += path_keys(child, f"{key}.")
            continue
        marks = [m for m in info.metadata if isinstance(m, SpecPath)]
        for arg in typing.get_args(info.annotation):  # `PathStr | None`
            marks += [m for m in getattr(arg, "__metadata__", ()) if isinstance(m, SpecPath)]
        if marks:
            out.append((key, marks[0].model))
    return out


# --- the map a spec records ------------------------------------------------------------------------

SECTION = "paths"


class PathsSpec(Section):
    map: list[str] = param(
        default_factory=list,
        description="LOCAL=REMOTE pairs `skillbank spec --path-map` recorded: the spec names the node's paths (REMOTE); every command that "
        "reads it on a machine where a LOCAL folder exists reads the data at LOCAL (spec, preflight, plan, train --dry-run, rl, submit, "
        "evaluate), so later commands need no --path-map. Job folders and TOMLs rendered for the node name REMOTE only and carry no map.",
    )

    @field_validator("map")
    @classmethod
    def _pairs_parse(cls, value: list[str]) -> list[str]:
        try:
            return PathMap.parse(value).items()
        except InputError as exc:
            raise ValueError(exc.message) from None


def recorded(data: dict[str, Any] | None) -> PathMap:
    """The map a spec dict records under paths.map, when it applies on this machine (else empty)."""
    section = (data or {}).get(SECTION)
    items = section.get("map") if isinstance(section, dict) else None
    if not items or not isinstance(items, list):
        return PathMap()
    try:
        found = PathMap.parse([str(i) for i in items])
    except InputError:
        return PathMap()  # the spec's validation names the bad entry
    return found if found.applies_here() else PathMap()


def local_view(data: dict[str, Any], model: type[BaseModel]) -> dict[str, Any]:
    """A spec dict read on this machine: paths under a REMOTE of its recorded map moved to LOCAL (unchanged without one)."""
    found = recorded(data)
    return found.local(data, model) if found else data
