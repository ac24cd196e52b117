#!/usr/bin/env bash
#===- scripts/netns-cluster.sh - a two-node cluster on one machine ---------===#
#
# usage: netns-cluster.sh up   [--name NAME] [--nodes K] [--rate RATE|none] [--cpus split|all]
#        netns-cluster.sh run  [--name NAME] -n N [--per-node P] [--mpi-arg A]... [--] CMD...
#        netns-cluster.sh stats [--name NAME]
#        netns-cluster.sh down [--name NAME]
#        netns-cluster.sh check
#
# Each node is a network namespace (with a host name of its own when OpenMPI
# enters it); the nodes' links meet on a bridge in a third, "switch"
# namespace, and every node's egress is shaped with tc's token bucket to RATE
# (default 1gbit), so node-to-node traffic is really scarce. Each node gets
# its own share of this machine's cores (--cpus split, the default: node k
# the k-th of K equal slices; every process of a node is confined to them,
# and OpenMPI does not bind, since each node's daemon would otherwise bind
# its first rank to "its" core 0, the same core on every node); --cpus all
# lets every node's ranks float over every core. `run` starts
# OpenMPI's mpirun inside the first node, with a plm_rsh_agent script that
# enters the other nodes' namespaces: ranks on one node use shared memory
# (vader), ranks on different nodes TCP over the shaped link. Ranks are
# placed node-major (ranks 0..P-1 on node0, P..2P-1 on node1, ...; P =
# --per-node, default ceil(N / K)).
#
# Nothing outside the cluster's own namespaces is touched: addresses are
# 10.203.I.0/24 with I the cluster's index, taken under a lock in the state
# directory ($HPC_NETNS_DIR, default /run/hpc-netns), so clusters that tests
# bring up at the same time do not collide. `up` of a NAME that exists
# replaces it; `down` removes its namespaces and state.
#
# `stats` prints, per node, the bytes that left and entered its link
# (the interface counters): an independent count of what crossed nodes.
# `check` exits 0 when namespaces can be made here, else prints why and
# exits 77 (the tests' "skipped" status).
#
# Other tools launch through it: `run` only needs the state directory,
# `netns-cluster.sh env` prints it as shell assignments (HPC_NETNS_*).
# docs/testing.md, "The two-node cluster", has the details.
#
#===-----------------------------------------------------------------------===#
set -euo pipefail

prog=netns-cluster
die() { echo "$prog: error: $*" >&2; exit 1; }
state_root=${HPC_NETNS_DIR:-/run/hpc-netns}

usage() { sed -n '3,8p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 1; }

name=${HPC_NETNS_CLUSTER:-hpc}
# --name may also come before the command.
while [ $# -ge 2 ] && [ "$1" = --name ]; do name=$2; shift 2; done
[ $# -ge 1 ] || usage
cmd=$1; shift

nodes=2
rate=1gbit
cpus=split
ranks=
per_node=
mpi_args=()
while [ $# -gt 0 ]; do
  case $1 in
    --name) [ $# -ge 2 ] || die "--name needs a value"; name=$2; shift 2 ;;
    --nodes) [ $# -ge 2 ] || die "--nodes needs a value"; nodes=$2; shift 2 ;;
    --rate) [ $# -ge 2 ] || die "--rate needs a value"; rate=$2; shift 2 ;;
    --cpus) [ $# -ge 2 ] || die "--cpus needs a value"; cpus=$2; shift 2 ;;
    -n|-np) [ $# -ge 2 ] || die "$1 needs a value"; ranks=$2; shift 2 ;;
    --per-node) [ $# -ge 2 ] || die "--per-node needs a value"; per_node=$2; shift 2 ;;
    --mpi-arg) [ $# -ge 2 ] || die "--mpi-arg needs a value"; mpi_args+=("$2"); shift 2 ;;
    --) shift; break ;;
    -h|--help) usage ;;
    -*) [ "$cmd" = run ] && break; die "unknown option '$1'" ;;
    *) break ;;
  esac
done

case $name in
  ''|*[!A-Za-z0-9_-]*) die "cluster name '$name' must be letters, digits, '-' or '_'" ;;
esac
dir=$state_root/$name

is_count() { case $1 in ''|*[!0-9]*) return 1 ;; esac; [ "$1" -ge 1 ]; }

# The cluster's facts, written by `up` and read by the other commands.
load_state() {
  [ -f "$dir/env" ] || die "no cluster '$name' (run: $0 up --name $name)"
  # shellcheck disable=SC1091
  . "$dir/env"
}

node_ns() { echo "hpc${HPC_NETNS_INDEX}-n$1"; }

