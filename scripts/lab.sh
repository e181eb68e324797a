#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The xlb lab: a client, a router, the load balancer and backends, each in its
# own network namespace on this machine, with real TCP through the balancer's
# XDP program and direct server return.
#
#   client 192.0.2.10 ---- router ---- br0 (203.0.113.0/24, 2001:db8:b::/64)
#   2001:db8:c::10     192.0.2.1        |-- lb   .2  / ::2   xlbd, xlb_lb in native XDP
#                      2001:db8:c::1    |-- [lb2 .3 / ::3 .. lb4 .5 / ::5]  (--lb-hosts N)
#                                       |-- b1  .11  / ::11  xlb-decap (setup), VIPs on lo, httpd
#                                       |-- b2  .12  / ::12
#                                       `-- b3  .13  / ::13  (--backends N: 0 to 9)
#
# With several LB hosts the router spreads the VIPs' flows over them by ECMP on
# the 5-tuple of the headers (fib_multipath_hash_policy=3 with the five
# fields, never a hash the packet brought along): with --router static through a
# multipath route, with --router bgp through BIRD 2: the router's BIRD (AS
# 65000) has a BGP session (IPv4 and IPv6, BFD 100 ms x 3) with each LB host's
# BIRD (AS 65001), which announces what xlbd writes to its routes file, and
# installs one route per VIP with a next hop per announcing host ("merge
# paths"). Every LB host runs its own xlbd with the same VIPs, backends, seed.
#
# This script is the one definition of the lab: the demo, tests/e2e_tcp and,
# through tests/support/lab_driver.h (test::Lab), every other e2e suite
# build theirs with it. The smallest lab (--backends 0 --no-client) is the LB
# and the router.
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
# With --fleet the LB hosts are configured through a fleet store: three etcd
# members (real etcd processes, TLS with client certificates) on a management
# network of their own, apart from br0, so that etcd's traffic never meets XDP:
#
#   mgmt (198.18.0.0/24, bridge mgmt in namespace P-mgmt)
#     |-- e1 .11  etcd member e1 (clients :2379, peers :2380)
#     |-- e2 .12  etcd member e2
#     |-- e3 .13  etcd member e3
#     `-- lb .2, lb2 .3 .. lb4 .5: each LB host's second interface, mgmt0
#
# Each LB host's xlbd.yaml then holds its host settings and a fleet: section
# (fleet lab, prefix /xlb/lab/); the fleet-wide settings and the VIPs are in
# /run/xlb-lab/P/fleet/desired.yaml, a file xlbd accepts, for the store.
#
# Usage: scripts/lab.sh COMMAND [options]
#   up        build the lab (removes a half-built one on failure)
#   down      remove everything of the lab (namespaces, processes, pins, files)
#   status    show namespaces, XDP programs, processes and the agent's status
#   agent-start [lbN]   start xlbd in an LB namespace with its config (default lb)
#   agent-stop [lbN]    stop xlbd (SIGTERM; the XDP program stays attached)
#   agent-kill [lbN]    kill -9 xlbd
#   bird-stop lbN / bird-start lbN   stop (SIGTERM) / start an LB host's BIRD
#   host-fail lbN / host-restore lbN   lose an LB host silently: the router's
#                 bridge port to it stops forwarding (link up, nothing answers)
#                 and its xlbd and BIRD are frozen (SIGSTOP); restore undoes it
#   server-stop bN / server-start bN   kill -9 / start backend bN's HTTP server
#   exec ROLE [--] CMD...  run CMD in a namespace (ROLE: client router lb lb2..lb4
#                 b1..b9 e1..e3; after --, options such as --help belong to CMD)
#   birdc ROLE CMD...   run birdc on the router's or an LB host's BIRD
#   api [lbN] METHOD PATH [BODY]   call an agent's API on its Unix socket (curl)
#   etcd-stop N|all    stop etcd member eN (1-3) or every member (SIGTERM)
#   etcd-start N|all   start eN or every stopped member again with its data
#                 (the existing cluster); waits until it is healthy when a
#                 quorum (2 of 3) is running, else says it waits for one
#   etcd-fail     lose the whole store: every member killed (SIGKILL) at once;
#                 etcd-start all brings it back with its data
#   etcdctl ARGS...   run etcdctl (API v3) in the LB host lb against the
#                 members with the lab's client certificate
#   sweep     take down every lab whose --owner process is gone (labs of killed
#             test runs); labs without an owner are never swept
# Options:
#   --prefix P     name prefix of everything (default xlab; [a-z0-9], 1-10 chars)
#   --backends N   number of backend namespaces (default 3, 0-9)
#   --lb-hosts N   number of LB hosts: lb, lb2 .. lb4 (default 1, 1-4)
#   --router MODE  how the router reaches the VIPs: static (a route, multipath
#                  with several LB hosts; the default) or bgp (BIRD, above)
#   --no-client    (up) no client namespace (a lab for the agent alone)
#   --owner PID    (up) the process that owns the lab: sweep removes it once PID is gone
#   --in-config N  how many of them the generated config lists (default: all, at most 3)
#   --weights LIST weights of the configured backends (default 100,100,200)
#   --max-backends N  the agents' maps.max_backends (default 64; the fleet's
#                  figures use a VIP of 1,000 backends)
#   --build DIR    build directory with xlbd and xlb-decap (default: build)
#   --health       give the VIPs an HTTP health check (GET /healthz, 500ms)
#   --via-vip      with --health: probe through the VIPs (via_vip: true)
#   --panic-threshold X   the VIPs' panic_threshold (default: the agent's, 0.5)
#   --syn-cookies MODE  encap: gue, every VIP's syn_cookies MODE (off, auto or
#                  always) and its backends cookie_acks: true; the backends'
#                  xlb-decap attaches its cookie acceptor (the default) and
#                  up checks it is there (setup --cookies --check)
#   --second-chance  encap: gue with second_chance on; the backends' xlb-decap
#                  passes packets of flows they do not know on through the
#                  router (--next-hop), which needs a pass-through XDP
#                  program on their ports and their checksums done in software;
#                  their counters go to /run/xlb-lab/P/decap-bN.prom each second
#   --agent        (up) also start xlbd (on every LB host)
#   --fleet        (up) the fleet store: the management network, certificates
#                  (scripts/fleet-certs.sh), etcd members e1..e3, up waits
#                  until they are healthy; the LB hosts' files get fleet:
#                  instead of their VIPs, and the desired state
#                  (fleet/desired.yaml) is loaded with xlbctl fleet import
# Environment: XLBD, XLBCTL, XLB_DECAP override the binaries' paths.
#
# Files: /run/xlb-lab/P/ (xlbd.yaml, state.json, xlbd.sock, logs, pids) for the
# LB host lb, /run/xlb-lab/P/lbN/ for the others, bird-*.conf/.ctl/.log;
# pins:  /sys/fs/bpf/xlb-lab-P/ and /sys/fs/bpf/xlb-lab-P-lbN/ (created by up).
# The fleet store: /run/xlb-lab/P/fleet/ (ca.pem, member.pem, client.pem and
# their keys, desired.yaml; eN/ data, eN.log, eN.pid of each member).
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
max_backends=64
build_dir="${repo_root}/build"
health=0
via_vip=0
panic_threshold=""
second_chance=0
syn_cookies=""
start_agent=0
fleet=0
client=1
owner=""
nlb=1
router_mode=static

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
    --lb-hosts) nlb="${2:?--lb-hosts needs a value}"; shift 2 ;;
    --router) router_mode="${2:?--router needs a value}"; shift 2 ;;
    --in-config) in_config="${2:?--in-config needs a value}"; shift 2 ;;
    --weights) weights="${2:?--weights needs a value}"; shift 2 ;;
    --max-backends)
      max_backends="${2:?--max-backends needs a value}"
      [[ "${max_backends}" =~ ^[1-9][0-9]{0,5}$ ]] || die "--max-backends: found '${max_backends}', expected a number 1-999999"
      shift 2 ;;
    --build) build_dir="${2:?--build needs a value}"; shift 2 ;;
    --health) health=1; shift ;;
    --via-vip) via_vip=1; shift ;;
    --panic-threshold) panic_threshold="${2:?--panic-threshold needs a value}"; shift 2 ;;
    --second-chance) second_chance=1; shift ;;
    --syn-cookies) syn_cookies="${2:?--syn-cookies needs a value}"; shift 2 ;;
    --agent) start_agent=1; shift ;;
    --fleet) fleet=1; shift ;;
    --no-client) client=0; shift ;;
    --owner) owner="${2:?--owner needs a value}"; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    --) shift; args+=("$@"); break ;;
    *) args+=("$1"); shift ;;
  esac
