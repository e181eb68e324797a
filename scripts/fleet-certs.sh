#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Makes the certificates of a test or lab fleet store: a CA, one certificate
# for the etcd members (serving clients and peers, valid for every address
# given and 127.0.0.1) and one client certificate for xlbd and xlbctl.
# Throwaway keys for the lab and the tests; a production fleet has its own
# PKI (docs/fleet.md).
#
# Usage: scripts/fleet-certs.sh DIR [--ip ADDRESS]... [--days N]
# Writes DIR/ca.pem, DIR/member.pem, DIR/member-key.pem, DIR/client.pem,
# DIR/client-key.pem (keys mode 0600); DIR is created if needed.
set -euo pipefail

die() { echo "fleet-certs: $*" >&2; exit 2; }

[ $# -ge 1 ] || die "usage: fleet-certs.sh DIR [--ip ADDRESS]... [--days N]"
dir="$1"; shift
ips=(127.0.0.1)
days=30
while [ $# -gt 0 ]; do
  case "$1" in
    --ip) ips+=("${2:?--ip needs an address}"); shift 2 ;;
    --days) days="${2:?--days needs a number}"; shift 2 ;;
    *) die "unknown option '$1'" ;;
  esac
done
command -v openssl >/dev/null || die "openssl not found (scripts/install-deps.sh installs it)"
mkdir -p "${dir}"
umask 077
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT

san="subjectAltName="
for ip in "${ips[@]}"; do san+="IP:${ip},"; done
san="${san%,}"

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out "$1" 2>/dev/null; }

key "${work}/ca-key.pem"
openssl req -x509 -new -key "${work}/ca-key.pem" -out "${dir}/ca.pem" -days "${days}" \
  -subj "/CN=xlb fleet test CA" 2>/dev/null

# sign NAME SUBJECT EXTENSIONS
sign() {
  key "${dir}/$1-key.pem"
  openssl req -new -key "${dir}/$1-key.pem" -out "${work}/$1.csr" -subj "$2" 2>/dev/null
  printf '%b\n' "$3" >"${work}/$1.ext"
  openssl x509 -req -in "${work}/$1.csr" -CA "${dir}/ca.pem" -CAkey "${work}/ca-key.pem" \
    -CAcreateserial -CAserial "${work}/ca.srl" -out "${dir}/$1.pem" -days "${days}" \
    -extfile "${work}/$1.ext" 2>/dev/null
}
sign member "/CN=xlb-etcd-member" "${san}\nextendedKeyUsage=serverAuth,clientAuth"
sign client "/CN=xlb" "extendedKeyUsage=clientAuth"
chmod 0644 "${dir}/ca.pem" "${dir}/member.pem" "${dir}/client.pem"
echo "fleet-certs: ${dir}: ca.pem, member.pem (${ips[*]}), client.pem"
