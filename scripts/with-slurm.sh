#!/usr/bin/env bash
# Runs CMD with a throwaway Slurm (Debian's slurm-wlm 22.05 and munge), for the Slurm hand-off tests:
#   scripts/with-slurm.sh CMD [ARGS...]
# Everything lives in a temporary folder: a fresh munge key and munged on a socket there, slurmctld and
# one slurmd on 127.0.0.1 at free ports, a generated slurm.conf (select/cons_tres, GresTypes=gpu,
# proctrack/linuxproc, task/none, no accounting) and gres.conf (AutoDetect=off, typed gpu GRES over
# placeholder files in the folder: links to /dev/null, /dev/zero and /dev/full, since slurmd wants a
# character device as File= for gpu GRES; no GPU is touched). The node
# `gpuplan-slurm` has the GRES gpuplan's Slurm export names for an A100 80GB with two 3g.40gb MIG
# instances and a whole A100: Gres=gpu:3g.40gb:2,gpu:a100-80gb-sxm4:1. All of it is stopped and removed
# when CMD ends, fails or is interrupted. CMD gets:
#   GPUPLAN_TEST_SLURM=1, SLURM_CONF (the client tools read it), GPUPLAN_TEST_SLURM_NODE, _PARTITION
# When GPUPLAN_TEST_SLURM is already set, CMD runs as it is. Without slurm-wlm installed it fails
# (`make deps` installs it); GPUPLAN_WITHOUT_SLURM=1 runs CMD without Slurm instead (the Slurm tests skip).
# Runs the daemons as the calling user (root in CI: SlurmUser=root).
set -euo pipefail

SLURM_SBIN="${GPUPLAN_SLURM_SBIN:-/usr/sbin}"
NODE=gpuplan-slurm
PARTITION=gpuplan
# The node's CPUs as Slurm counts them (config_overrides: slurmd does not check the machine), enough
# for every GRES to hold a one-CPU job at once.
NODE_CPUS=8
START_TIMEOUT_S=30  # slurmctld + slurmd answer in 2-5 s on an idle machine

