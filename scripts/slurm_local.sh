#!/usr/bin/env bash
# A real one-node SLURM on this machine, for the tests and for trying `gamut-local slurm` on a
# laptop: munged + slurmctld + slurmd from the distribution's packages, started as plain
# background daemons (no systemd needed), with fake GPUs (gres backed by /dev/null).
#
#   bash scripts/slurm_local.sh start    install the packages if missing, write the config,
#                                        start the daemons, wait until the node is idle
#   bash scripts/slurm_local.sh stop     cancel every job, stop the daemons `start` started
#   bash scripts/slurm_local.sh status   the daemons' PIDs and the node's state (exit 1 if down)
#
# Needs root (it writes /etc/slurm and starts daemons) and, for the install, apt-get (Debian or
# Ubuntu: slurmctld slurmd slurm-client munge). `start` is idempotent; `stop` signals only the
# PIDs `start` recorded under /run/gamut-slurm-local/, and only while they are still those daemons.
#
# Settings (environment):
#   SLURM_LOCAL_GPUS=4          fake GPUs on the node (0: no gres at all)
#   SLURM_LOCAL_CPUS=8          CPUs the node claims; more than the machine has is allowed
#                               (test jobs mostly wait), and GPUS x cpus_per_gpu must fit
#   SLURM_LOCAL_MEM_MB=         memory the node claims (default: 80% of MemTotal)
#   SLURM_LOCAL_PARTITION=debug
#   SLURM_LOCAL_KILL_INVALID_DEPEND=1  a job whose afterok can never be met is cancelled at once
#                               (0: SLURM's default, it stays PENDING DependencyNeverSatisfied)
#   SLURM_LOCAL_INSTALL=1       apt-get install the packages when a binary is missing
#   SLURM_LOCAL_TIMEOUT=60      seconds to wait for the node to become idle
#   SLURM_LOCAL_FORCE=0         1: replace an /etc/slurm/slurm.conf this script did not write
set -euo pipefail