done

[[ "${prefix}" =~ ^[a-z0-9]{1,10}$ ]] || die "--prefix: found '${prefix}', expected 1-10 characters a-z 0-9"
[[ "${nbackends}" =~ ^[0-9]$ ]] || die "--backends: found '${nbackends}', expected 0-9"
[[ "${nlb}" =~ ^[1-4]$ ]] || die "--lb-hosts: found '${nlb}', expected 1-4"
[ -z "${syn_cookies}" ] || [[ "${syn_cookies}" =~ ^(off|auto|always)$ ]] ||
  die "--syn-cookies: found '${syn_cookies}', expected off, auto or always"
[[ "${router_mode}" =~ ^(static|bgp)$ ]] || die "--router: found '${router_mode}', expected static or bgp"
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
xlbd_bin="${XLBD:-${build_dir}/userspace/front/agent/xlbd}"
xlbctl_bin="${XLBCTL:-${build_dir}/userspace/front/xlbctl/xlbctl}"
decap_bin="${XLB_DECAP:-${build_dir}/tools/xlb-decap/xlb-decap}"

router_mac=02:78:6c:62:00:01  # br0's, fixed: a bridge otherwise takes a port's MAC
vip4=198.51.100.10
vip6=2001:db8:f::10
vipmix=198.51.100.20

# The fleet store (--fleet): members e1..e3 and the LB hosts on the
# management network 198.18.0.0/24 (benchmarking range, never routed).
fleet_dir="${state_dir}/fleet"
ns_mgmt="${prefix}-mgmt"
nmembers=3
member_ns() { echo "${prefix}-e$1"; }
member_ip() { echo "198.18.0.1$1"; }
lb_mgmt_ip() { echo "198.18.0.$(($1 + 1))"; }
fleet_endpoints() {  # fleet_endpoints SEPARATOR
  local n out=""
  for ((n = 1; n <= nmembers; n++)); do out+="${out:+$1}https://$(member_ip "${n}"):2379"; done
  echo "${out}"
}

backend_ns() { echo "${prefix}-b$1"; }
backend_v4() { echo "203.0.113.1$1"; }
backend_v6() { echo "2001:db8:b::1$1"; }

# LB host k (1-4): role lb, lb2, lb3, lb4; addresses .2 to .5
lb_role() { if [ "$1" -eq 1 ]; then echo lb; else echo "lb$1"; fi; }
lb_v4() { echo "203.0.113.$(($1 + 1))"; }
lb_v6() { echo "2001:db8:b::$(($1 + 1))"; }
lb_index() {  # lb_index ROLE: k, or dies
  case "$1" in
    lb) echo 1 ;;
    lb[2-4]) echo "${1#lb}" ;;
    *) die "unknown LB host '$1' (lb, lb2..lb4)" ;;
  esac
}
# The LB host's own files: lb keeps the lab directory (older tools read
# xlbd.sock there), the others a directory each.
lb_dir() { if [ "$1" -eq 1 ]; then echo "${state_dir}"; else echo "${state_dir}/lb$1"; fi; }
lb_pins() { if [ "$1" -eq 1 ]; then echo "${pin_dir}"; else echo "${pin_dir}-lb$1"; fi; }
lb_port() { if [ "$1" -eq 1 ]; then echo p-lb; else echo "p-lb$1"; fi; }
bird_ctl() { echo "${state_dir}/bird-$1.ctl"; }  # bird_ctl ROLE (router, lb, lb2..)

ns_of() {
  case "$1" in
    client) echo "${ns_client}" ;;
    router) echo "${ns_router}" ;;
    lb) echo "${ns_lb}" ;;
    lb[2-4] | b[1-9] | e[1-3]) echo "${prefix}-$1" ;;
    *) die "unknown role '$1' (client, router, lb, lb2..lb4, b1..b9, e1..e3)" ;;
  esac
}

# Every namespace this prefix may own (whether it exists or not).
all_ns() {
  echo "${ns_client} ${ns_router} ${ns_lb} ${prefix}-lb2 ${prefix}-lb3 ${prefix}-lb4"
  echo "${ns_mgmt} $(member_ns 1) $(member_ns 2) $(member_ns 3)"
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
    # shellcheck disable=SC2086
    kill -CONT ${pids} 2>/dev/null || true  # a frozen process takes its TERM
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      [ -n "$(ip netns pids "${ns}" 2>/dev/null || true)" ] || return 0
      sleep 0.1
    done
  done
}

