#!/usr/bin/env bash
# The real engines the tests start for themselves: PostgreSQL (AutoML workers on one study), a
# one-node Slurm with munge (submit / jobs status / cancel / requeue) and a headless chromium (opens
# `skillbank report`'s page offline: every picture decodes, nothing is fetched). scripts/setup.sh runs this.
#   - all present: nothing to do;
#   - missing, root and apt-get: Debian's `postgresql slurm-wlm munge chromium`, quietly; no service is left
#     running (a policy-rc.d that denies every start is in place while apt runs; a new service that
#     started anyway is stopped by its system pid file); the tests start their own throwaway servers;
#   - missing otherwise (or apt-get failed, outside CI): one line says so and setup goes on; those tests
#     then say why they cannot run (skipped), except under CI=true, where they fail.
#     (chromium runs no service: nothing to stop after it installs.)
set -euo pipefail
have_postgres() { compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || command -v initdb >/dev/null 2>&1; }
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ]; }
missing=()
have_postgres || missing+=(postgresql)
{ have slurmctld && have slurmd && have sbatch; } || missing+=(slurm-wlm)
have munged || missing+=(munge)
{ have chromium || have chromium-browser; } || missing+=(chromium)
if [ ${#missing[@]} = 0 ]; then
  echo "setup: engines for the tests already here (PostgreSQL, Slurm, munge, chromium)"
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "setup: ${missing[*]} not installed and not root with apt-get: the PostgreSQL / Slurm / browser tests will say why they cannot run (install: sudo apt-get install postgresql slurm-wlm munge chromium)"
  exit 0
fi
echo "setup: ${missing[*]} from apt-get (running as root; no service is started)"
policy=/usr/sbin/policy-rc.d
own_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# skillbank setup: no service starts while apt installs the test engines\nexit 101\n' > "$policy"
  chmod 755 "$policy"
  own_policy=1
fi
cleanup() { if [ "$own_policy" = 1 ]; then rm -f "$policy"; fi; }
trap cleanup EXIT
export DEBIAN_FRONTEND=noninteractive
if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }; then
  case "${CI:-}" in
    1|true|yes) echo "setup: apt-get could not install ${missing[*]}: CI must run the engine tests" >&2; exit 1 ;;
    *) echo "setup: apt-get could not install ${missing[*]} (offline?): the PostgreSQL / Slurm / browser tests will say why they cannot run"; exit 0 ;;
  esac
fi
# A service the install started anyway (where no policy-rc.d could stop it) is stopped by its system pid
# file only (munge's and postgresql's init scripts do that; Slurm's would stop every slurmctld), never a
# test's own server.
for pkg in "${missing[@]}"; do
  case "$pkg" in
    postgresql) /etc/init.d/postgresql stop >/dev/null 2>&1 || true ;;
    munge) /etc/init.d/munge stop >/dev/null 2>&1 || true ;;
    slurm-wlm)
      for pidfile in /run/slurmctld.pid /run/slurmd.pid; do
        if [ -s "$pidfile" ]; then kill "$(cat "$pidfile")" 2>/dev/null || true; fi
      done ;;
  esac
done
have_postgres && have slurmctld && have munged && { have chromium || have chromium-browser; } || { echo "setup: the engines did not install" >&2; exit 1; }
echo "setup: engines installed: PostgreSQL $(basename "$(dirname "$(dirname "$(compgen -G '/usr/lib/postgresql/*/bin/initdb' | tail -1)")")"), $(PATH="$PATH:/usr/sbin" slurmctld -V), $(PATH="$PATH:/usr/sbin" munged -V | cut -d' ' -f1), $(chromium --version 2>/dev/null | cut -d' ' -f1-2)"