GPUS=${SLURM_LOCAL_GPUS:-4}
CPUS=${SLURM_LOCAL_CPUS:-8}
MEM_MB=${SLURM_LOCAL_MEM_MB:-$(awk '/^MemTotal:/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)}
PARTITION=${SLURM_LOCAL_PARTITION:-debug}
KILL_INVALID=${SLURM_LOCAL_KILL_INVALID_DEPEND:-1}
INSTALL=${SLURM_LOCAL_INSTALL:-1}
TIMEOUT=${SLURM_LOCAL_TIMEOUT:-60}
FORCE=${SLURM_LOCAL_FORCE:-0}

CONF=/etc/slurm/slurm.conf
TEMPLATE=$(dirname "$0")/slurm.conf.template   # shared with tests/cluster/test_two_nodes.py
GRES_CONF=/etc/slurm/gres.conf
MARK="# written by gamut_local scripts/slurm_local.sh"
RUN_DIR=/run/gamut-slurm-local    # started.<daemon> holds the PID of each daemon `start` launched
FAKE_GPU_DIR=/var/lib/slurm/fake-gpu
STATE_DIR=/var/lib/slurm/slurmctld
SPOOL_DIR=/var/lib/slurm/slurmd
LOG_DIR=/var/log/slurm
PACKAGES=(slurmctld slurmd slurm-client munge)  # not slurm-wlm: that pulls in ~40 more packages

say() { echo "slurm_local: $*"; }
die() { echo "slurm_local: $*" >&2; exit 1; }

# pid_of PIDFILE BINARY: the PID in PIDFILE when that process is alive and runs BINARY
pid_of() {
  local pid
  [ -s "$1" ] || return 1
  pid=$(tr -dc 0-9 < "$1")
  [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
  [ "$(readlink -f "/proc/$pid/exe" 2>/dev/null)" = "$(readlink -f "$2")" ] || return 1
  echo "$pid"
}
munged_pid() { pid_of /run/munge/munged.pid /usr/sbin/munged; }
ctld_pid() { pid_of /run/slurmctld.pid /usr/sbin/slurmctld; }
slurmd_pid() { pid_of /run/slurmd.pid /usr/sbin/slurmd; }
node() { hostname -s; }
node_state() { sinfo -h -n "$(node)" -o '%t' 2>/dev/null | head -1; }

install_packages() {
  local missing=0 b
  for b in /usr/sbin/munged /usr/sbin/slurmctld /usr/sbin/slurmd /usr/bin/sbatch /usr/bin/sinfo; do
    [ -x "$b" ] || missing=1
  done
  [ $missing = 1 ] || return 0
  [ "$INSTALL" = 1 ] || die "SLURM is not installed: apt-get install ${PACKAGES[*]}"
  command -v apt-get >/dev/null || die "SLURM is not installed and there is no apt-get to install it (${PACKAGES[*]})"
  say "installing ${PACKAGES[*]}"
  local t0=$SECONDS own_policy=0
  # The packages' maintainer scripts would start the services; this script starts them itself.
  # A policy-rc.d that says "no" stops them, added only when the machine has none of its own.
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && own_policy=1
  fi
  local rc=0
  { apt-get update -q >/dev/null \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${PACKAGES[@]}" >/dev/null; } || rc=$?
  [ $own_policy = 1 ] && rm -f /usr/sbin/policy-rc.d
  [ $rc = 0 ] || die "apt-get install ${PACKAGES[*]} failed (exit $rc)"
  say "installed in $((SECONDS - t0)) s"
}

start_munge() {
  if [ ! -s /etc/munge/munge.key ]; then
    mungekey --create --keyfile=/etc/munge/munge.key 2>/dev/null \
      || dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
  fi
  chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
  # Without systemd nothing creates /run/munge (a tmpfs, empty at boot).
  install -d -o munge -g munge -m 0755 /run/munge
  install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
  local pid
  if pid=$(munged_pid); then
    say "munged already running (PID $pid); using it, and leaving it running at stop"
  else
    runuser -u munge -- /usr/sbin/munged || die "munged did not start (see /var/log/munge/munged.log)"
    for _ in $(seq 50); do pid=$(munged_pid) && break; sleep 0.1; done
    [ -n "${pid:-}" ] || die "munged wrote no PID file"
    echo "$pid" > "$RUN_DIR/started.munged"
  fi
  munge -n | unmunge >/dev/null || die "munge credential round trip failed"
}

# render_conf: the template with each ${NAME} replaced by that variable of the environment
render_conf() {
  local text name
  text=$(<"$TEMPLATE")
  for name in $(grep -o '\${[A-Z_]*}' "$TEMPLATE" | tr -d '${}' | sort -u); do
    [ -n "${!name+set}" ] || die "$TEMPLATE: \${$name} has no value"
    text=${text//"\${$name}"/${!name}}
  done
  printf '%s\n' "$text"
}

write_config() {
  local n gres_types="" gres_node="" deps=""
  n=$(node)
  if [ -e "$CONF" ] && ! grep -qF "$MARK" "$CONF" && [ "$FORCE" != 1 ]; then
    die "$CONF exists and was not written by this script (SLURM_LOCAL_FORCE=1 replaces it)"
  fi
  install -d -m 0755 /etc/slurm
  install -d -o slurm -g slurm -m 0755 "$STATE_DIR" "$SPOOL_DIR" "$LOG_DIR"
  # A fresh controller state at every start: a DRAIN/INVAL node state or old jobs never come back.
  rm -rf "${STATE_DIR:?}"/* "${SPOOL_DIR:?}"/*
  if [ "$GPUS" -gt 0 ]; then
    # slurmd drops a GPU without a File= ("Removing file-less GPU", node INVAL), and the file
    # must be a character device: symlinks to /dev/null.
    rm -rf "$FAKE_GPU_DIR" && mkdir -p "$FAKE_GPU_DIR"
    for ((i = 0; i < GPUS; i++)); do ln -s /dev/null "$FAKE_GPU_DIR/gpu$i"; done
    printf '%s\nNodeName=%s Name=gpu File=%s/gpu[0-%d]\n' "$MARK" "$n" "$FAKE_GPU_DIR" $((GPUS - 1)) > "$GRES_CONF"
    gres_types="GresTypes=gpu" gres_node="Gres=gpu:$GPUS"
  else
    rm -f "$GRES_CONF"
  fi
  [ "$KILL_INVALID" = 1 ] && deps="DependencyParameters=kill_invalid_depend"
  CLUSTER=local CTLD_HOST=$n CTLD_ADDR=127.0.0.1 CTLD_PORT=6817 SLURMD_PORT=6818 \
  DEPENDENCY_PARAMETERS=$deps STATE_DIR=$STATE_DIR SPOOL_DIR=$SPOOL_DIR LOG_DIR=$LOG_DIR \
  CTLD_PID_FILE=/run/slurmctld.pid SLURMD_PID_FILE=/run/slurmd.pid SLURMD_LOG_FILE=$LOG_DIR/slurmd.log \
  GRES_TYPES=$gres_types PARTITION=$PARTITION NODE_LIST=$n \
  NODES="NodeName=$n NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MB $gres_node State=UNKNOWN" \
    render_conf > "$CONF"
}

# start_daemon NAME PIDFN: launch /usr/sbin/NAME (it forks), record the PID it writes
start_daemon() {
  local pid=""
  "/usr/sbin/$1" || die "$1 did not start; see $LOG_DIR/$1.log"
  for _ in $(seq 50); do pid=$($2) && break; sleep 0.1; done
  [ -n "$pid" ] || die "$1 exited; last log lines: $(tail -n 5 "$LOG_DIR/$1.log" 2>/dev/null)"
  echo "$pid" > "$RUN_DIR/started.$1"
}

wait_idle() {
  local deadline=$((SECONDS + TIMEOUT)) state="" resumed=0
  while [ $SECONDS -lt $deadline ]; do
    state=$(node_state)
    case $state in
      idle) return 0 ;;
      drain*|down*|inval*|fail*)
        [ $resumed = 1 ] || { scontrol update nodename="$(node)" state=resume 2>/dev/null || true; resumed=1; } ;;
    esac
    sleep 0.2
  done
  echo "slurm_local: node $(node) is '${state:-unknown}' after ${TIMEOUT} s, not idle" >&2
  sinfo -R >&2 || true
  tail -n 5 "$LOG_DIR/slurmctld.log" "$LOG_DIR/slurmd.log" >&2 || true
  return 1
}

cmd_status() {
  local m c d
  m=$(munged_pid || echo -) c=$(ctld_pid || echo -) d=$(slurmd_pid || echo -)
  say "munged $m, slurmctld $c, slurmd $d; node $(node) is '$(node_state || true)'"
  [ "$c" != - ] && [ "$d" != - ] && [ "$m" != - ]
}

cmd_start() {
  [ "$(id -u)" = 0 ] || die "must run as root (it installs packages, writes /etc/slurm and starts daemons)"
  [[ "$GPUS" =~ ^[0-9]+$ && "$CPUS" =~ ^[1-9][0-9]*$ && "$MEM_MB" =~ ^[1-9][0-9]*$ ]] \
    || die "SLURM_LOCAL_GPUS/CPUS/MEM_MB must be whole numbers (got '$GPUS'/'$CPUS'/'$MEM_MB')"
  install_packages
  if munged_pid >/dev/null && ctld_pid >/dev/null && slurmd_pid >/dev/null; then
    case $(node_state) in
      idle|mix|alloc|comp*) say "already running"; cmd_status; return 0 ;;
    esac
  fi
  if ctld_pid >/dev/null || slurmd_pid >/dev/null; then
    [ -s "$RUN_DIR/started.slurmctld" ] || [ -s "$RUN_DIR/started.slurmd" ] \
      || die "a slurmctld or slurmd this script did not start is running; stop it first"
    say "an earlier start is half up; stopping it first"
    cmd_stop
  fi
  mkdir -p "$RUN_DIR"
  local t0=$SECONDS
  start_munge
  write_config
  start_daemon slurmctld ctld_pid
  start_daemon slurmd slurmd_pid
  wait_idle || exit 1
  say "node $(node) idle after $((SECONDS - t0)) s (CPUs=$CPUS RealMemory=${MEM_MB}M GPUs=$GPUS partition=$PARTITION)"
  cmd_status
}

# started PID of DAEMON, when the process is still that daemon (else forget it)
started_pid() {
  local f="$RUN_DIR/started.$1" pid
  [ -s "$f" ] || return 1
  pid=$(tr -dc 0-9 < "$f")
  if [ -n "$pid" ] && [ -d "/proc/$pid" ] \
     && [ "$(readlink -f "/proc/$pid/exe" 2>/dev/null)" = "$(readlink -f "/usr/sbin/$1")" ]; then
    echo "$pid"
  else
    rm -f "$f"
    return 1
  fi
}

cmd_stop() {
  [ "$(id -u)" = 0 ] || die "must run as root"
  local rc=0 jobs pid d
  # Cancel the jobs while the controller is up, so no job step outlives slurmd.
  if started_pid slurmctld >/dev/null; then
    jobs=$(squeue -h -o '%A' 2>/dev/null | sort -u | tr '\n' ' ')
    if [ -n "${jobs// /}" ]; then
      say "cancelling jobs $jobs"
      # shellcheck disable=SC2086
      scancel $jobs 2>/dev/null || true
      for _ in $(seq 50); do [ -z "$(squeue -h -o '%A' 2>/dev/null)" ] && break; sleep 0.2; done
    fi
  fi
  for d in slurmd slurmctld munged; do
    pid=$(started_pid "$d") || continue
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
    if [ -d "/proc/$pid" ]; then
      say "$d (PID $pid) ignored SIGTERM; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      sleep 0.5
    fi
    if [ -d "/proc/$pid" ]; then
      echo "slurm_local: $d (PID $pid) is still running" >&2
      rc=1
    else
      say "stopped $d (PID $pid)"
      rm -f "$RUN_DIR/started.$d"
    fi
  done
  return $rc
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  *) echo "usage: bash scripts/slurm_local.sh start|stop|status" >&2; exit 2 ;;
esac