lab_down() {
  local ns dir pidfile removed=0
  # the agents first, so that they do not see their interface vanish (a
  # frozen one is thawed to take its SIGTERM)
  for pidfile in "${state_dir}/xlbd.pid" "${state_dir}"/lb[2-4]/xlbd.pid; do
    [ -f "${pidfile}" ] || continue
    kill -TERM "$(cat "${pidfile}")" 2>/dev/null || true
    kill -CONT "$(cat "${pidfile}")" 2>/dev/null || true
  done
  # the store's data goes with the lab: no orderly stop of its members
  local n pid
  for ((n = 1; n <= nmembers; n++)); do
    if pid="$(member_pid "${n}")"; then kill -KILL "${pid}" 2>/dev/null || true; fi
  done
  for ns in $(all_ns); do
    if ns_exists "${ns}"; then
      kill_ns_processes "${ns}"
      ip netns del "${ns}" 2>/dev/null || echo "lab: could not remove namespace ${ns}" >&2
      removed=$((removed + 1))
    fi
  done
  for dir in "${pin_dir}" "${pin_dir}"-lb[2-4]; do
    if [ -d "${dir}" ]; then rm -rf "${dir}"; fi
  done
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

# config_yaml K PART: LB host K's configuration. PART all: the whole file of
# a host on its own; host: the host's part in a fleet (its settings and the
# fleet: section); desired: the fleet's desired state (fleet-wide settings
# and VIPs) with host K's settings, so that xlbd accepts the file.
config_yaml() {
  local k="$1" part="$2" i w dir
  dir="$(lb_dir "${k}")"
  local -a ws
  IFS=',' read -r -a ws <<<"${weights}"
  [ "${#ws[@]}" -ge "${in_config}" ] || die "--weights: ${#ws[@]} weights for ${in_config} backends"
  local hc="    health_check: {type: none}"
  if [ "${health}" -eq 1 ]; then
    local via=""
    [ "${via_vip}" -eq 0 ] || via=", via_vip: true"
    hc="    health_check: {type: http, path: /healthz, interval: 500ms, timeout: 250ms, jitter: 50ms, unhealthy_threshold: 2, healthy_threshold: 2${via}}"
  fi
  case "${part}" in
    all | host) echo "# Written by scripts/lab.sh for lab ${prefix}, LB host $(lb_role "${k}")." ;;
    desired)
      echo "# Written by scripts/lab.sh for lab ${prefix}: the fleet's desired state"
      echo "# (fleet-wide settings and VIPs) for the store; the host settings are"
      echo "# $(lb_role "${k}")'s, only so that xlbd accepts this file."
      ;;
  esac
  echo "interface: eth0"
  echo "xdp_mode: native"
  echo "next_hop: {mac: \"${router_mac}\"}"
  echo "encap_source: {ipv4: $(lb_v4 "${k}"), ipv6: \"$(lb_v6 "${k}")\"}"
  [ "${part}" = host ] || echo "hash_seed: 0x5eed1234"
  echo "mtu: 1600"
  if [ "${part}" != host ]; then
    [ "${second_chance}" -eq 0 ] && [ -z "${syn_cookies}" ] || echo "encap: gue"
    [ "${second_chance}" -eq 0 ] || echo "second_chance: {enabled: true, window: 10m}"
  fi
  echo "maps: {max_vips: 16, max_backends: ${max_backends}, conntrack_entries: 65536}"
  echo "api: {socket: ${dir}/xlbd.sock}"
  echo "metrics: {listen: \"127.0.0.1:9464\"}"
  echo "state_file: ${dir}/state.json"
  echo "pin_dir: $(lb_pins "${k}")"
  if [ "${router_mode}" = bgp ]; then
    echo "bgp: {enabled: true, control_socket: $(bird_ctl "$(lb_role "${k}")"), routes_file: ${dir}/bird/xlb.conf}"
  fi
  if [ "${part}" = host ]; then
    echo "fleet:"
    echo "  name: lab                 # etcd prefix /xlb/lab/"
    echo "  endpoints: [$(fleet_endpoints ', ')]"
    echo "  host_name: $(lb_role "${k}")"
    echo "  ca: ${fleet_dir}/ca.pem"
    echo "  cert: ${fleet_dir}/client.pem"
    echo "  key: ${fleet_dir}/client-key.pem"
    echo "  lease_ttl: 10s"
    return 0
  fi
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
    [ -z "${syn_cookies}" ] || echo "    syn_cookies: ${syn_cookies}"
    # an empty backend list must be written inline
    [ "${in_config}" -gt 0 ] || echo "    backends: []"
    [ "${in_config}" -eq 0 ] || echo "    backends:"
    for ((i = 1; i <= in_config; i++)); do
      w="${ws[$((i - 1))]}"
      [ -z "${syn_cookies}" ] || w="${w}, cookie_acks: true"
      if [ "$3" = v4 ]; then
        echo "      - {address: \"$(backend_v4 "$i")\", weight: ${w}}"
      else
        echo "      - {address: \"$(backend_v6 "$i")\", weight: ${w}}"
      fi
    done
  done
}

write_config() {  # write_config K: LB host K's xlbd.yaml
  local part=all
  [ "${fleet}" -eq 0 ] || part=host
  config_yaml "$1" "${part}" >"$(lb_dir "$1")/xlbd.yaml"
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
  # A server killed by server-stop stays a zombie when its parent is a test
  # process that does not reap it: that one is not running.
  [ -n "${pid}" ] && [[ "$(ps -o stat= -p "${pid}" 2>/dev/null)" =~ ^[^Z] ]] &&
    die "the server of ${role} is running already"
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
  # LB's veth would reach the backends unfinished (docs/architecture.md)
  nsx "${ns_client}" ethtool -K eth0 tx off tso off gso off >/dev/null 2>&1 || true
  nsx "${ns_router}" ethtool -K cl0 tx off tso off gso off >/dev/null 2>&1 || true
}

lab_up_lb_host() {  # lab_up_lb_host K: LB host K and its port on the router's bridge
  local k="$1" ns port
  ns="${prefix}-$(lb_role "${k}")"
  port="$(lb_port "${k}")"
  veth eth0 "${ns}" "${port}" "${ns_router}"
  ip -n "${ns}" link set eth0 mtu 1600
  ip -n "${ns_router}" link set "${port}" mtu 1600 master br0
  ip -n "${ns}" addr add "$(lb_v4 "${k}")/24" dev eth0
  ip -n "${ns}" addr add "$(lb_v6 "${k}")/64" dev eth0 nodad
  ip -n "${ns}" link set eth0 up
  ip -n "${ns}" route add default via 203.0.113.1
  ip -n "${ns}" -6 route add default via 2001:db8:b::1
  # the next hop's MAC, known without ARP
  ip -n "${ns}" neigh replace 203.0.113.1 lladdr "${router_mac}" dev eth0 nud permanent
  ip -n "${ns}" neigh replace 2001:db8:b::1 lladdr "${router_mac}" dev eth0 nud permanent
  nsx "${ns_router}" ethtool -K "${port}" tx off tso off gso off >/dev/null 2>&1 || true
  ip -n "${ns_router}" link set "${port}" up
}

# ---- BGP (--router bgp) ---------------------------------------------------------------
# Timers: BFD 100 ms x 3 finds a silent host in 0.3 s; BGP connects within a
# second of both daemons starting (BIRD waits 5 s by default).

