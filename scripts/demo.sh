#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Shows the balancer at work on a real (namespaced) network: brings up the lab
# (scripts/lab.sh: a client, a router, the LB with xlb_lb in native XDP, three
# backends with xlb-decap and an HTTP server), starts xlbd, sends 300 HTTP
# requests through the VIP from the client (IPv4, then IPv6) and shows how
# they spread over the backends against their weights; kills a backend's
# server and shows when new requests stop failing; takes a second backend's
# health check down for panic; brings both back and shows the slow start;
# drains a backend; shows `xlbctl status` along the way; and tears everything
# down (also on failure or Ctrl-C). Then a second lab with two LB hosts behind
# a router running BGP (BIRD): both share the connections, and one is lost
# silently while long-lived connections stream through the VIP. About 40
# seconds. An xlbd without health checking skips the failover, panic and
# slow-start part.
#
#   ./scripts/demo.sh [BUILD_DIR]              the lab demo (BUILD_DIR defaults to build)
#   ./scripts/demo.sh [BUILD_DIR] --offline [xlb-demo options...]
#                                              the data plane alone, driven through
#                                              BPF_PROG_TEST_RUN (tools/demo/xlb-demo;
#                                              no interface is touched)
#
# `make demo` installs the dependencies, builds and calls this script.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="build"
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
  build_dir="$1"
  shift
fi
offline=0
if [ "${1:-}" = "--offline" ]; then
  offline=1
  shift
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "demo: must run as root: the demo loads BPF programs and creates network namespaces." >&2
  echo "      run: sudo make demo   (or: sudo ./scripts/demo.sh ${build_dir})" >&2
  exit 1
fi

# A relative build directory is taken from the current directory, else from
# the repository root.
if [ ! -d "${build_dir}" ] && [ -d "${repo_root}/${build_dir}" ]; then
  build_dir="${repo_root}/${build_dir}"
fi
build_dir="$(cd "${build_dir}" 2>/dev/null && pwd)" || {
  echo "demo: build directory not found; build first: make (or make demo)" >&2
  exit 1
}

if [ "${offline}" -eq 1 ]; then
  demo="${build_dir}/tools/demo/xlb-demo"
  [ -x "${demo}" ] || {
    echo "demo: ${demo} not found; build it first: make" >&2
    exit 1
  }
  exec "${demo}" "$@"
fi

xlbctl="${build_dir}/userspace/front/xlbctl/xlbctl"
for bin in "${build_dir}/userspace/front/agent/xlbd" "${build_dir}/tools/xlb-decap/xlb-decap" "${xlbctl}"; do
  [ -x "${bin}" ] || {
    echo "demo: ${bin} not found; build first: make (or make demo)" >&2
    exit 1
  }
done

lab="${repo_root}/scripts/lab.sh"
prefix="demo$(($$ % 100000))"
vip=198.51.100.10
started=${SECONDS}

