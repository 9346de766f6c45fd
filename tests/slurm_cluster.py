"""A throwaway one-node Slurm for the tests: munged, slurmctld and slurmd from Debian's packages
(`slurm-wlm`, `munge`; scripts/setup.sh installs them where it runs as root), all in one folder.

Nothing is shared with a system Slurm: the munge key and socket, slurm.conf (SLURM_CONF), the state
and spool folders, pid and log files live under the cluster folder, and the daemons listen on free
ports, so two test sessions on one machine each get their own cluster. The daemons run in the
foreground as children of the test process (`-D` / `--foreground`) and `stop()` ends them, and any
job process still carrying one of this cluster's job ids, even when a test failed.

Why these settings (shared/docs/cpu-stack.md, "Real engines"): these sandboxes have no cgroups
(ProctrackType=proctrack/linuxproc, TaskPlugin=task/none) and no slurmdbd
(AccountingStorageType=accounting_storage/none: no sacct history; `scontrol show job` knows a finished
job for MinJobAge seconds). KillWait is short so a cancel or requeue does not wait 30 s for SIGKILL.

Slurm wants root here (SlurmUser=root, jobs run as the submitting user): `why_not()` says what is
missing; under CI=true a missing piece fails the test instead of skipping it.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

DAEMONS = ("munged", "slurmctld", "slurmd")
GPUS = 2  # generic resources "gpu" the node declares, backed by two character devices every machine has (no GPU behind them)
GPU_FILES = "/dev/null,/dev/zero"
CLIENTS = ("sbatch", "squeue", "scontrol", "scancel")


def why_not() -> str | None:
    """None when a cluster can start here, else the reason in one line."""
    missing = [tool for tool in (*DAEMONS, *CLIENTS) if shutil.which(tool) is None and not Path("/usr/sbin", tool).exists()]
    if missing:
        return f"Slurm is not installed ({', '.join(missing)} missing): `bash scripts/setup.sh` installs slurm-wlm and munge as root"
    if os.geteuid() != 0:
        return "a test Slurm runs its daemons as root (SlurmUser=root); run the tests as root (CI does)"
    return None


def _free_ports(count: int) -> list[int]:
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the test process dies, even by SIGKILL (Linux prctl)."""
    import ctypes
    import signal

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _exe(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


@dataclass
class Cluster:
    """A running one-node cluster; `env` is what a client (sbatch, skillbank submit) needs."""

    root: Path
    node: str
    cpus: int
    env: dict[str, str] = field(default_factory=dict)
    procs: list[subprocess.Popen] = field(default_factory=list)

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    def run(self, *argv: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
        """A Slurm client command against this cluster."""
        return subprocess.run(list(argv), env={**os.environ, **self.env}, capture_output=True, text=True, timeout=timeout, check=check)

    def job(self, job_id: str) -> dict[str, str]:
        """`scontrol show job` as key=value pairs ({} once the controller forgot it)."""
        out = self.run("scontrol", "-o", "show", "job", job_id, check=False).stdout
        return dict(item.split("=", 1) for item in out.split() if "=" in item)

    def job_pids(self, job_id: str | None = None) -> list[psutil.Process]:
        """Processes of this cluster's jobs (job_id: of that job), found by the SLURM_CONF and
        SLURM_JOB_ID that Slurm puts into every job process's environment."""
        found = []
        for proc in psutil.process_iter():
            try:
                env = proc.environ()
            except (psutil.Error, OSError):
                continue
            if env.get("SLURM_CONF") == str(self.conf) and "SLURM_JOB_ID" in env and (job_id is None or env["SLURM_JOB_ID"] == job_id):
                found.append(proc)
        return found

    def stepds(self) -> list[psutil.Process]:
        """This cluster's slurmstepd processes: their working directory is the cluster folder."""
        found = []
        for proc in psutil.process_iter(["name"]):
            try:
                if (proc.info["name"] or "").startswith("slurmstepd") and Path(proc.cwd()) == self.root.resolve():
                    found.append(proc)
            except (psutil.Error, OSError):
                continue
        return found

    def stop(self) -> None:
        """Cancel every job, end the daemons (SIGTERM, then SIGKILL), then kill what they left: job
        processes (by their SLURM_CONF) and slurmstepd processes (they daemonize, keeping slurmd's
        working directory, the cluster folder). Removes no file."""
        if self.procs and self.procs[-1].poll() is None:
            jobs = self.run("squeue", "-h", "-o", "%A", check=False).stdout.split()
            if jobs:
                self.run("scancel", *jobs, check=False)
                deadline = time.monotonic() + 20
                while self.run("squeue", "-h", "-o", "%A", check=False).stdout.strip() and time.monotonic() < deadline:
                    time.sleep(0.2)
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + 10
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        left = [*self.job_pids(), *self.stepds()]
        for proc in left:
            try:
                proc.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(left, timeout=5)


def _wait_for(what: str, check, timeout: float, cluster: Cluster) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        for proc in cluster.procs:
            if proc.poll() is not None:
                raise RuntimeError(f"{proc.args[0]} exited ({proc.returncode}) while waiting for {what}: {_logs(cluster)}")
        time.sleep(0.2)
    raise RuntimeError(f"timed out waiting for {what}: {_logs(cluster)}")


def _logs(cluster: Cluster) -> str:
    parts = []
    for name in ("munged.log", "slurmctld.log", "slurmd.log"):
        path = cluster.root / "log" / name
        if path.is_file():
            parts.append(f"--- {name}\n" + "".join(path.read_text(errors="replace").splitlines(keepends=True)[-15:]))
    return "\n".join(parts)


def write_conf(root: Path, node: str, cpus: int, memory_mb: int, ports: list[int], munge_socket: Path) -> Path:
    conf = root / "slurm.conf"
    conf.write_text("\n".join([
        f"ClusterName=skillbank-test-{secrets.token_hex(3)}",
        f"SlurmctldHost={node}(127.0.0.1)",
        f"SlurmctldPort={ports[0]}",
        f"SlurmdPort={ports[1]}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={munge_socket}",
        f"StateSaveLocation={root / 'state'}",
        f"SlurmdSpoolDir={root / 'spool'}",
        f"SlurmctldPidFile={root / 'run' / 'slurmctld.pid'}",
        f"SlurmdPidFile={root / 'run' / 'slurmd.pid'}",
        f"SlurmctldLogFile={root / 'log' / 'slurmctld.log'}",
        f"SlurmdLogFile={root / 'log' / 'slurmd.log'}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "AccountingStorageType=accounting_storage/none",
        "JobAcctGatherType=jobacct_gather/none",
        "JobCompType=jobcomp/none",
        "MpiDefault=none",
        "ReturnToService=2",
        "SchedulerType=sched/backfill",
        "SchedulerParameters=sched_interval=1",
        "KillWait=5",
        "MinJobAge=600",
        "InactiveLimit=0",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=30",
        "MailProg=/bin/true",
        "SlurmdParameters=config_overrides",  # the node has the CPUs below even on a 1-core machine
        "GresTypes=gpu",  # the node offers GPUS generic "gpu" resources (gres.conf) so a GPU job's sbatch is accepted
        f"NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mb} Gres=gpu:{GPUS} State=UNKNOWN",
        f"PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP",
        "",
    ]))
    (root / "gres.conf").write_text(f"AutoDetect=off\nNodeName={node} Name=gpu File={GPU_FILES}\n")  # beside slurm.conf, where Slurm reads it
    return conf


def start(root: Path, *, timeout: float = 60.0) -> Cluster:
    """Start munged, slurmctld and slurmd under `root`; the node is idle when this returns. On any
    failure what was started is stopped before the error propagates."""
    reason = why_not()
    if reason:
        raise RuntimeError(reason)
    for sub in ("munge", "state", "spool", "run", "log"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "munge").chmod(0o700)
    key = root / "munge" / "munge.key"
    key.write_bytes(secrets.token_bytes(1024))
    key.chmod(0o400)
    munge_socket = root / "munge" / "munge.socket"
    node = socket.gethostname().split(".")[0]
    cpus = max(2, os.cpu_count() or 1)  # a 2-rank CPU job fits anywhere
    memory_mb = max(512, psutil.virtual_memory().total // 2**20 // 2)
    conf = write_conf(root, node, cpus, memory_mb, _free_ports(2), munge_socket)
    cluster = Cluster(root=root, node=node, cpus=cpus, env={"SLURM_CONF": str(conf)})
    logs = root / "log"
    try:
        cluster.procs.append(subprocess.Popen(
            [_exe("munged"), "--foreground", "--force", f"--socket={munge_socket}", f"--key-file={key}",
             f"--pid-file={root / 'run' / 'munged.pid'}", f"--seed-file={root / 'munge' / 'munged.seed'}",
             f"--log-file={logs / 'munged.log'}"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent,
        ))
        _wait_for("munged's socket", munge_socket.exists, 15, cluster)
        env = {**os.environ, **cluster.env}
        for daemon in ("slurmctld", "slurmd"):
            cluster.procs.append(subprocess.Popen(
                [_exe(daemon), "-D", "-f", str(conf), *(["-i"] if daemon == "slurmctld" else [])],
                env=env, cwd=root, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
            ))
        _wait_for("an idle node", lambda: "idle" in cluster.run("sinfo", "-h", "-o", "%t", check=False).stdout, timeout, cluster)
    except BaseException:
        cluster.stop()
        raise
    return cluster