bird_common() {  # bird_common ROLE ROUTER_ID IFNAME
  cat <<EOF
# Written by scripts/lab.sh for lab ${prefix}.
log "${state_dir}/bird-$1.log" all;
router id $2;
protocol device { scan time 10; }
protocol bfd {
  interface "$3" { min rx interval 100 ms; min tx interval 100 ms; multiplier 3; };
}
EOF
}

write_bird_router() {
  local k role
  {
    bird_common router 203.0.113.1 br0
    cat <<'EOF'
# One kernel route per VIP with a next hop per LB host announcing it.
protocol kernel kernel4 { ipv4 { import none; export all; }; merge paths on; }
protocol kernel kernel6 { ipv6 { import none; export all; }; merge paths on; }
template bgp lb_host {
  local as 65000;
  bfd on;
  connect delay time 1; connect retry time 2; error wait time 1, 4;
}
EOF
    for ((k = 1; k <= nlb; k++)); do
      role="$(lb_role "${k}")"
      echo "protocol bgp ${role}_v4 from lb_host { neighbor $(lb_v4 "${k}") as 65001; ipv4 { import all; export none; }; }"
      echo "protocol bgp ${role}_v6 from lb_host { neighbor $(lb_v6 "${k}") as 65001; ipv6 { import all; export none; }; }"
    done
  } >"${state_dir}/bird-router.conf"
}

write_bird_lb() {  # write_bird_lb K
  local k="$1" dir
  dir="$(lb_dir "${k}")"
  # xlbd owns the routes file; until it writes one the glob matches nothing
  # and BIRD starts announcing nothing (docs/bird-notes.md)
  mkdir -p "${dir}/bird"
  {
    bird_common "$(lb_role "${k}")" "$(lb_v4 "${k}")" eth0
    cat <<EOF
# The VIPs this host announces: the static protocols xlb4 and xlb6 that
# xlbd writes (bgp.routes_file).
include "${dir}/bird/*.conf";
template bgp to_router {
  local as 65001;
  bfd on;
  connect delay time 1; connect retry time 2; error wait time 1, 4;
}
protocol bgp router_v4 from to_router {
  neighbor 203.0.113.1 as 65000;
  ipv4 { import none; export where proto = "xlb4"; };
}
protocol bgp router_v6 from to_router {
  neighbor 2001:db8:b::1 as 65000;
  ipv6 { import none; export where proto = "xlb6"; };
}
EOF
  } >"${state_dir}/bird-$(lb_role "${k}").conf"
}

bird_ns() { if [ "$1" = router ]; then echo "${ns_router}"; else echo "${prefix}-$1"; fi; }

bird_start() {  # bird_start ROLE (router, lb, lb2..)
  local role="$1"
  nsx "$(bird_ns "${role}")" bird -c "${state_dir}/bird-${role}.conf" -s "$(bird_ctl "${role}")" \
    -P "${state_dir}/bird-${role}.pid" >"${state_dir}/bird-${role}.out" 2>&1 ||
    die "BIRD did not start in $(bird_ns "${role}"): $(cat "${state_dir}/bird-${role}.out")"
}

bird_stop() {
  local role="$1" pid
  pid="$(cat "${state_dir}/bird-${role}.pid" 2>/dev/null || true)"
  [ -n "${pid}" ] && kill -TERM "${pid}" 2>/dev/null || die "the BIRD of ${role} is not running"
  for _ in $(seq 1 100); do
    kill -0 "${pid}" 2>/dev/null || { rm -f "${state_dir}/bird-${role}.pid"; return 0; }
    sleep 0.05
  done
  die "the BIRD of ${role} (pid ${pid}) did not exit after SIGTERM"
}

birdc_in() {  # birdc_in ROLE ARGS...
  local role="$1"
  shift
  birdc -s "$(bird_ctl "${role}")" "$@"
}

bird_wait_established() {  # every BGP session of the router
  local want=$((2 * nlb)) got=0 deadline=$((SECONDS + 20))
  while [ "${SECONDS}" -lt "${deadline}" ]; do
    got="$(birdc_in router show protocols | grep -c ' BGP .* up .*Established' || true)"
    [ "${got}" -ge "${want}" ] && return 0
    sleep 0.2
  done
  die "BGP: ${got} of ${want} sessions established after 20 s: $(birdc_in router show protocols)"
}

# ---- the fleet store (--fleet) ------------------------------------------------------
# Three etcd members, one per namespace, on a bridge in a namespace of its
# own: the LB hosts reach them through a second interface (mgmt0), never
# through eth0 and its XDP program, and neither the router nor host-fail
# touches the store.

lab_up_mgmt_network() {
  local n k ns port
  ip -n "${ns_mgmt}" link add mgmt type bridge
  for ((n = 1; n <= nmembers; n++)); do
    ns="$(member_ns "${n}")"
    veth eth0 "${ns}" "p-e${n}" "${ns_mgmt}"
    ip -n "${ns}" addr add "$(member_ip "${n}")/24" dev eth0
    ip -n "${ns}" link set eth0 up
    ip -n "${ns_mgmt}" link set "p-e${n}" master mgmt up
  done
  for ((k = 1; k <= nlb; k++)); do
    ns="${prefix}-$(lb_role "${k}")"
    port="p-$(lb_role "${k}")"
    veth mgmt0 "${ns}" "${port}" "${ns_mgmt}"
    ip -n "${ns}" addr add "$(lb_mgmt_ip "${k}")/24" dev mgmt0
    ip -n "${ns}" link set mgmt0 up
    ip -n "${ns_mgmt}" link set "${port}" master mgmt up
  done
  ip -n "${ns_mgmt}" link set mgmt up
}

member_pid() {  # member_pid N: prints eN's pid while it runs, else fails
  local pid state
  pid="$(cat "${fleet_dir}/e$1.pid" 2>/dev/null)" || return 1
  [[ "${pid}" =~ ^[0-9]+$ ]] && [ "$(cat "/proc/${pid}/comm" 2>/dev/null)" = etcd ] || return 1
  # killed, but not yet reaped by the process that inherited it
  state="$(awk '{ print $3 }' "/proc/${pid}/stat" 2>/dev/null)" || return 1
  [ "${state}" != Z ] || return 1
  echo "${pid}"
}

