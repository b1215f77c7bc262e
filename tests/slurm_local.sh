#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, for the srun test in
# tests/multiproc_test.cc (srun --mpi=pmix: cf_init joins through PMIx).
# For disposable machines only (CI): as root it installs slurmctld, slurmd
# and munge, writes /etc/slurm/slurm.conf and starts the daemons by hand
# (no systemd needed, no cgroups). Idempotent; exits non-zero with the
# reason when the cluster does not come up.
#
#   tests/slurm_local.sh          set up (or check) the cluster
#   tests/slurm_local.sh stop     stop the daemons
set -euo pipefail

die() { echo "slurm_local: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "needs root (it installs packages and starts daemons)"

stop_daemon() {  # name
  pkill -x "$1" 2>/dev/null || return 0
  for _ in $(seq 1 20); do pgrep -x "$1" >/dev/null || return 0; sleep 0.25; done
  pkill -9 -x "$1" 2>/dev/null || true
}

if [ "${1:-}" = stop ]; then
  stop_daemon slurmd
  stop_daemon slurmctld
  stop_daemon munged
  exit 0
fi

# Packages. The PMIx plugin loads libpmix.so, which only libpmix-dev ships.
packages=(slurmctld slurmd slurm-client munge slurm-wlm-basic-plugins libpmix-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "install ok installed" >/dev/null || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq >/dev/null 2>&1 || true
  DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    >/dev/null 2>&1 || die "apt-get install ${missing[*]} failed"
fi
[ -e /usr/lib/x86_64-linux-gnu/slurm-wlm/mpi_pmix.so ] || die "no mpi_pmix.so in slurm-wlm-basic-plugins"

# Munge: the key (the package makes one), its directories, the daemon.
if [ ! -s /etc/munge/munge.key ]; then
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
fi
chown munge:munge /etc/munge/munge.key
chmod 0400 /etc/munge/munge.key
install -d -o munge -g munge -m 0755 /run/munge
install -d -o munge -g munge -m 0700 /var/log/munge
install -d -o munge -g munge -m 0711 /var/lib/munge
munge_ok() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }
if ! munge_ok; then
  stop_daemon munged
  rm -f /run/munge/munge.socket.2 /run/munge/munged.pid
  runuser -u munge -- /usr/sbin/munged || die "munged did not start (/var/log/munge/munged.log)"
  for _ in $(seq 1 40); do munge_ok && break; sleep 0.25; done
  munge_ok || die "munge -n | unmunge fails"
fi

# slurm.conf for this node as slurmd -C sees it (memory: 90% of it).
node=$(hostname -s)
hw=$(slurmd -C | head -1)
field() { tr ' ' '\n' <<<"$hw" | sed -n "s/^$1=//p"; }
cpus=$(field CPUs) mem=$(field RealMemory)
[ -n "$cpus" ] && [ -n "$mem" ] || die "cannot read 'slurmd -C': $hw"
install -d -m 0755 /etc/slurm /var/log/slurm /var/spool/slurmctld /var/spool/slurmd
conf=$(mktemp)
cat >"$conf" <<EOF
# Written by carflow tests/slurm_local.sh: a one-node cluster for tests.
ClusterName=carflow
SlurmctldHost=${node}(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
ReturnToService=2
MailProg=/bin/true
NodeName=${node} NodeAddr=127.0.0.1 CPUs=${cpus} Boards=$(field Boards) SocketsPerBoard=$(field SocketsPerBoard) CoresPerSocket=$(field CoresPerSocket) ThreadsPerCore=$(field ThreadsPerCore) RealMemory=$((mem * 90 / 100)) State=UNKNOWN
PartitionName=debug Nodes=${node} Default=YES MaxTime=INFINITE State=UP
EOF
if ! cmp -s "$conf" /etc/slurm/slurm.conf; then
  install -m 0644 "$conf" /etc/slurm/slurm.conf
  stop_daemon slurmd
  stop_daemon slurmctld
  # State of another configuration (slurmctld refuses a changed cluster name).
  rm -rf /var/spool/slurmctld/* /var/spool/slurmd/*
fi
rm -f "$conf"

pgrep -x slurmctld >/dev/null || /usr/sbin/slurmctld || die "slurmctld did not start (/var/log/slurm/slurmctld.log)"
deadline=$((SECONDS + 60))
until timeout 5 scontrol ping 2>/dev/null | grep "is UP" >/dev/null; do
  [ $SECONDS -lt $deadline ] || die "slurmctld does not answer (/var/log/slurm/slurmctld.log)"
  sleep 0.5
done
pgrep -x slurmd >/dev/null || /usr/sbin/slurmd || die "slurmd did not start (/var/log/slurm/slurmd.log)"
state=""
deadline=$((SECONDS + 60))
while [ $SECONDS -lt $deadline ]; do
  state=$(timeout 5 sinfo -h -n "$node" -o %T 2>/dev/null | head -1 || true)
  case "$state" in
    idle | mixed | allocated | completing) echo "slurm_local: node $node is $state"; exit 0 ;;
    down* | drain* | fail*) timeout 5 scontrol update nodename="$node" state=resume 2>/dev/null || true ;;
  esac
  sleep 0.5
done
die "node $node is '$state', not idle (scontrol show node $node)"
