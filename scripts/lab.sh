#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The xlb lab: a client, a router, the load balancer and backends, each in its
# own network namespace on this machine, with real TCP through the balancer's
# XDP program and direct server return.
#
#   client 192.0.2.10 ---- router ---- br0 (203.0.113.0/24, 2001:db8:b::/64)
#   2001:db8:c::10     192.0.2.1        |-- lb   .2  / ::2   xlbd, xlb_lb in native XDP
#                      2001:db8:c::1    |-- b1  .11  / ::11  xlb-decap, VIPs on lo, httpd
#                                       |-- b2  .12  / ::12
#                                       `-- b3  .13  / ::13  (--backends N: 0 to 9)
#
# This script is the one definition of the lab: the demo, tests/e2e_tcp and,
# through tests/support/lab.h (test::Lab), every other e2e suite build theirs
# with it. The smallest lab (--backends 0 --no-client) is the LB and the router.
#
#   VIPs (routed by the router via the LB, never on-link):
#     web    198.51.100.10:80   -> the backends' IPv4 addresses
#     web6   [2001:db8:f::10]:80 -> the backends' IPv6 addresses
#     mixed  198.51.100.20:80   -> the backends' IPv6 addresses (IPv4-in-IPv6)
#
# The LB encapsulates (IP-in-IP) towards the router's MAC; the router forwards
# to the backend; the backend's xlb-decap strips the outer header, the
# backend's HTTP server answers from the VIP straight back through the router.
# Addresses are from the documentation ranges and exist only inside the lab's
# namespaces.
#
# Usage: scripts/lab.sh COMMAND [options]
#   up        build the lab (removes a half-built one on failure)
#   down      remove everything of the lab (namespaces, processes, pins, files)
#   status    show namespaces, XDP programs, processes and the agent's status
#   agent-start   start xlbd in the lb namespace with the lab's config
#   agent-stop    stop xlbd (SIGTERM; the XDP program stays attached)
#   agent-kill    kill -9 xlbd
#   server-stop bN / server-start bN   kill -9 / start backend bN's HTTP server
#   exec ROLE [--] CMD...  run CMD in a namespace (ROLE: client router lb b1..b9;
#                 after --, options such as --help belong to CMD)
#   api METHOD PATH [BODY]   call the agent's API on its Unix socket (curl)
#   sweep     take down every lab whose --owner process is gone (labs of killed
#             test runs); labs without an owner are never swept
# Options:
#   --prefix P     name prefix of everything (default xlab; [a-z0-9], 1-10 chars)
#   --backends N   number of backend namespaces (default 3, 0-9)
#   --no-client    (up) no client namespace (a lab for the agent alone)
#   --owner PID    (up) the process that owns the lab: sweep removes it once PID is gone
#   --in-config N  how many of them the generated config lists (default: all, at most 3)
#   --weights LIST weights of the configured backends (default 100,100,200)
#   --build DIR    build directory with xlbd and xlb-decap (default: build)
#   --health       give the VIPs an HTTP health check (GET /healthz, 500ms)
#   --via-vip      with --health: probe through the VIPs (via_vip: true)
#   --panic-threshold X   the VIPs' panic_threshold (default: the agent's, 0.5)
#   --agent        (up) also start xlbd
# Environment: XLBD, XLB_DECAP override the binaries' paths.
#
# Files: /run/xlb-lab/P/ (xlbd.yaml, state.json, xlbd.sock, logs, pids);
# pins:  /sys/fs/bpf/xlb-lab-P/ (created by up).
# The LB reaches the router (next hop 203.0.113.1, 2001:db8:b::1) at a fixed
# MAC, 02:78:6c:62:00:01, with permanent neighbour entries: no ARP needed.
# Backends' HTTP servers answer GET / with their name (b1, b2, ...), GET
# /healthz with the status in /run/xlb-lab/P/health-NAME (default 200), and
# GET /echo by echoing each line sent afterwards, prefixed with their name.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

prefix=xlab
nbackends=3
in_config=""
weights="100,100,200"
build_dir="${repo_root}/build"
health=0
via_vip=0
panic_threshold=""
start_agent=0
client=1
owner=""

die() {
  echo "lab: $*" >&2
  exit 1
}

usage() {
  sed -n '/^# Usage:/,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
}