check() {
  [ "$(id -u)" -eq 0 ] || { echo "$prog: network namespaces need root" >&2; return 77; }
  command -v ip >/dev/null || { echo "$prog: 'ip' (iproute2) is not installed" >&2; return 77; }
  command -v tc >/dev/null || { echo "$prog: 'tc' (iproute2) is not installed" >&2; return 77; }
  local probe="hpcprobe$$"
  if ! ip netns add "$probe" 2>/dev/null; then
    echo "$prog: cannot create network namespaces here" >&2; return 77
  fi
  ip netns del "$probe"
}

down() {
  [ -f "$dir/env" ] || return 0
  load_state
  local i
  for ((i = 0; i < HPC_NETNS_NODES; i++)); do
    ip netns del "$(node_ns $i)" 2>/dev/null || true
  done
  ip netns del "hpc${HPC_NETNS_INDEX}-sw" 2>/dev/null || true
  rm -rf "$dir"
  rm -f "$state_root/.index.$HPC_NETNS_INDEX"
}

# The CPUs this process may run on, one per line ("0-3,6" expanded).
allowed_cpus() {
  local list range a b
  list=$(taskset -cp $$ | sed 's/.*: *//')
  IFS=, read -ra range <<< "$list"
  for r in "${range[@]}"; do
    a=${r%-*}; b=${r#*-}
    for ((c = a; c <= b; c++)); do echo "$c"; done
  done
}

# Node i's CPUs (a taskset list) for K nodes: the i-th of K equal slices of
# the allowed CPUs, or one CPU shared round-robin when there are fewer CPUs
# than nodes; "all" for --cpus all.
node_cpus() {
  local i=$1 k=$2
  [ "$cpus" = all ] && { echo all; return; }
  local all; mapfile -t all < <(allowed_cpus)
  local n=${#all[@]}
  if [ "$n" -lt "$k" ]; then
    echo "${all[$((i % n))]}"
    return
  fi
  local lo=$((i * n / k)) hi=$(((i + 1) * n / k)) out=
  for ((c = lo; c < hi; c++)); do out=${out:+$out,}${all[$c]}; done
  echo "$out"
}

# Takes the lowest free cluster index under the lock; prints it.
claim_index() {
  mkdir -p "$state_root"
  (
    flock 9
    local i
    for ((i = 0; i < 256; i++)); do
      if [ ! -e "$state_root/.index.$i" ] && [ ! -e "/run/netns/hpc$i-sw" ]; then
        echo "$name" > "$state_root/.index.$i"
        echo "$i"
        exit 0
      fi
    done
    exit 1
  ) 9>"$state_root/.lock" || die "all 256 cluster indices are taken (run '$0 down' for stale ones)"
}

up() {
  is_count "$nodes" || die "--nodes must be a positive integer, not '$nodes'"
  [ "$nodes" -le 250 ] || die "--nodes must be at most 250"
  case $rate in none|[0-9]*) ;; *) die "--rate must be a tc rate such as 1gbit, or none" ;; esac
  case $cpus in split|all) ;; *) die "--cpus must be split or all, not '$cpus'" ;; esac
  local why
  why=$(check 2>&1) || { echo "$why" >&2; exit 77; }
  down
  local index; index=$(claim_index)
  mkdir -p "$dir"
  local subnet="10.203.$index"
  local sw="hpc${index}-sw"
  # A failure half-way leaves nothing behind.
  trap 'HPC_NETNS_INDEX=$index; HPC_NETNS_NODES=$nodes; write_env; down' ERR
  write_env() {
    cat > "$dir/env" <<EOF
HPC_NETNS_NAME=$name
HPC_NETNS_INDEX=$index
HPC_NETNS_NODES=$nodes
HPC_NETNS_SUBNET=$subnet.0/24
HPC_NETNS_RATE=$rate
HPC_NETNS_CPUS=$cpus
HPC_NETNS_DIR=$dir
EOF
  }
  HPC_NETNS_INDEX=$index
  write_env
  ip netns add "$sw"
  ip -n "$sw" link set lo up
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 up
  : > "$dir/hostfile"
  : > "$dir/nodes"
  local i ns addr
  for ((i = 0; i < nodes; i++)); do
    ns=$(node_ns $i)
    addr="$subnet.$((i + 1))"
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip -n "$sw" link add "p$i" type veth peer name eth0 netns "$ns"
    ip -n "$sw" link set "p$i" master br0
    ip -n "$sw" link set "p$i" up
    ip -n "$ns" addr add "$addr/24" dev eth0
    ip -n "$ns" link set eth0 up
    if [ "$rate" != none ]; then
      tc -n "$ns" qdisc add dev eth0 root tbf rate "$rate" burst 256kb latency 50ms
    fi
    echo "$addr" >> "$dir/hostfile"
    echo "$addr $ns c${index}-node$i $(node_cpus $i "$nodes")" >> "$dir/nodes"
  done
  # OpenMPI's remote shell: "AGENT HOST COMMAND..." -> the command inside
  # HOST's namespace, under that node's host name, on that node's CPUs.
  cat > "$dir/rsh-agent" <<EOF