member_start() {  # member_start N: eN in the background, on its data directory
  local n="$1" ip state=new cluster="" m
  ip="$(member_ip "${n}")"
  # a member that ran before rejoins the cluster its data names
  [ ! -d "${fleet_dir}/e${n}/member" ] || state=existing
  for ((m = 1; m <= nmembers; m++)); do cluster+="${cluster:+,}e${m}=https://$(member_ip "${m}"):2380"; done
  (
    # A member outlives this script and its caller: it keeps none of their
    # files open (held by a member, the caller's flock on a lock file would
    # stay taken until the lab is down).
    local fd
    for fd in /proc/"${BASHPID}"/fd/*; do
      fd="${fd##*/}"
      if [ "${fd}" -gt 2 ]; then exec {fd}>&-; fi
    done
    # nsenter leaves /sys alone (ip netns exec remounts it); it execs etcd,
    # so $! is etcd's pid
    exec nsenter --net="/run/netns/$(member_ns "${n}")" etcd --name "e${n}" --data-dir "${fleet_dir}/e${n}" \
      --logger zap --log-outputs stderr \
      --listen-client-urls "https://${ip}:2379" --advertise-client-urls "https://${ip}:2379" \
      --listen-peer-urls "https://${ip}:2380" --initial-advertise-peer-urls "https://${ip}:2380" \
      --initial-cluster "${cluster}" --initial-cluster-state "${state}" \
      --initial-cluster-token "xlb-lab-${prefix}" \
      --cert-file "${fleet_dir}/member.pem" --key-file "${fleet_dir}/member-key.pem" \
      --trusted-ca-file "${fleet_dir}/ca.pem" --client-cert-auth \
      --peer-cert-file "${fleet_dir}/member.pem" --peer-key-file "${fleet_dir}/member-key.pem" \
      --peer-trusted-ca-file "${fleet_dir}/ca.pem" --peer-client-cert-auth
  ) </dev/null >>"${fleet_dir}/e${n}.log" 2>&1 &
  local pid=$!
  echo "${pid}" >"${fleet_dir}/e${n}.pid"
  # until nsenter has exec'd etcd, the pid is not yet a member's
  for _ in $(seq 1 100); do
    [ "$(cat "/proc/${pid}/comm" 2>/dev/null)" != etcd ] || return 0
    kill -0 "${pid}" 2>/dev/null || break
    sleep 0.02
  done
  die "etcd member e${n} did not start; the end of ${fleet_dir}/e${n}.log: $(tail -n 5 "${fleet_dir}/e${n}.log")"
}

member_healthy() {  # member_healthy N NS: eN answers healthy (it has a leader) to a client in NS
  nsx "$2" curl -s --max-time 2 --cacert "${fleet_dir}/ca.pem" --cert "${fleet_dir}/client.pem" \
    --key "${fleet_dir}/client-key.pem" "https://$(member_ip "$1"):2379/health" 2>/dev/null |
    grep -q '"health":"true"'
}

members_wait_healthy() {  # members_wait_healthy N...: as the LB host lb sees them
  local n deadline=$((SECONDS + 20))
  for n in "$@"; do
    until member_healthy "${n}" "${ns_lb}"; do
      member_pid "${n}" >/dev/null ||
        die "etcd member e${n} exited; the end of ${fleet_dir}/e${n}.log: $(tail -n 5 "${fleet_dir}/e${n}.log")"
      [ "${SECONDS}" -lt "${deadline}" ] ||
        die "etcd member e${n} not healthy after 20 s; the end of ${fleet_dir}/e${n}.log: $(tail -n 5 "${fleet_dir}/e${n}.log")"
      sleep 0.1
    done
  done
}

lab_up_fleet() {  # the management network, the certificates, the members started
  lab_up_mgmt_network
  local -a ips=()
  local n out
  for ((n = 1; n <= nmembers; n++)); do ips+=(--ip "$(member_ip "${n}")"); done
  out="$("${repo_root}/scripts/fleet-certs.sh" "${fleet_dir}" "${ips[@]}" 2>&1)" ||
    die "could not make the fleet's certificates: ${out}"
  for ((n = 1; n <= nmembers; n++)); do member_start "${n}"; done
}

# Loads the fleet's desired state (fleet/desired.yaml) into the store, under
# /xlb/lab/, with xlbctl from the LB host lb; fleet/xlbctl.yaml is xlbctl's
# file for the lab's fleet (XLBCTL_CONFIG=... xlbctl fleet status).
fleet_import() {
  {
    echo "fleet:"
    echo "  name: lab"
    echo "  endpoints: [$(fleet_endpoints ', ')]"
    echo "  ca: ${fleet_dir}/ca.pem"
    echo "  cert: ${fleet_dir}/client.pem"
    echo "  key: ${fleet_dir}/client-key.pem"
  } >"${fleet_dir}/xlbctl.yaml"
  local out
  out="$(nsx "${ns_lb}" env XLBCTL_CONFIG="${fleet_dir}/xlbctl.yaml" "${xlbctl_bin}" \
    fleet import "${fleet_dir}/desired.yaml" --reason "lab set-up" 2>&1)" ||
    die "could not load the fleet's desired state: ${out}"
}

member_arg() {  # member_arg ARG: the members ARG names (N or all) in selected
  local n
  selected=()
  case "$1" in
    all) for ((n = 1; n <= nmembers; n++)); do selected+=("${n}"); done ;;
    [1-3]) selected=("$1") ;;
    *) die "${cmd}: found '$1', expected a member 1-${nmembers} or all" ;;
  esac
}

members_wait_gone() {  # members_wait_gone SIGNAL N...: each exits within 10 s
  local sig="$1" n
  shift
  for n in "$@"; do
    for _ in $(seq 1 200); do
      member_pid "${n}" >/dev/null || break
      sleep 0.05
    done
    ! member_pid "${n}" >/dev/null || die "etcd member e${n} did not exit after SIG${sig}"
    rm -f "${fleet_dir}/e${n}.pid"
  done
}

etcd_stop() {  # etcd_stop N|all: one member after the other, each given time to leave
  local n pid
  member_arg "$1"
  for n in "${selected[@]}"; do
    if ! pid="$(member_pid "${n}")"; then
      [ "$1" = all ] || die "etcd member e${n} is not running"
      continue
    fi
    kill -TERM "${pid}" 2>/dev/null || true
    members_wait_gone TERM "${n}"
    echo "lab ${prefix}: etcd member e${n} stopped (SIGTERM)"
  done
}

etcd_fail() {  # every running member killed in one go: the store lost, not stopped
  local n pid
  local -a killed=()
  for ((n = 1; n <= nmembers; n++)); do
    if pid="$(member_pid "${n}")"; then
      kill -KILL "${pid}" 2>/dev/null || true
      killed+=("${n}")
    fi
  done
  members_wait_gone KILL "${killed[@]}"
  echo "lab ${prefix}: fleet store lost: $(printf 'e%s ' "${killed[@]}")killed (etcd-start all brings it back)"
}

