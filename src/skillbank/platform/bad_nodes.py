"""Which node a failed job's logs blame: what `jobs diagnose` names and `submit --retry-of` excludes.

Evidence, strongest first:
  xid / ecc     a GPU fault on a node: the kernel's `NVRM: Xid (...)`, "GPU has fallen off the bus", an
                uncorrectable ECC or NVLink error in a CUDA error line. The node is the host the line names
                (syslog's or NCCL's `host:pid:tid` prefix), else the node whose log folder (node_<i>) holds it.
  nccl_timeout  a collective that timed out (torch's watchdog: `[Rank R] Watchdog caught collective operation
                timeout`). Every healthy rank reports it while it waits for the one that hangs, so when some
                ranks of the job stayed silent, their nodes are blamed; when all reported (or the ranks are not
                known), the reporting ranks' nodes are named, as weaker evidence. A rank maps to its node as
                rank // GPUs per node (one task per node, ranks in node order, as cosmos-rl's launcher starts them).
The node index maps to its host through the job's node list (the batch log's `skillbank: nodes a;b` line, or
`... attempt N on HOST` for one node). Nothing is written; a line's text is kept as evidence (secrets masked).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from skillbank.redaction import redact

HARDWARE = re.compile(r"NVRM: Xid|Xid \(PCI|fallen off the bus|uncorrectable ECC|ECC error|cudaErrorECCUncorrectable|uncorrectable NVLink", re.I)
NCCL_TIMEOUT = re.compile(r"Watchdog caught collective operation timeout|Timeout at NCCL work|NCCL (?:communicator|operation).*timed? ?out", re.I)
RANK = re.compile(r"\[(?:PG \d+ )?[Rr]ank ?(\d+)\]")
HOST_PREFIX = (re.compile(r"^(?P<host>[A-Za-z0-9][\w.-]*):\d+:\d+ \[\d+\] NCCL"),  # NCCL's own lines
               re.compile(r"^\w{3}\s+\d+ [\d:]+ (?P<host>[A-Za-z0-9][\w.-]*) kernel:"))  # syslog / dmesg -T copied into a log
NODE_FOLDER = re.compile(r"^node_(\d+)$")
NODES_LINE = re.compile(r"skillbank: nodes (\S+), controller")
ATTEMPT_LINE = re.compile(r"skillbank: job \S+ attempt \d+ on (\S+) at")


def node_list(batch_log: str | Path | None) -> list[str]:
    """The job's hosts in node order, from its last attempt's batch log lines ([] when unknown)."""
    try:
        text = Path(batch_log).read_text(encoding="utf-8", errors="replace") if batch_log else ""
    except OSError:
        return []
    nodes = NODES_LINE.findall(text)
    if nodes:
        return [n for n in nodes[-1].split(";") if n]
    hosts = ATTEMPT_LINE.findall(text)
    return [hosts[-1]] if hosts else []


def _folder_index(log: Path) -> int | None:
    for part in log.parts[::-1]:
        m = NODE_FOLDER.match(part)
        if m:
            return int(m.group(1))
    return None


def _host_of(line: str) -> str | None:
    for pattern in HOST_PREFIX:
        m = pattern.match(line)
        if m:
            return m.group("host")
    return None


def blame(lines: dict[Path, list[str]], hosts: list[str], gpus_per_node: int | None) -> list[dict[str, Any]]:
    """[{node, why, evidence, log}] for each node the logs point at, strongest evidence first (one entry a node)."""
    found: dict[str, dict[str, Any]] = {}
    reporting: dict[int, tuple[str, Path]] = {}

    def node_of(index: int | None, host: str | None) -> str | None:
        if host:
            return host
        if index is not None and index < len(hosts):
            return hosts[index]
        return f"node_{index}" if index is not None else (hosts[0] if len(hosts) == 1 else None)

    for log, text in lines.items():
        index = _folder_index(log)
        for line in text:
            if HARDWARE.search(line):
                name = node_of(index, _host_of(line))
                if name and name not in found:
                    why = "xid" if "xid" in line.lower() or "fallen off" in line.lower() else "ecc"
                    found[name] = {"node": name, "why": why, "evidence": redact(line.strip())[:300], "log": str(log)}
            elif NCCL_TIMEOUT.search(line):
                m = RANK.search(line)
                if m:
                    reporting.setdefault(int(m.group(1)), (line, log))
    if reporting and gpus_per_node:
        world = len(hosts) * gpus_per_node if hosts else 0
        silent = [r for r in range(world) if r not in reporting]
        if silent and len(silent) < world:
            for rank in silent:
                name = node_of(rank // gpus_per_node, None)
                if name and name not in found:
                    line, log = next(iter(reporting.values()))
                    found[name] = {"node": name, "why": "nccl_timeout", "rank": rank,
                                   "evidence": f"rank {rank} never reported the collective timeout its peers did: {redact(line.strip())[:240]}", "log": str(log)}
        else:
            for rank, (line, log) in sorted(reporting.items()):
                name = node_of(rank // gpus_per_node, None)
                if name and name not in found:
                    found[name] = {"node": name, "why": "nccl_timeout_reported", "rank": rank, "evidence": redact(line.strip())[:300], "log": str(log)}
    return list(found.values())
