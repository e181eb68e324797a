#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Mounts bpffs at /sys/fs/bpf when it is not mounted (pinning and libxdp need it).
set -euo pipefail
if ! mountpoint -q /sys/fs/bpf; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "ensure-bpffs: /sys/fs/bpf is not mounted; run as root to mount it" >&2
    exit 1
  fi
  mount -t bpf bpf /sys/fs/bpf
fi