etcd_start() {  # etcd_start N|all
  local n running=0 m
  local -a started=()
  member_arg "$1"
  for n in "${selected[@]}"; do
    if member_pid "${n}" >/dev/null; then
      [ "$1" = all ] || die "etcd member e${n} is running already (pid $(member_pid "${n}"))"
      continue
    fi
    member_start "${n}"
    started+=("${n}")
  done
  for ((m = 1; m <= nmembers; m++)); do
    member_pid "${m}" >/dev/null && running=$((running + 1))
  done
  # one member alone has no leader: it serves nothing until a second joins
  if [ "${running}" -le $((nmembers / 2)) ]; then
    echo "lab ${prefix}: etcd member(s) $(printf 'e%s ' "${started[@]}")started; ${running} of ${nmembers} running, no quorum until another member starts"
    return 0
  fi
  members_wait_healthy "${started[@]}"
  [ ${#started[@]} -eq 0 ] || echo "lab ${prefix}: etcd member(s) $(printf 'e%s ' "${started[@]}")started, healthy"
  [ ${#started[@]} -gt 0 ] || echo "lab ${prefix}: every etcd member is running already"
}

fleet_status() {
  local n pid health
  echo "== etcd members (fleet store, ${fleet_dir})"
  for ((n = 1; n <= nmembers; n++)); do
    if pid="$(member_pid "${n}")"; then
      health=unhealthy
      member_healthy "${n}" "$(member_ns "${n}")" && health=healthy
      echo "   e${n} https://$(member_ip "${n}"):2379: running (pid ${pid}), ${health}, log ${fleet_dir}/e${n}.log"
    else
      echo "   e${n} https://$(member_ip "${n}"):2379: stopped (scripts/lab.sh etcd-start ${n} --prefix ${prefix})"
    fi
  done
}

lab_up() {
  local ns i b
  command -v python3 >/dev/null || die "python3 is missing (scripts/install-deps.sh installs it)"
  command -v ethtool >/dev/null || die "ethtool is missing (scripts/install-deps.sh installs it)"
  [ "${router_mode}" = static ] || command -v bird >/dev/null ||
    die "bird is missing (--router bgp needs BIRD 2: scripts/install-deps.sh installs it)"
  if [ "${fleet}" -eq 1 ]; then
    [ -x "${xlbctl_bin}" ] || die "xlbctl not found at ${xlbctl_bin} (make build; or set XLBCTL)"
    local tool
    for tool in etcd curl openssl; do
      command -v "${tool}" >/dev/null ||
        die "${tool} is missing (--fleet needs etcd-server, curl and openssl: scripts/install-deps.sh installs them)"
    done
  fi
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
  # what later commands (agent-start lb2, status) need to know of this lab
  printf 'nlb=%s\nrouter_mode=%s\nfleet=%s\n' "${nlb}" "${router_mode}" "${fleet}" >"${state_dir}/lab.env"
  local k
  for ((k = 1; k <= nlb; k++)); do
    mkdir -p -m 0700 "$(lb_pins "${k}")"
    mkdir -p -m 0755 "$(lb_dir "${k}")"
  done

  local -a namespaces=("${ns_router}")
  for ((k = 1; k <= nlb; k++)); do namespaces+=("${prefix}-$(lb_role "${k}")"); done
  [ "${client}" -eq 0 ] || namespaces+=("${ns_client}")
  if [ "${fleet}" -eq 1 ]; then
    namespaces+=("${ns_mgmt}")
    for ((i = 1; i <= nmembers; i++)); do namespaces+=("$(member_ns "$i")"); done
  fi
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

  # LB hosts <-> router bridge
  for ((k = 1; k <= nlb; k++)); do lab_up_lb_host "${k}"; done

  # the fleet store: its members elect a leader while the rest is built
  [ "${fleet}" -eq 0 ] || lab_up_fleet

  # backends
  for ((i = 1; i <= nbackends; i++)); do
    b="$(backend_ns "$i")"
    veth eth0 "${b}" "p-b$i" "${ns_router}"
    ip -n "${ns_router}" link set "p-b$i" mtu 1600 master br0
    ip -n "${ns_router}" link set "p-b$i" up
    sysctl_in "${b}" net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0
    # What a real backend needs (docs/deploy.md) comes from the command the
    # guide gives: the VIPs on lo, arp_ignore/arp_announce, a loose
    # rp_filter, eth0's MTU for the LB's mtu. The decapsulator starts below.
    nsx "${b}" "${decap_bin}" setup --interface eth0 --vip "${vip4}" --vip "${vipmix}" \
      --vip "${vip6}" --mtu 1600 >"${state_dir}/setup-b$i.log" 2>&1 ||
      die "xlb-decap setup in ${b} failed: $(cat "${state_dir}/setup-b$i.log")"
    ip -n "${b}" addr add "$(backend_v4 "$i")/24" dev eth0
    ip -n "${b}" addr add "$(backend_v6 "$i")/64" dev eth0 nodad
    ip -n "${b}" link set eth0 up
    ip -n "${b}" route add default via 203.0.113.1
    ip -n "${b}" -6 route add default via 2001:db8:b::1
  done

  ip -n "${ns_router}" addr add 203.0.113.1/24 dev br0
  ip -n "${ns_router}" addr add 2001:db8:b::1/64 dev br0 nodad
  ip -n "${ns_router}" link set br0 up
  # VIPs via the LB hosts, never on-link: ECMP on the 5-tuple over them.
  # Policy 1 would reuse a hash already on the packet, and a packet that
  # crossed a veth still carries the client socket's hash, which the client's
  # kernel changes after a retransmission timeout: the flow would jump hosts.
  # Policy 3 (custom) always hashes the headers' fields, here source and
  # destination address, protocol, source and destination port (0x37), as a
  # router with its own hardware would.
  sysctl_in "${ns_router}" net.ipv4.fib_multipath_hash_policy=3 \
    net.ipv4.fib_multipath_hash_fields=0x37 \
    net.ipv6.fib_multipath_hash_policy=3 net.ipv6.fib_multipath_hash_fields=0x37
  if [ "${router_mode}" = static ]; then
    local -a via4=() via6=()
    for ((k = 1; k <= nlb; k++)); do
      via4+=(nexthop via "$(lb_v4 "${k}")")
      via6+=(nexthop via "$(lb_v6 "${k}")")
    done
    ip -n "${ns_router}" route add 198.51.100.0/24 "${via4[@]}"
    ip -n "${ns_router}" -6 route add 2001:db8:f::/64 "${via6[@]}"
  fi

  # native XDP_TX from an LB's veth needs a program on the peer: a pass-through
  for ((k = 1; k <= nlb; k++)); do
    nsx "${ns_router}" "${decap_bin}" --interface "$(lb_port "${k}")" --keep --quiet \
      >"${state_dir}/router-xdp.log" 2>&1 ||
      die "could not attach the pass-through XDP program to $(lb_port "${k}"): $(cat "${state_dir}/router-xdp.log")"
  done

  # backends' decapsulator and HTTP server
  write_httpd
  local -a pass_on=()
  if [ "${second_chance}" -eq 1 ]; then
    pass_on=(--next-hop "${router_mac}")
    for ((i = 1; i <= nbackends; i++)); do
      # XDP_TX from the backend's veth needs a program on its peer; frames
      # through a veth with XDP lose partial checksums (docs/architecture.md)
      nsx "${ns_router}" "${decap_bin}" --interface "p-b$i" --keep --quiet \
        >"${state_dir}/router-xdp.log" 2>&1 ||
        die "could not attach the pass-through XDP program to p-b$i: $(cat "${state_dir}/router-xdp.log")"
      nsx "$(backend_ns "$i")" ethtool -K eth0 tx off tso off gso off >/dev/null 2>&1 || true
    done
  fi
  for ((i = 1; i <= nbackends; i++)); do
    b="$(backend_ns "$i")"
    # ip netns exec execs the command: $! is the program's own pid
    [ "${second_chance}" -eq 0 ] ||
      pass_on+=(--metrics-file "${state_dir}/decap-b$i.prom" --metrics-interval 1)
    ip netns exec "${b}" "${decap_bin}" --interface eth0 --address "$(backend_v4 "$i")" \
      --address "$(backend_v6 "$i")" "${pass_on[@]}" >"${state_dir}/decap-b$i.log" 2>&1 &
    [ "${second_chance}" -eq 0 ] || pass_on=(--next-hop "${router_mac}")
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
    # and every setting is as the guide's check wants it
    nsx "$(backend_ns "$i")" "${decap_bin}" setup --interface eth0 --vip "${vip4}" \
      --vip "${vipmix}" --vip "${vip6}" --mtu 1600 ${syn_cookies:+--cookies} --check >"${state_dir}/check-b$i.log" 2>&1 ||
      die "backend b$i: xlb-decap setup --check: $(cat "${state_dir}/check-b$i.log")"
  done

  # resolve neighbours now, so that the first packets are not queued on ARP
  if [ "${client}" -eq 1 ]; then
    nsx "${ns_client}" ping -c1 -W1 192.0.2.1 >/dev/null 2>&1 || die "client cannot reach the router"
  fi
  for ((k = 1; k <= nlb; k++)); do
    nsx "${prefix}-$(lb_role "${k}")" ping -c1 -W1 203.0.113.1 >/dev/null 2>&1 ||
      die "LB host $(lb_role "${k}") cannot reach the router"
  done
  for ((i = 1; i <= nbackends; i++)); do
    nsx "${ns_router}" ping -c1 -W1 "$(backend_v4 "$i")" >/dev/null 2>&1 ||
      die "the router cannot reach backend b$i"
    nsx "${ns_router}" ping -6 -c1 -W1 "$(backend_v6 "$i")" >/dev/null 2>&1 ||
      die "the router cannot reach backend b$i over IPv6"
  done

  if [ "${fleet}" -eq 1 ]; then
    members_wait_healthy $(seq 1 "${nmembers}")
    for ((k = 2; k <= nlb; k++)); do
      member_healthy 1 "${prefix}-$(lb_role "${k}")" || die "LB host $(lb_role "${k}") cannot reach the fleet store"
    done
    config_yaml 1 desired >"${fleet_dir}/desired.yaml"
    fleet_import
  fi
  for ((k = 1; k <= nlb; k++)); do write_config "${k}"; done
  if [ "${router_mode}" = bgp ]; then
    write_bird_router
    bird_start router
    for ((k = 1; k <= nlb; k++)); do
      write_bird_lb "${k}"
      bird_start "$(lb_role "${k}")"
    done
    bird_wait_established
  fi

  if [ "${start_agent}" -eq 1 ]; then
    for ((k = 1; k <= nlb; k++)); do agent_start "$(lb_role "${k}")"; done
  fi
  trap - EXIT
  echo "lab ${prefix}: up (${nbackends} backends$([ "${nlb}" -eq 1 ] || echo ", ${nlb} LB hosts, router ${router_mode}")$([ "${client}" -eq 1 ] || echo ", no client")$([ "${fleet}" -eq 0 ] || echo ", fleet store $(fleet_endpoints ,)"); config ${state_dir}/xlbd.yaml)"
}

# ---- the agents -------------------------------------------------------------------

api() {  # api SOCKET METHOD PATH [BODY]
  local socket="$1"
  shift
  local -a data=()
  [ $# -ge 3 ] && data=(-H 'Content-Type: application/json' --data-binary "$3")
  curl -sS --max-time 20 --unix-socket "${socket}" -X "$1" "${data[@]}" "http://xlbd$2"
}

agent_running() {  # agent_running ROLE
  local dir
  dir="$(lb_dir "$(lb_index "$1")")"
  [ -f "${dir}/xlbd.pid" ] && kill -0 "$(cat "${dir}/xlbd.pid")" 2>/dev/null
}

agent_start() {  # agent_start ROLE
  local role="$1" dir ns socket
  dir="$(lb_dir "$(lb_index "${role}")")"
  ns="${prefix}-${role}"
  socket="${dir}/xlbd.sock"
  ns_exists "${ns}" || die "LB host ${role} of lab ${prefix} does not exist"
  agent_running "${role}" && die "xlbd on ${role} is running already (pid $(cat "${dir}/xlbd.pid"))"
  [ -x "${xlbd_bin}" ] || die "${xlbd_bin} not found: build it (cmake --build ${build_dir} --target xlbd)"
  # nsenter keeps this mount namespace, where bpffs is mounted (ip netns exec
  # remounts /sys and hides /sys/fs/bpf)
  nsenter --net="/run/netns/${ns}" "${xlbd_bin}" --config "${dir}/xlbd.yaml" >>"${dir}/xlbd.log" 2>&1 &
  local pid=$!
  echo "${pid}" >"${dir}/xlbd.pid"
  local deadline=$((SECONDS + 15))
  until [ -S "${socket}" ] && [ "$(curl -s --max-time 2 --unix-socket "${socket}" -o /dev/null -w '%{http_code}' http://xlbd/readyz)" = 200 ]; do
    if ! kill -0 "${pid}" 2>/dev/null; then
      echo "lab: xlbd on ${role} exited; its log:" >&2
      tail -n 30 "${dir}/xlbd.log" >&2
      exit 1
    fi
    if [ "${SECONDS}" -ge "${deadline}" ]; then
      echo "lab: xlbd on ${role} not ready after 15 s; its log:" >&2
      tail -n 30 "${dir}/xlbd.log" >&2
      exit 1
    fi
    sleep 0.05
  done
  echo "lab ${prefix}: xlbd ready on ${role} (pid ${pid}, socket ${socket})"
}

agent_stop() {  # agent_stop ROLE SIGNAL
  local role="$1" sig="$2" dir pid
  dir="$(lb_dir "$(lb_index "${role}")")"
  agent_running "${role}" || { echo "lab ${prefix}: xlbd on ${role} is not running"; return 0; }
  pid="$(cat "${dir}/xlbd.pid")"
  kill "-${sig}" "${pid}"
  kill -CONT "${pid}" 2>/dev/null || true
  for _ in $(seq 1 100); do
    kill -0 "${pid}" 2>/dev/null || break
    sleep 0.05
  done
  kill -0 "${pid}" 2>/dev/null && die "xlbd on ${role} (pid ${pid}) did not exit after SIG${sig}"
  rm -f "${dir}/xlbd.pid"
  echo "lab ${prefix}: xlbd on ${role} stopped (SIG${sig})"
}

# A silent host loss: the link stays up, nothing answers. The router's bridge
# port to the host stops forwarding either way, and the host's daemons freeze,
# so that neither BFD nor the data plane answers until host-restore.
host_fail() {  # host_fail ROLE fail|restore
  local role="$1" k dir sig=STOP state=0 pidfile
  k="$(lb_index "${role}")"
  dir="$(lb_dir "${k}")"
  ns_exists "${prefix}-${role}" || die "LB host ${role} of lab ${prefix} does not exist"
  [ "$2" = fail ] || { sig=CONT; state=3; }
  bridge -n "${ns_router}" link set dev "$(lb_port "${k}")" state "${state}" ||
    die "could not set the router's port to ${role} to state ${state}"
  for pidfile in "${dir}/xlbd.pid" "${state_dir}/bird-${role}.pid"; do
    [ -f "${pidfile}" ] && kill "-${sig}" "$(cat "${pidfile}")" 2>/dev/null || true
  done
  if [ "$2" = fail ]; then echo "lab ${prefix}: ${role} lost (silent)"; else echo "lab ${prefix}: ${role} restored"; fi
}

# The role of an optional first argument naming an LB host (default lb).
take_lb_role() {
  lb_role_arg=lb
  if [ ${#args[@]} -gt 0 ] && [[ "${args[0]}" =~ ^lb[2-4]?$ ]]; then
    lb_role_arg="${args[0]}"
    args=("${args[@]:1}")
  fi
  lb_index "${lb_role_arg}" >/dev/null
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
  [ "${fleet}" -eq 0 ] || fleet_status
  local k role dir
  for ((k = 1; k <= nlb; k++)); do
    role="$(lb_role "${k}")"
    dir="$(lb_dir "${k}")"
    if agent_running "${role}"; then
      echo "== xlbd on ${role}: pid $(cat "${dir}/xlbd.pid"), socket ${dir}/xlbd.sock, log ${dir}/xlbd.log"
      if [ -x "${build_dir}/userspace/front/xlbctl/xlbctl" ]; then
        "${build_dir}/userspace/front/xlbctl/xlbctl" --socket "${dir}/xlbd.sock" status || true
      else
        api "${dir}/xlbd.sock" GET /v1/status || true
        echo
      fi
    else
      echo "== xlbd on ${role}: not running (scripts/lab.sh agent-start ${role} --prefix ${prefix})"
    fi
  done
  if [ "${router_mode}" = bgp ] && [ -S "$(bird_ctl router)" ]; then
    echo "== the router's BGP sessions and VIP routes"
    birdc_in router show protocols | grep BGP || true
    ip -n "${ns_router}" route show 198.51.100.0/24 || true
    ip -n "${ns_router}" -6 route show 2001:db8:f::/64 || true
  fi
}

need_root
if [ "${cmd}" != up ] && [ -f "${state_dir}/lab.env" ]; then
  # shellcheck disable=SC1091
  . "${state_dir}/lab.env"
fi
case "${cmd}" in
  up) lab_up ;;
  down) lab_down ;;
  sweep) lab_sweep ;;
  status) lab_status ;;
  agent-start) take_lb_role && agent_start "${lb_role_arg}" ;;
  agent-stop) take_lb_role && agent_stop "${lb_role_arg}" TERM ;;
  agent-kill) take_lb_role && agent_stop "${lb_role_arg}" KILL ;;
  server-stop | server-start) server_cmd ;;
  host-fail | host-restore)
    [ ${#args[@]} -ge 1 ] || die "${cmd} lbN"
    host_fail "${args[0]}" "${cmd#host-}"
    ;;
  bird-stop | bird-start)
    [ "${router_mode}" = bgp ] || die "lab ${prefix} has no BGP (up --router bgp)"
    [ ${#args[@]} -ge 1 ] || die "${cmd} router|lbN"
    [ "${args[0]}" = router ] || lb_index "${args[0]}" >/dev/null
    if [ "${cmd}" = bird-stop ]; then
      bird_stop "${args[0]}"
      echo "lab ${prefix}: BIRD of ${args[0]} stopped"
    else
      bird_start "${args[0]}"
      echo "lab ${prefix}: BIRD of ${args[0]} started"
    fi
    ;;
  birdc)
    [ ${#args[@]} -ge 2 ] || die "birdc ROLE COMMAND..."
    [ "${args[0]}" = router ] || lb_index "${args[0]}" >/dev/null
    birdc_in "${args[0]}" "${args[@]:1}"
    ;;
  exec)
    [ ${#args[@]} -ge 2 ] || die "exec ROLE COMMAND..."
    ns="$(ns_of "${args[0]}")"
    ns_exists "${ns}" || die "namespace ${ns} does not exist (is lab ${prefix} up?)"
    exec ip netns exec "${ns}" "${args[@]:1}"
    ;;
  etcd-stop | etcd-start | etcd-fail | etcdctl)
    [ "${fleet}" -eq 1 ] || die "lab ${prefix} has no fleet store (up --fleet)"
    case "${cmd}" in
      etcd-stop)
        [ ${#args[@]} -eq 1 ] || die "etcd-stop N|all"
        etcd_stop "${args[0]}"
        ;;
      etcd-start)
        [ ${#args[@]} -eq 1 ] || die "etcd-start N|all"
        etcd_start "${args[0]}"
        ;;
      etcd-fail)
        [ ${#args[@]} -eq 0 ] || die "etcd-fail takes no argument"
        etcd_fail
        ;;
      etcdctl)
        nsx "${ns_lb}" env ETCDCTL_API=3 etcdctl --endpoints "$(fleet_endpoints ,)" \
          --cacert "${fleet_dir}/ca.pem" --cert "${fleet_dir}/client.pem" \
          --key "${fleet_dir}/client-key.pem" "${args[@]}"
        ;;
    esac
    ;;
  api)
    take_lb_role
    [ ${#args[@]} -ge 2 ] || die "api [lbN] METHOD PATH [BODY]"
    api "$(lb_dir "$(lb_index "${lb_role_arg}")")/xlbd.sock" "${args[@]}"
    echo
    ;;
  *)
    usage >&2
    exit 2
    ;;
esac