bold() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
cleanup() {
  bold "Tearing the lab down"
  "${lab}" down --prefix "${prefix}" || true
  echo "demo: done in $((SECONDS - started)) s"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

bold "Bringing up the lab ${prefix}: client, router, load balancer, 3 backends (network namespaces)"
"${lab}" up --prefix "${prefix}" --build "${build_dir}" --backends 3 --health --agent
export XLB_SOCKET="/run/xlb-lab/${prefix}/xlbd.sock"
state_dir="/run/xlb-lab/${prefix}"
vipkey="${vip}:80/tcp"

now_ms() { echo $(($(date +%s%N) / 1000000)); }
api() { "${lab}" api --prefix "${prefix}" "$@"; }
# the web VIP's field from GET /v1/status
vip_field() {
  api GET /v1/status | python3 -c 'import json,sys
for v in json.load(sys.stdin)["vips"]:
    if v["vip"] == sys.argv[1]: print(v[sys.argv[2]])' "${vipkey}" "$1"
}
wait_for() {  # wait_for SECONDS FIELD VALUE
  local deadline=$(($(now_ms) + $1 * 1000))
  until [ "$(vip_field "$2" 2>/dev/null)" = "$3" ]; do
    [ "$(now_ms)" -lt "${deadline}" ] || return 1
    sleep 0.1
  done
}
# an agent without health checking shows no probes
health_wired=0
if [[ "$(api GET "/v1/backends?vip=${vipkey}")" == *'"probes"'* ]]; then
  health_wired=1
  wait_for 10 backends_healthy 3 || echo "demo: not every backend is healthy yet"
fi

bold "xlbctl status"
"${xlbctl}" status

# n requests from the client through the VIP, one curl each; prints one
# backend name per line, "failed" for a request that got no answer
requests() {
  local n="$1" url="$2" urls=() i
  for ((i = 0; i < n; i++)); do urls+=("${url}"); done
  "${lab}" exec client --prefix "${prefix}" sh -c 'for u in "$@"; do curl -s --max-time 2 "$u" || echo failed; done' sh "${urls[@]}"
}

# n requests from the client through the VIP in one curl (a new connection
# each: the servers close them); prints one backend name per line
burst() {
  local n="$1" url="$2" urls=() i
  for ((i = 0; i < n; i++)); do urls+=("${url}"); done
  "${lab}" exec client --prefix "${prefix}" curl -s -g --max-time 2 "${urls[@]}" || true
}

# spread WEIGHTS... < names: a table of requests per backend vs weight
spread() {
  local -a weights=("$@")
  local total_w=0 w
  for w in "${weights[@]}"; do total_w=$((total_w + w)); done
  sort | uniq -c | awk -v ws="${weights[*]}" -v tw="${total_w}" '
    { count[$2] = $1; total += $1 }
    END {
      n = split(ws, w, " ")
      printf "  %-8s %6s %9s %9s %8s\n", "backend", "weight", "expected", "requests", "share"
      for (i = 1; i <= n; i++) {
        name = "b" i; c = count[name] + 0
        bar = ""; for (j = 0; j < int(c * 40 / (total ? total : 1) + 0.5); j++) bar = bar "#"
        printf "  %-8s %6d %8.1f%% %9d %7.1f%%  %s\n", name, w[i], tw ? 100 * w[i] / tw : 0, c, 100 * c / (total ? total : 1), bar
        seen[name] = 1
      }
      for (k in count) if (!(k in seen)) printf "  %-8s %6s %9s %9d %7.1f%%\n", k, "", "", count[k], 100 * count[k] / total
      printf "  %d requests\n", total
    }'
}

out="${state_dir}/demo.out"
bold "300 HTTP requests from the client to http://${vip}/ (weights b1:b2:b3 = 100:100:200)"
t0=$(now_ms)
burst 300 "http://${vip}/" >"${out}"
spread 100 100 200 <"${out}"
echo "  (a new TCP connection each, $(($(now_ms) - t0)) ms in all)"

bold "The same over IPv6: 300 requests to http://[2001:db8:f::10]/"
burst 300 "http://[2001:db8:f::10]/" >"${out}"
spread 100 100 200 <"${out}"

if [ "${health_wired}" -eq 0 ]; then
  bold "Health checks"
  echo "  this xlbd does not run health checks yet: skipping failover, panic and slow start"
else
  bold "Killing b2's HTTP server (health check: GET /healthz every 500 ms, 2 failures)"
  t0=$(now_ms)
  "${lab}" server-stop b2 --prefix "${prefix}"
  # one request after another for 3 s, from a loop inside the client namespace:
  # "<ms since epoch> <backend or failed>"
  "${lab}" exec client --prefix "${prefix}" sh -c '
    end=$(($(date +%s%3N) + 3000))
    while [ "$(date +%s%3N)" -lt "${end}" ]; do
      r=$(curl -s --max-time 1 "$1" || echo failed)
      echo "$(date +%s%3N) ${r}"
    done' sh "http://${vip}/" >"${out}"
  awk -v t0="${t0}" '
    { at = $1 - t0; n++; count[$2]++; if ($2 == "failed" || $2 == "b2") { last = at; bad++ } }
    END {
      printf "  %d requests in 3 s after the kill: b1 %d, b3 %d, failed %d (those that went to b2)\n", n, count["b1"], count["b3"], bad
      if (bad) printf "  the last failed %d ms after the kill; every request after it reached b1 or b3\n", last
      else printf "  none failed\n"
      printf "  (detection: interval 500 ms x 2 failures + timeout 250 ms, then one table publish)\n"
    }' "${out}"
  "${xlbctl}" backend list "${vipkey}" || true

  bold "b3's health check fails too: healthy weight 100 of 400 = 25% < panic threshold 50%"
  echo 500 >"${state_dir}/health-b3"
  wait_for 5 panic True || echo "  (not in panic after 5 s)"
  "${xlbctl}" status
  echo "  in panic every backend takes traffic again (b2's requests fail: its server is dead):"
  requests 60 "http://${vip}/" | spread 100 100 200

  bold "Recovery: b2's server back, b3 healthy again: both ramp up over the 3 s slow start"
  rm -f "${state_dir}/health-b3"
  "${lab}" server-start b2 --prefix "${prefix}"
  t0=$(now_ms)
  for _ in $(seq 1 7); do
    api GET "/v1/backends?vip=${vipkey}" | python3 -c 'import json,sys
bs = {b["address"]: b for b in json.load(sys.stdin)["backends"]}
print("  t=%5.1fs  " % (float(sys.argv[1]) / 1000) + "  ".join(
    "%s %-9s %5.1f%% of the table" % ("b" + a[-1], b["health"], 100 * b["share_of_slots"]) for a, b in sorted(bs.items())))' "$(($(now_ms) - t0))"
    sleep 0.5
  done
fi

bold "Draining b1 (xlbctl backend drain ${vipkey} 203.0.113.11): no new connections reach it"
"${xlbctl}" backend drain "${vipkey}" 203.0.113.11
burst 300 "http://${vip}/" >"${out}"
spread 0 100 200 <"${out}"

bold "xlbctl status, stats"
"${xlbctl}" status
"${xlbctl}" stats || true

# ---- Part 2: several LB hosts ---------------------------------------------------------
if ! command -v bird >/dev/null; then
  echo "demo: bird is not installed (scripts/install-deps.sh): skipping the two-host part"
  exit 0
fi
"${lab}" down --prefix "${prefix}" >/dev/null
bold "Two LB hosts, lb and lb2, behind the router: each announces the VIPs through its BIRD (BGP, BFD 100 ms x 3)"
"${lab}" up --prefix "${prefix}" --build "${build_dir}" --backends 3 --lb-hosts 2 --router bgp --agent
for _ in $(seq 1 50); do
  [ "$("${lab}" exec router --prefix "${prefix}" ip route show "${vip}" | grep -c nexthop)" -eq 2 ] && break
  sleep 0.1
done
echo "  the router's route to ${vip}: one next hop per LB host (ECMP on the 5-tuple)"
"${lab}" exec router --prefix "${prefix}" ip route show "${vip}" | sed 's/^/    /'
echo "  both hosts build the same tables:"
"${xlbctl}" --socket "${state_dir}/xlbd.sock" status --peers "${state_dir}/lb2/xlbd.sock" | sed 's/^/    /'

host_packets() {  # host_packets ROLE: the web VIP's packets on that host
  "${lab}" api "$1" --prefix "${prefix}" GET /v1/stats | python3 -c 'import json,sys
print(next(v["packets"] for v in json.load(sys.stdin)["vips"] if v["vip"] == sys.argv[1]))' "${vipkey}"
}
before_lb=$(host_packets lb)
before_lb2=$(host_packets lb2)
burst 300 "http://${vip}/" >"${out}"
spread 100 100 200 <"${out}"
d1=$(($(host_packets lb) - before_lb))
d2=$(($(host_packets lb2) - before_lb2))
echo "  packets of these 300 connections per LB host: lb ${d1}, lb2 ${d2}"

bold "10 long-lived connections stream through the VIP; lb2 is lost silently (no link down: BFD must notice)"
cat >"${state_dir}/streams.py" <<'PY'
# 10 connections to the backends' echo service through the VIP: a line every
# 50 ms on each, for SECONDS; then how many were reset or moved, and the
# longest wait for an echo.
import socket, sys, time
vip, seconds = sys.argv[1], float(sys.argv[2])
conns = []
for i in range(10):
    s = socket.create_connection((vip, 80), timeout=3)
    s.sendall(b"GET /echo HTTP/1.0\r\n\r\n")
    f = s.makefile("rb")
    while f.readline() not in (b"\r\n", b"\n", b""):
        pass
    conns.append([s, f, None])
errors, worst, seq, end = 0, 0.0, 0, time.time() + seconds
while time.time() < end and errors == 0:
    seq += 1
    for c in conns:
        t0 = time.time()
        try:
            c[0].sendall(b"%d\n" % seq)
            name, echoed = c[1].readline().split()
            if c[2] is None:
                c[2] = name
            if name != c[2] or int(echoed) != seq:
                errors += 1
        except (OSError, ValueError):
            errors += 1
        worst = max(worst, time.time() - t0)
    time.sleep(0.05)
print("  %d streams, %d echoes each: %d reset or moved to another backend, longest wait for an echo %.0f ms"
      % (len(conns), seq, errors, worst * 1000))
PY
"${lab}" exec client --prefix "${prefix}" python3 "${state_dir}/streams.py" "${vip}" 6 &
streams_pid=$!
sleep 2
t0=$(now_ms)
"${lab}" host-fail lb2 --prefix "${prefix}"
until [ "$("${lab}" exec router --prefix "${prefix}" ip route show "${vip}" | grep -c nexthop)" -eq 0 ]; do
  [ $(($(now_ms) - t0)) -lt 5000 ] || break
  sleep 0.02
done
echo "  the router withdrew lb2's route after $(($(now_ms) - t0)) ms:"
"${lab}" exec router --prefix "${prefix}" ip route show "${vip}" | sed 's/^/    /'
wait "${streams_pid}" || echo "  (the streaming client failed)"
echo "  new requests meanwhile, all through lb:"
requests 20 "http://${vip}/" | spread 100 100 200
"${lab}" host-restore lb2 --prefix "${prefix}"