if [ $# -eq 0 ]; then
  echo "usage: $0 CMD [ARGS...]   (runs CMD with a throwaway Slurm; GPUPLAN_TEST_SLURM=1 says so)" >&2
  exit 2
fi
if [ -n "${GPUPLAN_TEST_SLURM:-}" ]; then
  exec "$@"
fi
if [ ! -x "$SLURM_SBIN/slurmctld" ] || [ ! -x "$SLURM_SBIN/slurmd" ] || ! command -v munged >/dev/null 2>&1; then
  if [ "${GPUPLAN_WITHOUT_SLURM:-}" = "1" ]; then
    echo "with-slurm: no slurmctld/slurmd/munged; running without Slurm (GPUPLAN_WITHOUT_SLURM=1)" >&2
    exec "$@"
  fi
  echo "with-slurm: slurmctld, slurmd or munged not found: install slurm-wlm and munge (make deps), or set" \
       "GPUPLAN_WITHOUT_SLURM=1 to skip the Slurm tests" >&2
  exit 1
fi

t0=$(date +%s.%N)
tmp="$(mktemp -d "${TMPDIR:-/tmp}/gpuplan-slurm.XXXXXX")"
chmod 755 "$tmp"
mkdir -p "$tmp/state" "$tmp/spool/gpuplan-slurm" "$tmp/munge" "$tmp/dev"
chmod 700 "$tmp/munge"

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  for pidfile in "$tmp/slurmd.pid" "$tmp/slurmctld.pid" "$tmp/munge/munged.pid"; do
    if [ -s "$pidfile" ]; then kill "$(cat "$pidfile")" 2>/dev/null || true; fi
  done
  # The holding jobs' steps (sleep infinity) are the slurmd's children: gone with it; wait for the daemons.
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    alive=0
    for pidfile in "$tmp/slurmd.pid" "$tmp/slurmctld.pid" "$tmp/munge/munged.pid"; do
      if [ -s "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then alive=1; fi
    done
    [ "$alive" = 0 ] && break
    sleep 0.2
  done
  for pidfile in "$tmp/slurmd.pid" "$tmp/slurmctld.pid" "$tmp/munge/munged.pid"; do
    if [ -s "$pidfile" ]; then kill -9 "$(cat "$pidfile")" 2>/dev/null || true; fi
  done
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}
ctld_port=$(free_port)
slurmd_port=$(free_port)
while [ "$slurmd_port" = "$ctld_port" ]; do slurmd_port=$(free_port); done
host="$(hostname -s)"
me="$(id -un)"

# munge: a key of its own and a socket in the folder (the system's munged, if any, is not used).
dd if=/dev/urandom of="$tmp/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$tmp/munge/munge.key"
munged --force --key-file="$tmp/munge/munge.key" --socket="$tmp/munge/munge.sock" \
  --pid-file="$tmp/munge/munged.pid" --log-file="$tmp/munge/munged.log" --seed-file="$tmp/munge/munged.seed"

# slurmd wants each File= to be a character device: links to three harmless ones stand in for GPUs.
ln -s /dev/null "$tmp/dev/gpu0"
ln -s /dev/zero "$tmp/dev/gpu1"
ln -s /dev/full "$tmp/dev/gpu2"
cat >"$tmp/gres.conf" <<EOF
AutoDetect=off
NodeName=$NODE Name=gpu Type=3g.40gb File=$tmp/dev/gpu0
NodeName=$NODE Name=gpu Type=3g.40gb File=$tmp/dev/gpu1
NodeName=$NODE Name=gpu Type=a100-80gb-sxm4 File=$tmp/dev/gpu2
EOF
cat >"$tmp/slurm.conf" <<EOF
ClusterName=gpuplan
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=$me
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$tmp/munge/munge.sock
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool/%n
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MailProg=/bin/true
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
SchedulerParameters=sched_interval=1
MessageTimeout=10
NodeName=$NODE NodeHostname=$host NodeAddr=127.0.0.1 CPUs=$NODE_CPUS Gres=gpu:3g.40gb:2,gpu:a100-80gb-sxm4:1 State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$tmp/slurm.conf"

"$SLURM_SBIN/slurmctld" -f "$SLURM_CONF" -i
"$SLURM_SBIN/slurmd" -f "$SLURM_CONF" -N "$NODE"

ready=0
deadline=$(( $(date +%s) + START_TIMEOUT_S ))
while [ "$(date +%s)" -lt "$deadline" ]; do
  state="$(sinfo -h -n "$NODE" -o %T 2>/dev/null || true)"
  case "$state" in
    idle*|mixed*|allocated*) ready=1; break ;;
  esac
  sleep 0.2
done
if [ "$ready" != 1 ]; then
  echo "with-slurm: the node did not come up within ${START_TIMEOUT_S} s (state '${state:-}'):" >&2
  tail -n 20 "$tmp/slurmctld.log" "$tmp/slurmd.log" >&2 || true
  exit 1
fi
t1=$(date +%s.%N)
echo "with-slurm: Slurm $("$SLURM_SBIN/slurmctld" -V | awk '{print $2}') on 127.0.0.1:$ctld_port, node $NODE up in" \
     "$(python3 -c "print(f'{$t1 - $t0:.1f}')") s (removed afterwards)" >&2

export GPUPLAN_TEST_SLURM=1
export GPUPLAN_TEST_SLURM_NODE="$NODE"
export GPUPLAN_TEST_SLURM_PARTITION="$PARTITION"
child=""
forward() {
  [ -n "$child" ] && kill "-$1" "$child" 2>/dev/null
  wait "$child" 2>/dev/null
  exit "$2"
}
"$@" <&0 &
child=$!
trap 'forward INT 130' INT
trap 'forward TERM 143' TERM
set +e
wait "$child"
rc=$?
set -e
exit "$rc"