[ $# -ge 1 ] || {
  usage >&2
  exit 2
}
cmd="$1"
shift
case "${cmd}" in
  -h | --help | help)
    usage
    exit 0
    ;;
esac
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="${2:?--prefix needs a value}"; shift 2 ;;
    --backends) nbackends="${2:?--backends needs a value}"; shift 2 ;;
    --in-config) in_config="${2:?--in-config needs a value}"; shift 2 ;;
    --weights) weights="${2:?--weights needs a value}"; shift 2 ;;
    --build) build_dir="${2:?--build needs a value}"; shift 2 ;;
    --health) health=1; shift ;;
    --via-vip) via_vip=1; shift ;;
    --panic-threshold) panic_threshold="${2:?--panic-threshold needs a value}"; shift 2 ;;
    --agent) start_agent=1; shift ;;
    --no-client) client=0; shift ;;
    --owner) owner="${2:?--owner needs a value}"; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    --) shift; args+=("$@"); break ;;
    *) args+=("$1"); shift ;;
  esac
done

[[ "${prefix}" =~ ^[a-z0-9]{1,10}$ ]] || die "--prefix: found '${prefix}', expected 1-10 characters a-z 0-9"
[[ "${nbackends}" =~ ^[0-9]$ ]] || die "--backends: found '${nbackends}', expected 0-9"
[ -n "${in_config}" ] || in_config=$((nbackends < 3 ? nbackends : 3))
[[ "${in_config}" =~ ^[0-9]$ ]] && [ "${in_config}" -le "${nbackends}" ] ||
  die "--in-config: found '${in_config}', expected 0-${nbackends}"
[ -z "${owner}" ] || [[ "${owner}" =~ ^[1-9][0-9]*$ ]] || die "--owner: found '${owner}', expected a pid"
[ -d "${build_dir}" ] || { [ -d "${repo_root}/${build_dir}" ] && build_dir="${repo_root}/${build_dir}"; } || true

state_dir="/run/xlb-lab/${prefix}"
pin_dir="/sys/fs/bpf/xlb-lab-${prefix}"
ns_client="${prefix}-client"
ns_router="${prefix}-router"
ns_lb="${prefix}-lb"
xlbd_bin="${XLBD:-${build_dir}/userspace/agent/xlbd}"
decap_bin="${XLB_DECAP:-${build_dir}/tools/xlb-decap/xlb-decap}"
sock="${state_dir}/xlbd.sock"

router_mac=02:78:6c:62:00:01  # br0's, fixed: a bridge otherwise takes a port's MAC
vip4=198.51.100.10
vip6=2001:db8:f::10
vipmix=198.51.100.20

backend_ns() { echo "${prefix}-b$1"; }
backend_v4() { echo "203.0.113.1$1"; }
backend_v6() { echo "2001:db8:b::1$1"; }

ns_of() {
  case "$1" in
    client) echo "${ns_client}" ;;
    router) echo "${ns_router}" ;;
    lb) echo "${ns_lb}" ;;
    b[1-9]) echo "${prefix}-$1" ;;
    *) die "unknown role '$1' (client, router, lb, b1..b9)" ;;
  esac
}

# Every namespace this prefix may own (whether it exists or not).
all_ns() {
  echo "${ns_client} ${ns_router} ${ns_lb}"
  for i in 1 2 3 4 5 6 7 8 9; do backend_ns "$i"; done
}

ns_exists() { [ -e "/run/netns/$1" ]; }

need_root() {
  [ "$(id -u)" -eq 0 ] || die "must run as root (network namespaces, BPF): sudo $0 ${cmd}"
}

nsx() {
  local ns="$1"
  shift
  ip netns exec "${ns}" "$@"
}

sysctl_in() {
  local ns="$1"
  shift
  nsx "${ns}" sysctl -qw "$@" >/dev/null || die "sysctl $* in ${ns} failed"
}

# ---- down ---------------------------------------------------------------------

kill_ns_processes() {
  local ns="$1" pids sig
  ns_exists "${ns}" || return 0
  for sig in TERM KILL; do
    pids="$(ip netns pids "${ns}" 2>/dev/null || true)"
    [ -n "${pids}" ] || return 0
    # shellcheck disable=SC2086
    kill "-${sig}" ${pids} 2>/dev/null || true
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      [ -n "$(ip netns pids "${ns}" 2>/dev/null || true)" ] || return 0
      sleep 0.1
    done
  done
}

