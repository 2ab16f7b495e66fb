#!/usr/bin/env bash
# A highly available gpucloud on one machine, to try it out (issue 21): a 3-member etcd cluster,
# three gpucloud servers on it (one leads and schedules, two stand by and serve the API), and one
# agent with simulated GPUs that knows all three servers. docs/operations.md says how to run the
# same on three machines.
#
#   examples/ha/up.sh [DIR]          start it, print how to use it, stop it all on Ctrl-C
#   examples/ha/up.sh --smoke [DIR]  start it, run a job, kill -9 the leader, run another job
#                                    through the servers that are left, pause the next leader
#                                    and run one meanwhile, kill an etcd member and run one,
#                                    stop, exit 0 (a test)
#
# DIR (default: a new /tmp/gpucloud-ha.XXXXXX) holds etcd's members (etcd-1..3), the servers'
# data directories (server-1..3: server-1 made the credentials, the others joined with its
# keys/join.key),
# the shared task logs (logs/), the agent's state, every process's output (*.log) and
# gpuctl.config, a client config that lists the three servers.
# Environment: BUILD_DIR (build), BASE_PORT (24000: etcd clients on BASE+1..3, etcd peers on
# BASE+11..13, servers on BASE+21..23), LEASE (the leader lease in seconds, 3), GPUS (4xH100).
set -euo pipefail
cd "$(dirname "$0")/../.."

smoke=false
if [[ ${1:-} == --smoke ]]; then smoke=true; shift; fi
build=${BUILD_DIR:-build}
gpucloud=$(realpath "$build/apps/gpucloud")
gpuctl=$(realpath "$build/apps/gpuctl")
base=${BASE_PORT:-24000}
lease=${LEASE:-3}
gpus=${GPUS:-4xH100}
# Exit 77 (a test's "skipped") in --smoke mode when what it needs is missing, else 2.
missing=2
$smoke && missing=77
for tool in etcd etcdctl python3; do
  command -v "$tool" >/dev/null || { echo "up.sh: needs $tool (scripts/install-deps)" >&2; exit $missing; }
done
if [[ $(id -u) -ne 0 ]]; then
  echo "up.sh: needs root (the agent runs tasks as their namespace's user)" >&2
  exit $missing
fi
made_dir=false
if [[ -n ${1:-} ]]; then dir=$1; else dir=$(mktemp -d /tmp/gpucloud-ha.XXXXXX) && made_dir=true; fi
mkdir -p "$dir"
dir=$(realpath "$dir")
chmod 711 "$dir"  # tasks run as unprivileged users and pass through to their directories

pids=()
passed=false
cleanup() {
  for pid in "${pids[@]}"; do kill -CONT "$pid" 2>/dev/null || true; done  # a paused one too
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  # A smoke run that passed leaves nothing behind; one that failed keeps its logs.
  if $smoke && $passed && $made_dir; then rm -rf "$dir"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...: poll until the command succeeds
  local end=$((SECONDS + $1)) what=$2
  shift 2
  while ((SECONDS < end)); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  echo "up.sh: timed out waiting for $what (the logs are in $dir)" >&2
  exit 1
}

# --- etcd: three members -------------------------------------------------------------------
cluster="" endpoints=""
for i in 1 2 3; do
  cluster+="${cluster:+,}m$i=http://127.0.0.1:$((base + 10 + i))"
  endpoints+="${endpoints:+,}127.0.0.1:$((base + i))"
done
for i in 1 2 3; do
  etcd --name "m$i" --data-dir "$dir/etcd-$i" \
    --listen-client-urls "http://127.0.0.1:$((base + i))" \
    --advertise-client-urls "http://127.0.0.1:$((base + i))" \
    --listen-peer-urls "http://127.0.0.1:$((base + 10 + i))" \
    --initial-advertise-peer-urls "http://127.0.0.1:$((base + 10 + i))" \
    --initial-cluster "$cluster" --initial-cluster-state new \
    --initial-cluster-token gpucloud-ha --max-txn-ops 4096 --pre-vote >"$dir/etcd-$i.log" 2>&1 &
  pids+=($!)
done
etcdctl_() { ETCDCTL_API=3 etcdctl --endpoints "$endpoints" "$@"; }
wait_for 30 "etcd's three members" etcdctl_ endpoint health --cluster
echo "etcd: 3 members on $endpoints"

# --- three servers ---------------------------------------------------------------------------
server() {  # server I [--init]: starts server I in the background
  local i=$1
  shift
  "$gpucloud" server --data-dir "$dir/server-$i" --store "etcd://$endpoints" \
    --listen "127.0.0.1:$((base + 20 + i))" --leader-lease "$lease" --log-dir "$dir/logs" \
    "$@" >"$dir/server-$i.log" 2>&1 &
  pids+=($!)
  server_pid[$i]=$!
}
declare -A server_pid
mkdir -p "$dir/server-1" "$dir/logs"
server 1 --init
wait_for 30 "the first server" grep -q "serving https" "$dir/server-1.log"
# The others join it with its join key (docs/operations.md): the CA, tokens and keys come from
# the store, sealed under that key; each makes its own server certificate.
for i in 2 3; do
  rm -rf "$dir/server-$i"
  server "$i" --join-key-file "$dir/server-1/keys/join.key"