#!/bin/sh
host=\$1; shift
line=\$(grep "^\$host " "$dir/nodes") || { echo "$prog: no node \$host in $dir/nodes" >&2; exit 1; }
ns=\$(echo "\$line" | cut -d' ' -f2)
node=\$(echo "\$line" | cut -d' ' -f3)
cpus=\$(echo "\$line" | cut -d' ' -f4)
if [ "\$cpus" = all ]; then
  exec ip netns exec "\$ns" unshare --uts sh -c "hostname \$node; \$*"
fi
exec ip netns exec "\$ns" unshare --uts taskset -c "\$cpus" sh -c "hostname \$node; \$*"
EOF
  chmod +x "$dir/rsh-agent"
  trap - ERR
  echo "$prog: cluster '$name' up: $nodes nodes on $subnet.0/24, link rate $rate," \
       "cpus $(cut -d' ' -f4 "$dir/nodes" | paste -sd' ' | sed 's/ / | /g') (state in $dir)"
}

run() {
  load_state
  [ -n "$ranks" ] || die "run needs -n N"
  is_count "$ranks" || die "-n must be a positive integer, not '$ranks'"
  [ $# -ge 1 ] || die "run needs a command"
  local p=${per_node:-$(( (ranks + HPC_NETNS_NODES - 1) / HPC_NETNS_NODES ))}
  is_count "$p" || die "--per-node must be a positive integer, not '$p'"
  [ $((p * HPC_NETNS_NODES)) -ge "$ranks" ] ||
    die "$ranks ranks do not fit on $HPC_NETNS_NODES nodes of $p"
  local hostfile="$dir/hostfile.$$"
  sed "s/\$/ slots=$p max_slots=$p/" "$dir/hostfile" > "$hostfile"
  local first; first=$(head -n1 "$dir/nodes")
  local ns0 node0 cpus0
  ns0=$(echo "$first" | cut -d' ' -f2)
  node0=$(echo "$first" | cut -d' ' -f3)
  cpus0=$(echo "$first" | cut -d' ' -f4)
  # OpenMPI must not bind: every node's daemon would bind its first rank
  # to "its" core 0, the same core on every node. Confined nodes keep their
  # ranks on the node's CPUs; with --cpus all they float.
  local pin=() bind=(--bind-to none)
  [ "$cpus0" = all ] || pin=(taskset -c "$cpus0")
  local mpirun; mpirun=$(command -v mpirun) || die "mpirun is not installed"
  # A session directory of the job's own (test/mpirun-private.sh says why).
  local session=
  if [ -z "${OMPI_MCA_orte_tmpdir_base:-}" ]; then
    session=$(mktemp -d "${TMPDIR:-/tmp}/hpc-netns-mpirun.XXXXXX")
    export OMPI_MCA_orte_tmpdir_base=$session
  fi
  local status=0
  ip netns exec "$ns0" unshare --uts -- sh -c 'hostname "$1"; shift; exec "$@"' sh "$node0" \
    "${pin[@]}" "$mpirun" --allow-run-as-root --hostfile "$hostfile" --map-by slot -n "$ranks" \
    "${bind[@]}" \
    --mca plm_rsh_agent "$dir/rsh-agent" \
    --mca btl self,vader,tcp \
    --mca btl_tcp_if_include "$HPC_NETNS_SUBNET" \
    --mca oob_tcp_if_include "$HPC_NETNS_SUBNET" \
    "${mpi_args[@]}" "$@" || status=$?
  rm -f "$hostfile"
  [ -z "$session" ] || rm -rf "$session"
  return $status
}

stats() {
  load_state
  local i ns
  for ((i = 0; i < HPC_NETNS_NODES; i++)); do
    ns=$(node_ns $i)
    echo "node$i tx_bytes=$(ip netns exec "$ns" cat /sys/class/net/eth0/statistics/tx_bytes)" \
         "rx_bytes=$(ip netns exec "$ns" cat /sys/class/net/eth0/statistics/rx_bytes)"
  done
}

case $cmd in
  up) [ $# -eq 0 ] || die "unexpected argument '$1'"; up ;;
  run) run "$@" ;;
  stats) stats ;;
  env) load_state; cat "$dir/env" ;;
  down) down ;;
  check) check || exit $? ;;
  *) echo "$prog: error: unknown command '$cmd' (up, run, stats, env, down, check)" >&2; exit 1 ;;
esac