lab_down() {
  local ns removed=0
  # the agent first, so that it does not see its interface vanish
  if [ -f "${state_dir}/xlbd.pid" ]; then
    kill -TERM "$(cat "${state_dir}/xlbd.pid")" 2>/dev/null || true
  fi
  for ns in $(all_ns); do
    if ns_exists "${ns}"; then
      kill_ns_processes "${ns}"
      ip netns del "${ns}" 2>/dev/null || echo "lab: could not remove namespace ${ns}" >&2
      removed=$((removed + 1))
    fi
  done
  if [ -d "${pin_dir}" ]; then rm -rf "${pin_dir}"; fi
  if [ -d "${state_dir}" ]; then rm -rf "${state_dir}"; fi
  echo "lab ${prefix}: down (${removed} namespaces removed)"
}

# The labs whose owner (up --owner PID) is gone: a test run killed before it
# could take its lab down.
lab_sweep() {
  local dir p pid
  for dir in /run/xlb-lab/*/; do
    [ -f "${dir}owner-pid" ] || continue
    pid="$(cat "${dir}owner-pid" 2>/dev/null || true)"
    [[ "${pid}" =~ ^[0-9]+$ ]] || continue
    kill -0 "${pid}" 2>/dev/null && continue
    p="$(basename "${dir}")"
    [[ "${p}" =~ ^[a-z0-9]{1,10}$ ]] || continue
    "${BASH_SOURCE[0]}" down --prefix "${p}" >/dev/null && echo "lab ${p}: swept (owner ${pid} is gone)"
  done
  return 0
}

# ---- up -------------------------------------------------------------------------

write_httpd() {
  cat >"${state_dir}/httpd.py" <<'PY'
# The lab's backend HTTP server: no reverse DNS lookup, one thread per
# connection, IPv4 and IPv6 on one socket.
import os, socket, sys, threading

name, port, state_dir = sys.argv[1], int(sys.argv[2]), sys.argv[3]

def handle(conn):
    try:
        f = conn.makefile("rb")
        request = f.readline().decode("latin-1").split()
        while True:
            line = f.readline()
            if not line or line in (b"\r\n", b"\n"):
                break
        path = request[1] if len(request) > 1 else "/"
        if path == "/echo":
            conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n")
            for line in f:
                conn.sendall(name.encode() + b" " + line)
            return
        status, extra, body = 200, "", name + "\n"
        if path == "/healthz":
            body = "ok\n"
            try:
                with open(os.path.join(state_dir, "health-" + name)) as h:
                    parts = h.read().split()
                status = int(parts[0])
                if len(parts) > 1:
                    extra = "Retry-After: %s\r\n" % parts[1]
            except (OSError, ValueError, IndexError):
                pass
        head = "HTTP/1.0 %d X\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n%s\r\n" % (
            status, len(body), extra)
        conn.sendall(head.encode() + body.encode())
    except OSError:
        pass
    finally:
        conn.close()

srv = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
srv.bind(("::", port))
srv.listen(4096)
print("httpd %s listening on port %d" % (name, port), flush=True)
while True:
    c, _ = srv.accept()
    threading.Thread(target=handle, args=(c,), daemon=True).start()
PY
}

write_config() {
  local i w
  local -a ws
  IFS=',' read -r -a ws <<<"${weights}"
  [ "${#ws[@]}" -ge "${in_config}" ] || die "--weights: ${#ws[@]} weights for ${in_config} backends"
  local hc="    health_check: {type: none}"
  if [ "${health}" -eq 1 ]; then
    local via=""
    [ "${via_vip}" -eq 0 ] || via=", via_vip: true"
    hc="    health_check: {type: http, path: /healthz, interval: 500ms, timeout: 250ms, jitter: 50ms, unhealthy_threshold: 2, healthy_threshold: 2${via}}"
  fi
  {
    echo "# Written by scripts/lab.sh for lab ${prefix}."
    echo "interface: eth0"
    echo "xdp_mode: native"
    echo "next_hop: {mac: \"${router_mac}\"}"
    echo "encap_source: {ipv4: 203.0.113.2, ipv6: \"2001:db8:b::2\"}"
    echo "hash_seed: 0x5eed1234"
    echo "mtu: 1600"
    echo "maps: {max_vips: 16, max_backends: 64, conntrack_entries: 65536}"
    echo "api: {socket: ${sock}}"
    echo "metrics: {listen: \"127.0.0.1:9464\"}"
    echo "state_file: ${state_dir}/state.json"
    echo "pin_dir: ${pin_dir}"
    echo "vips:"
    local vip
    for vip in "web ${vip4} v4" "web6 ${vip6} v6" "mixed ${vipmix} v6"; do
      set -- ${vip}
      echo "  - name: $1"
      echo "    address: \"$2\""
      echo "    port: 80"
      echo "${hc}"
      [ -z "${panic_threshold}" ] || echo "    panic_threshold: ${panic_threshold}"
      echo "    slow_start: {window: 3s, floor: 0.1}"
      echo "    backends:"
      for ((i = 1; i <= in_config; i++)); do
        w="${ws[$((i - 1))]}"
        if [ "$3" = v4 ]; then
          echo "      - {address: \"$(backend_v4 "$i")\", weight: ${w}}"
        else
          echo "      - {address: \"$(backend_v6 "$i")\", weight: ${w}}"
        fi
      done
      [ "${in_config}" -gt 0 ] || echo "      []"
    done
  } >"${state_dir}/xlbd.yaml"
  # an empty backend list must be written inline
  if [ "${in_config}" -eq 0 ]; then
    sed -i -e ':a;N;$!ba;s/    backends:\n      \[\]/    backends: []/g' "${state_dir}/xlbd.yaml"
  fi
}

start_httpd() {  # start_httpd N: backend bN's HTTP server, in the background
  ip netns exec "$(backend_ns "$1")" python3 -u "${state_dir}/httpd.py" "b$1" 80 "${state_dir}" \
    >"${state_dir}/httpd-b$1.log" 2>&1 &
  echo $! >"${state_dir}/httpd-b$1.pid"
}

server_cmd() {  # server-stop|server-start bN
  local role="${args[0]:-}" i pid
  [[ "${role}" =~ ^b[1-9]$ ]] || die "${cmd} bN: found '${role}', expected b1..b9"
  i="${role#b}"
  ns_exists "$(backend_ns "$i")" || die "backend ${role} of lab ${prefix} does not exist"
  pid="$(cat "${state_dir}/httpd-b$i.pid" 2>/dev/null || true)"
  if [ "${cmd}" = server-stop ]; then
    [ -n "${pid}" ] && kill -KILL "${pid}" 2>/dev/null || die "the server of ${role} is not running"
    echo "lab ${prefix}: server of ${role} killed"
    return 0
  fi
  [ -n "${pid}" ] && kill -0 "${pid}" 2>/dev/null && die "the server of ${role} is running already"
  start_httpd "$i"
  for _ in $(seq 1 100); do
    grep -q listening "${state_dir}/httpd-b$i.log" 2>/dev/null && {
      echo "lab ${prefix}: server of ${role} started"
      return 0
    }
    sleep 0.05
  done
  die "the server of ${role} did not start: $(cat "${state_dir}/httpd-b$i.log")"
}

veth() {  # veth NAME_A NS_A NAME_B NS_B
  ip link add "$1" netns "$2" type veth peer name "$3" netns "$4" ||
    die "could not create veth $1 (${2}) <-> $3 (${4})"
}

lab_up_client() {  # the client and its link to the router
  veth eth0 "${ns_client}" cl0 "${ns_router}"
  ip -n "${ns_client}" addr add 192.0.2.10/24 dev eth0
  ip -n "${ns_client}" addr add 2001:db8:c::10/64 dev eth0 nodad
  ip -n "${ns_client}" link set eth0 up
  ip -n "${ns_client}" route add default via 192.0.2.1
  ip -n "${ns_client}" -6 route add default via 2001:db8:c::1
  ip -n "${ns_router}" addr add 192.0.2.1/24 dev cl0
  ip -n "${ns_router}" addr add 2001:db8:c::1/64 dev cl0 nodad
  ip -n "${ns_router}" link set cl0 up
  # complete TCP checksums at the source: a partial checksum forwarded to the
  # LB's veth would reach the backends unfinished (measured.md)
  nsx "${ns_client}" ethtool -K eth0 tx off tso off gso off >/dev/null 2>&1 || true
  nsx "${ns_router}" ethtool -K cl0 tx off tso off gso off >/dev/null 2>&1 || true
}

lab_up() {
  local ns i b
  command -v python3 >/dev/null || die "python3 is missing (scripts/install-deps.sh installs it)"
  command -v ethtool >/dev/null || die "ethtool is missing (scripts/install-deps.sh installs it)"
  [ -x "${decap_bin}" ] || die "${decap_bin} not found: build it (cmake --build ${build_dir} --target xlb-decap)"
  for ns in $(all_ns); do
    ns_exists "${ns}" && die "namespace ${ns} exists already: lab ${prefix} is up (scripts/lab.sh down --prefix ${prefix})"
  done
  mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf || die "cannot mount bpffs on /sys/fs/bpf"

  # from here on, a failure removes whatever was built
  trap 'echo "lab: up failed; removing the partial lab ${prefix}" >&2; lab_down >&2' EXIT
  mkdir -p "${state_dir}"
  chmod 0755 "${state_dir}"

  [ -z "${owner}" ] || echo "${owner}" >"${state_dir}/owner-pid"
  mkdir -p -m 0700 "${pin_dir}"

  local -a namespaces=("${ns_router}" "${ns_lb}")
  [ "${client}" -eq 0 ] || namespaces+=("${ns_client}")
  for ((i = 1; i <= nbackends; i++)); do namespaces+=("$(backend_ns "$i")"); done
  for ns in "${namespaces[@]}"; do
    ip netns add "${ns}" || die "could not create namespace ${ns}"
    ip -n "${ns}" link set lo up
  done

  # router
  sysctl_in "${ns_router}" net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1 \
    net.ipv4.conf.all.send_redirects=0 net.ipv4.conf.default.send_redirects=0 \
    net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0 \
    net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0
  ip -n "${ns_router}" link add br0 type bridge
  ip -n "${ns_router}" link set br0 mtu 1600 address "${router_mac}"

  # client <-> router
  [ "${client}" -eq 0 ] || lab_up_client

  # lb <-> router bridge
  veth eth0 "${ns_lb}" p-lb "${ns_router}"
  ip -n "${ns_lb}" link set eth0 mtu 1600
  ip -n "${ns_router}" link set p-lb mtu 1600 master br0
  ip -n "${ns_lb}" addr add 203.0.113.2/24 dev eth0
  ip -n "${ns_lb}" addr add 2001:db8:b::2/64 dev eth0 nodad
  ip -n "${ns_lb}" link set eth0 up
  ip -n "${ns_lb}" route add default via 203.0.113.1
  ip -n "${ns_lb}" -6 route add default via 2001:db8:b::1
  # the next hop's MAC, known without ARP
  ip -n "${ns_lb}" neigh replace 203.0.113.1 lladdr "${router_mac}" dev eth0 nud permanent
  ip -n "${ns_lb}" neigh replace 2001:db8:b::1 lladdr "${router_mac}" dev eth0 nud permanent
  nsx "${ns_router}" ethtool -K p-lb tx off tso off gso off >/dev/null 2>&1 || true
  ip -n "${ns_router}" link set p-lb up

  # backends
  for ((i = 1; i <= nbackends; i++)); do
    b="$(backend_ns "$i")"
    veth eth0 "${b}" "p-b$i" "${ns_router}"
    ip -n "${b}" link set eth0 mtu 1600
    ip -n "${ns_router}" link set "p-b$i" mtu 1600 master br0
    ip -n "${ns_router}" link set "p-b$i" up
    sysctl_in "${b}" net.ipv4.conf.all.arp_ignore=1 net.ipv4.conf.all.arp_announce=2 \
      net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0 \
      net.ipv4.conf.eth0.rp_filter=0 net.ipv4.conf.lo.rp_filter=0 \
      net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0
    ip -n "${b}" addr add "$(backend_v4 "$i")/24" dev eth0
    ip -n "${b}" addr add "$(backend_v6 "$i")/64" dev eth0 nodad
    ip -n "${b}" addr add "${vip4}/32" dev lo
    ip -n "${b}" addr add "${vipmix}/32" dev lo
    ip -n "${b}" addr add "${vip6}/128" dev lo nodad
    ip -n "${b}" link set eth0 up
    ip -n "${b}" route add default via 203.0.113.1
    ip -n "${b}" -6 route add default via 2001:db8:b::1
  done

  ip -n "${ns_router}" addr add 203.0.113.1/24 dev br0
  ip -n "${ns_router}" addr add 2001:db8:b::1/64 dev br0 nodad
  ip -n "${ns_router}" link set br0 up
  # VIPs via the LB, never on-link
  ip -n "${ns_router}" route add 198.51.100.0/24 via 203.0.113.2
  ip -n "${ns_router}" -6 route add 2001:db8:f::/64 via 2001:db8:b::2

  # native XDP_TX from the LB's veth needs a program on the peer: a pass-through
  nsx "${ns_router}" "${decap_bin}" --interface p-lb --keep --quiet >"${state_dir}/router-xdp.log" 2>&1 ||
    die "could not attach the pass-through XDP program to p-lb: $(cat "${state_dir}/router-xdp.log")"

  # backends' decapsulator and HTTP server
  write_httpd
  for ((i = 1; i <= nbackends; i++)); do
    b="$(backend_ns "$i")"
    # ip netns exec execs the command: $! is the program's own pid
    ip netns exec "${b}" "${decap_bin}" --interface eth0 --address "$(backend_v4 "$i")" \
      --address "$(backend_v6 "$i")" >"${state_dir}/decap-b$i.log" 2>&1 &
    echo $! >"${state_dir}/decap-b$i.pid"
    start_httpd "$i"
  done
  # wait until every backend attached and listens
  local deadline=$((SECONDS + 10))
  for ((i = 1; i <= nbackends; i++)); do
    until grep -q "decapsulating for" "${state_dir}/decap-b$i.log" 2>/dev/null &&
      grep -q "listening" "${state_dir}/httpd-b$i.log" 2>/dev/null; do
      kill -0 "$(cat "${state_dir}/decap-b$i.pid")" 2>/dev/null ||
        die "xlb-decap in $(backend_ns "$i") exited: $(cat "${state_dir}/decap-b$i.log")"
      kill -0 "$(cat "${state_dir}/httpd-b$i.pid")" 2>/dev/null ||
        die "the HTTP server in $(backend_ns "$i") exited: $(cat "${state_dir}/httpd-b$i.log")"
      [ "${SECONDS}" -lt "${deadline}" ] || die "backend b$i not ready after 10 s"
      sleep 0.05
    done
  done

  # resolve neighbours now, so that the first packets are not queued on ARP
  if [ "${client}" -eq 1 ]; then
    nsx "${ns_client}" ping -c1 -W1 192.0.2.1 >/dev/null 2>&1 || die "client cannot reach the router"
  fi
  nsx "${ns_lb}" ping -c1 -W1 203.0.113.1 >/dev/null 2>&1 || die "the LB cannot reach the router"
  for ((i = 1; i <= nbackends; i++)); do
    nsx "${ns_router}" ping -c1 -W1 "$(backend_v4 "$i")" >/dev/null 2>&1 ||
      die "the router cannot reach backend b$i"
    nsx "${ns_router}" ping -6 -c1 -W1 "$(backend_v6 "$i")" >/dev/null 2>&1 ||
      die "the router cannot reach backend b$i over IPv6"
  done

  write_config

  if [ "${start_agent}" -eq 1 ]; then agent_start; fi
  trap - EXIT
  echo "lab ${prefix}: up (${nbackends} backends$([ "${client}" -eq 1 ] || echo ", no client"); config ${state_dir}/xlbd.yaml)"
}

# ---- the agent --------------------------------------------------------------------

api() {  # api METHOD PATH [BODY]
  local -a data=()
  [ $# -ge 3 ] && data=(-H 'Content-Type: application/json' --data-binary "$3")
  curl -sS --max-time 20 --unix-socket "${sock}" -X "$1" "${data[@]}" "http://xlbd$2"
}

agent_running() {
  [ -f "${state_dir}/xlbd.pid" ] && kill -0 "$(cat "${state_dir}/xlbd.pid")" 2>/dev/null
}

agent_start() {
  ns_exists "${ns_lb}" || die "lab ${prefix} is not up"
  agent_running && die "xlbd is running already (pid $(cat "${state_dir}/xlbd.pid"))"
  [ -x "${xlbd_bin}" ] || die "${xlbd_bin} not found: build it (cmake --build ${build_dir} --target xlbd)"
  # nsenter keeps this mount namespace, where bpffs is mounted (ip netns exec
  # remounts /sys and hides /sys/fs/bpf)
  nsenter --net="/run/netns/${ns_lb}" "${xlbd_bin}" --config "${state_dir}/xlbd.yaml" \
    >>"${state_dir}/xlbd.log" 2>&1 &
  local pid=$!
  echo "${pid}" >"${state_dir}/xlbd.pid"
  local deadline=$((SECONDS + 15))
  until [ -S "${sock}" ] && [ "$(curl -s --max-time 2 --unix-socket "${sock}" -o /dev/null -w '%{http_code}' http://xlbd/readyz)" = 200 ]; do
    if ! kill -0 "${pid}" 2>/dev/null; then
      echo "lab: xlbd exited; its log:" >&2
      tail -n 30 "${state_dir}/xlbd.log" >&2
      exit 1
    fi
    if [ "${SECONDS}" -ge "${deadline}" ]; then
      echo "lab: xlbd not ready after 15 s; its log:" >&2
      tail -n 30 "${state_dir}/xlbd.log" >&2
      exit 1
    fi
    sleep 0.05
  done
  echo "lab ${prefix}: xlbd ready (pid ${pid}, socket ${sock})"
}

agent_stop() {
  local sig="$1" pid
  agent_running || { echo "lab ${prefix}: xlbd is not running"; return 0; }
  pid="$(cat "${state_dir}/xlbd.pid")"
  kill "-${sig}" "${pid}"
  for _ in $(seq 1 100); do
    kill -0 "${pid}" 2>/dev/null || break
    sleep 0.05
  done
  kill -0 "${pid}" 2>/dev/null && die "xlbd (pid ${pid}) did not exit after SIG${sig}"
  rm -f "${state_dir}/xlbd.pid"
  echo "lab ${prefix}: xlbd stopped (SIG${sig})"
}

# ---- status -------------------------------------------------------------------------

lab_status() {
  local ns any=0 pids ifname line id mode name
  for ns in $(all_ns); do
    ns_exists "${ns}" || continue
    any=1
    echo "== ${ns}"
    ip -n "${ns}" -brief addr show | grep -v '^lo ' | sed 's/^/   /'
    for ifname in $(ip -n "${ns}" -o link show | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }'); do
      line="$(ip -n "${ns}" -o link show dev "${ifname}")"
      [[ "${line}" =~ prog/xdp\ id\ ([0-9]+) ]] || continue
      id="${BASH_REMATCH[1]}"
      mode=native
      [[ "${line}" == *xdpgeneric* ]] && mode=generic
      name="$(bpftool prog show id "${id}" 2>/dev/null | sed -n 's/.* name \([^ ]*\) .*/\1/p' | head -n1)"
      echo "   xdp on ${ifname}: ${name:-program} (id ${id}, ${mode})"
    done
    pids="$(ip netns pids "${ns}" 2>/dev/null | tr '\n' ',' | sed 's/,$//')"
    if [ -n "${pids}" ]; then
      ps -o pid=,args= -p "${pids}" | sed 's/^ */   process /'
    fi
  done
  [ "${any}" -eq 1 ] || {
    echo "lab ${prefix}: down"
    return 0
  }
  if agent_running; then
    echo "== xlbd pid $(cat "${state_dir}/xlbd.pid"), socket ${sock}, log ${state_dir}/xlbd.log"
    if [ -x "${build_dir}/tools/xlbctl/xlbctl" ]; then
      "${build_dir}/tools/xlbctl/xlbctl" --socket "${sock}" status || true
    else
      api GET /v1/status || true
      echo
    fi
  else
    echo "== xlbd: not running (scripts/lab.sh agent-start --prefix ${prefix})"
  fi
}

need_root
case "${cmd}" in
  up) lab_up ;;
  down) lab_down ;;
  sweep) lab_sweep ;;
  status) lab_status ;;
  agent-start) agent_start ;;
  agent-stop) agent_stop TERM ;;
  agent-kill) agent_stop KILL ;;
  server-stop | server-start) server_cmd ;;
  exec)
    [ ${#args[@]} -ge 2 ] || die "exec ROLE COMMAND..."
    ns="$(ns_of "${args[0]}")"
    ns_exists "${ns}" || die "namespace ${ns} does not exist (is lab ${prefix} up?)"
    exec ip netns exec "${ns}" "${args[@]:1}"
    ;;
  api)
    [ ${#args[@]} -ge 2 ] || die "api METHOD PATH [BODY]"
    api "${args[@]}"
    echo
    ;;
  *)
    usage >&2
    exit 2
    ;;
esac