done
for i in 2 3; do wait_for 30 "server $i" grep -q "serving https" "$dir/server-$i.log"; done
grep -h "serving https" "$dir"/server-?.log

urls=""
for i in 1 2 3; do urls+="${urls:+,}https://127.0.0.1:$((base + 20 + i))"; done
sed "s|^server: .*|server: $urls|" "$dir/server-1/admin.config" >"$dir/gpuctl.config"
chmod 600 "$dir/gpuctl.config"
export GPUCLOUD_CONFIG="$dir/gpuctl.config"

# --- one agent that knows all three -----------------------------------------------------------
"$gpucloud" agent run --server "$urls" --ca "$dir/server-1/ca.crt" \
  --token-file "$dir/server-1/bootstrap.token" --node-name ha-node --simulate "$gpus" \
  --state-dir "$dir/agent" --allow-host-processes >"$dir/agent.log" 2>&1 &
pids+=($!)
wait_for 30 "the node to be Ready" bash -c "'$gpuctl' get nodes | grep -q ' Ready'"
"$gpuctl" get nodes

leader() {  # the pid of the server that leads now
  etcdctl_ get /gpucloud/data/meta/leader --print-value-only |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["pid"])'
}

if ! $smoke; then
  cat <<EOF

A highly available gpucloud runs in $dir:
  export GPUCLOUD_CONFIG=$dir/gpuctl.config      # gpuctl knows all three servers
  gpuctl run --gpus 1 -- nvidia-smi -L
  ETCDCTL_API=3 etcdctl --endpoints $endpoints get /gpucloud/data/meta/leader   # who leads
  kill -9 <its pid>      # another server leads within about ${lease}s; the agent follows it
Logs: $dir/*.log. Ctrl-C stops everything.
EOF
  # Until Ctrl-C (or SIGTERM): a server killed on purpose does not end it.
  while true; do
    sleep 3600 &
    pids+=($!)
    wait $! || true
  done
fi

# --- --smoke: a job; the leader killed; the leader paused; an etcd member killed ----------------
field() {  # field JOB KEY: status.KEY of the job
  "$gpuctl" get jobs "$1" -o json | python3 -c "import json,sys; print(json.load(sys.stdin)['status'].get('$2', ''))"
}
run_job() {  # run_job NAME: a one-GPU job that must succeed, in its first attempt
  "$gpuctl" run --name "$1" --gpus 1 -- true
  wait_for 60 "job $1 to succeed" bash -c "[[ \$(\"\$0\" get jobs $1 -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"status\"][\"phase\"])') == Succeeded ]]" "$gpuctl"
  [[ $(field "$1" attempt) == 1 ]] || { echo "up.sh: job $1 ran more than once" >&2; exit 1; }
}
leads_other_than() {  # leads_other_than PID: another server holds the election key
  local p
  p=$(etcdctl_ get /gpucloud/data/meta/leader --print-value-only)
  [[ -n $p && $p != *"\"pid\":$1,"* && $p != *"\"pid\":$1}"* ]]
}
log_of() {  # log_of PID: the output file of the server with that pid
  for i in 1 2 3; do [[ ${server_pid[$i]} == "$1" ]] && echo "$dir/server-$i.log"; done
}
run_job before

old=$(leader)
echo "the leader is pid $old: kill -9"
killed_at=$(date +%s.%N)
kill -9 "$old"
wait_for 30 "another server to lead" leads_other_than "$old"
echo "pid $(leader) leads $(python3 -c "import time; print(f'{time.time() - $killed_at:.1f}')") s after the kill"
run_job after-kill

# A paused leader (SIGSTOP: what a long pause looks like to etcd): another leads and runs a job
# while it is paused (the agent, whose watch the paused one held, finds the new leader once the
# watch has been silent for 5 s); the paused one, woken, finds its key gone and steps down (its
# writes meanwhile are fenced).
paused=$(leader)
echo "the leader is pid $paused: SIGSTOP"
kill -STOP "$paused"
wait_for 30 "another server to lead while $paused is paused" leads_other_than "$paused"
run_job while-paused
kill -CONT "$paused"
wait_for 30 "the woken server to step down" grep -q "no longer the leader" "$(log_of "$paused")"
echo "pid $paused woke and stepped down; pid $(leader) leads"

# One etcd member killed: the other two keep quorum, the servers use them.
echo "etcd member 1: kill -9"
kill -9 "${pids[0]}"
run_job member-down
"$gpuctl" get jobs
"$gpuctl" audit verify
passed=true
echo "up.sh --smoke: passed"
