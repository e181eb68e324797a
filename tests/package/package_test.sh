#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Debian packages (label package; tests/package/CMakeLists.txt).
#
#   package_test.sh build    SOURCE_DIR BUILD_DIR OUT_DIR
#   package_test.sh contents OUT_DIR
#   package_test.sh lintian  OUT_DIR SOURCE_DIR
#   package_test.sh install  OUT_DIR
#
# build packages the binaries of BUILD_DIR (the ctest tree, already built)
# from a clean copy of SOURCE_DIR, as `make deb` does, into OUT_DIR; the
# others read what it left there. install uses a throwaway root (dpkg
# --root with chrootless maintainer scripts that honour DPKG_ROOT): the
# machine's own /usr, /etc, dpkg database and services are never touched.
set -euo pipefail

PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
ok() { echo "ok: $*"; }
finish() {
  if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed" >&2
    exit 1
  fi
  echo "all checks passed"
}
version_of() { sed -n 's/^project(xlb VERSION \([0-9.]*\).*/\1/p' "$1/CMakeLists.txt"; }
deb_of() {  # deb_of OUT_DIR PACKAGE: the one .deb of PACKAGE
  local found=("$1/$2"_*_*.deb)
  if [ ${#found[@]} -ne 1 ] || [ ! -f "${found[0]}" ]; then
    echo "no single $2 .deb in $1 (found: ${found[*]}): did package_build pass?" >&2
    exit 1
  fi
  echo "${found[0]}"
}

cmd_build() {
  local src=$1 build=$2 out=$3
  rm -rf "$out"
  local before
  before=$(git -C "$src" status --porcelain --untracked-files=all 2>/dev/null || true)
  local start=$SECONDS
  JOBS=1 "$src/scripts/build-deb.sh" "$out" "$build"
  echo "packaged in $((SECONDS - start)) s"
  local version
  version=$(version_of "$src")
  for p in xlb xlb-decap; do
    if [ -f "$out/${p}_${version}_$(dpkg --print-architecture).deb" ]; then
      ok "$p ${version} built"
    else
      fail "$out/${p}_${version}_$(dpkg --print-architecture).deb missing"
    fi
  done
  if [ "$(git -C "$src" status --porcelain --untracked-files=all 2>/dev/null || true)" != "$before" ]; then
    fail "the build changed files in $src (it must work on its copy)"
  fi
  finish
}

# expect_listed LISTING MODE PATH: PATH is in the dpkg-deb -c listing with MODE
expect_listed() {
  local listing=$1 mode=$2 path=$3
  if awk -v m="$mode" -v p="./$path" '$1 == m && ($6 == p || $6 == p "/") {f = 1} END {exit !f}' \
    <<<"$listing"; then
    ok "lists $mode $path"
  else
    fail "dpkg-deb -c does not list $mode ./$path"
  fi
}

cmd_contents() {
  local out=$1 xlb decap listing
  xlb=$(deb_of "$out" xlb)
  decap=$(deb_of "$out" xlb-decap)

  listing=$(dpkg-deb -c "$xlb")
  expect_listed "$listing" -rwxr-xr-x usr/sbin/xlbd
  expect_listed "$listing" -rwxr-xr-x usr/bin/xlbctl
  expect_listed "$listing" -rwxr-xr-x usr/bin/xlb-sim
  expect_listed "$listing" -rw-r--r-- lib/systemd/system/xlbd.service
  expect_listed "$listing" -rw-r----- etc/xlb/xlbd.yaml
  expect_listed "$listing" drwx------ var/lib/xlb
  expect_listed "$listing" -rw-r--r-- usr/share/man/man8/xlbd.8.gz
  expect_listed "$listing" -rw-r--r-- usr/share/man/man8/xlbctl.8.gz
  expect_listed "$listing" -rw-r--r-- usr/share/man/man1/xlb-sim.1.gz
  expect_listed "$listing" -rw-r--r-- usr/share/bash-completion/completions/xlbctl
  expect_listed "$listing" -rw-r--r-- usr/share/doc/xlb/copyright
  expect_listed "$listing" -rw-r--r-- usr/share/doc/xlb/changelog.gz
  expect_listed "$listing" -rw-r--r-- usr/share/doc/xlb/README.md.gz
  expect_listed "$listing" -rw-r--r-- usr/share/doc/xlb/config.md.gz
  expect_listed "$listing" -rw-r--r-- usr/share/doc/xlb/packaging.md.gz
  if grep -q 'usr/local\|sbin/xlb-decap\|xlb-decap@\|man8/xlb-decap' <<<"$listing"; then
    fail "xlb lists a /usr/local path or xlb-decap's files"
  fi

  listing=$(dpkg-deb -c "$decap")
  expect_listed "$listing" -rwxr-xr-x usr/sbin/xlb-decap
  expect_listed "$listing" -rw-r--r-- "lib/systemd/system/xlb-decap@.service"
  expect_listed "$listing" -rw-r--r-- usr/share/man/man8/xlb-decap.8.gz
  expect_listed "$listing" -rw-r--r-- usr/share/doc/xlb-decap/copyright
  if grep -q 'xlbd\|xlbctl' <<<"$listing"; then fail "xlb-decap lists the LB host's files"; fi

  local tmp
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  dpkg-deb -R "$xlb" "$tmp/xlb"
  dpkg-deb -R "$decap" "$tmp/decap"

  # conffile, and the API group the packaged agent uses
  if [ "$(cat "$tmp/xlb/DEBIAN/conffiles")" = /etc/xlb/xlbd.yaml ]; then
    ok "conffiles: /etc/xlb/xlbd.yaml"
  else
    fail "conffiles: $(tr '\n' ' ' <"$tmp/xlb/DEBIAN/conffiles"), expected /etc/xlb/xlbd.yaml"
  fi
  if grep -qE '^  group: xlb( |$)' "$tmp/xlb/etc/xlb/xlbd.yaml"; then
    ok "xlbd.yaml sets api.group: xlb"
  else
    fail "xlbd.yaml does not set api.group: xlb"
  fi
  if "$tmp/xlb/usr/sbin/xlbd" --check-config "$tmp/xlb/etc/xlb/xlbd.yaml" 2>&1 |
    grep -q 'xlbd.yaml:[0-9]*:[0-9]*:'; then
    fail "the packaged xlbd.yaml has syntax or validation errors"
  else
    ok "the packaged xlbd.yaml parses"
  fi

  # the units: the packaged paths, never /usr/local
  local unit=$tmp/xlb/lib/systemd/system/xlbd.service
  grep -q '^ExecStart=/usr/sbin/xlbd --config /etc/xlb/xlbd.yaml$' "$unit" &&
    grep -q '^ExecStartPre=/usr/sbin/xlbd --check-config /etc/xlb/xlbd.yaml$' "$unit" &&
    grep -q '^ExecReload=/usr/bin/xlbctl reload$' "$unit" && ok "xlbd.service has /usr paths" ||
    fail "xlbd.service: $(grep '^Exec' "$unit" | tr '\n' ' ')"
  unit=$tmp/decap/lib/systemd/system/xlb-decap@.service
  grep -q '^EnvironmentFile=-/etc/xlb/decap-%i.conf$' "$unit" &&
    grep -q '^ExecStart=/usr/sbin/xlb-decap --interface %i ' "$unit" &&
    ok "xlb-decap@.service reads /etc/xlb/decap-%i.conf, runs /usr/sbin/xlb-decap" ||
    fail "xlb-decap@.service: $(grep '^Exec\|^Env' "$unit" | tr '\n' ' ')"
  if grep -rq '@[A-Z_]*@\|/usr/local' "$tmp"/*/lib/systemd/system/; then
    fail "a packaged unit has an unfilled @VAR@ or /usr/local"
  fi

  # dependencies come from the binaries
  local depends
  depends=$(dpkg-deb -f "$xlb" Depends)
  for lib in libbpf libxdp libyaml-cpp libc6 passwd; do
    grep -q "$lib" <<<"$depends" && ok "xlb depends on $lib" || fail "xlb Depends lacks $lib: $depends"
  done
  depends=$(dpkg-deb -f "$decap" Depends)
  grep -q libbpf <<<"$depends" && ok "xlb-decap depends on libbpf" ||
    fail "xlb-decap Depends lacks libbpf: $depends"

  # hitless upgrades: try-restart after an upgrade, no start on install, a
  # stop only on removal
  local postinst=$tmp/xlb/DEBIAN/postinst prerm=$tmp/xlb/DEBIAN/prerm
  grep -q "deb-systemd-invoke try-restart 'xlbd.service'" "$postinst" &&
    ok "postinst: try-restart xlbd on upgrade" || fail "postinst does not try-restart xlbd"
  if grep -v '^#' "$postinst" | grep -qE "deb-systemd-invoke (\\\$_dh_action|start|restart) "; then
    fail "postinst starts or restarts xlbd unconditionally"
  fi
  if [ -e "$tmp/xlb/DEBIAN/preinst" ] && grep -q stop "$tmp/xlb/DEBIAN/preinst"; then
    fail "preinst stops xlbd (before an upgrade)"
  fi
  grep -q 'if \[ "\$1" = remove \].*DPKG_ROOT' "$prerm" && grep -q 'deb-systemd-invoke stop xlbd.service' "$prerm" &&
    ok "prerm stops xlbd on removal only" || fail "prerm does not stop xlbd on removal only"
  [ "$(grep -c 'deb-systemd-invoke stop' "$prerm")" -eq 1 ] || fail "prerm stops xlbd more than once"

  # the unit's settings reach xlb-decap through its environment
  local said
  said=$(XLB_DECAP_ADDRESSES="203.0.113.11, nonsense" "$tmp/decap/usr/sbin/xlb-decap" -i lo 2>&1) &&
    fail "xlb-decap accepted XLB_DECAP_ADDRESSES with 'nonsense'"
  grep -qF "XLB_DECAP_ADDRESSES nonsense:" <<<"$said" &&
    ok "xlb-decap reads XLB_DECAP_ADDRESSES" || fail "xlb-decap on a bad XLB_DECAP_ADDRESSES: $said"

  # the version: one string for CMake, the package and xlbd --version
  local pkg_version xlbd_version
  pkg_version=$(dpkg-deb -f "$xlb" Version)
  xlbd_version=$("$tmp/xlb/usr/sbin/xlbd" --version)
  if [ "$xlbd_version" = "xlbd $pkg_version" ] && [ "$(dpkg-deb -f "$decap" Version)" = "$pkg_version" ]; then
    ok "package version $pkg_version = '$xlbd_version'"
  else
    fail "package version $pkg_version, xlbd --version '$xlbd_version'"
  fi
  finish
}

# Warnings lintian may give, each justified in docs/packaging.md; any other
# warning, and any error, fails.
allowed_warnings=(
  "xlb: non-standard-file-perm 0640 != 0644 [etc/xlb/xlbd.yaml]"
  "xlb: non-standard-dir-perm 0700 != 0755 [var/lib/xlb/]"
)

cmd_lintian() {
  local out=$1 src=$2 report
  local debs=("$(deb_of "$out" xlb)" "$(deb_of "$out" xlb-decap)")
  # exit status 2 = tags of error severity; the report is checked below
  report=$(lintian --tag-display-limit 0 --display-level '>=warning' "${debs[@]}" 2>&1) || true
  echo "$report"
  if grep -q '^E: ' <<<"$report"; then fail "lintian reports errors"; else ok "no lintian errors"; fi
  local line
  while IFS= read -r line; do
    [ -n "$line" ] || continue
    local known=0 w
    for w in "${allowed_warnings[@]}"; do [ "$line" = "W: $w" ] && known=1; done
    if [ "$known" -eq 1 ]; then
      grep -qF "$(awk '{print $3}' <<<"$line")" "$src/docs/packaging.md" ||
        fail "warning not justified in docs/packaging.md: $line"
    else
      fail "lintian warning not listed and justified: $line"
    fi
  done < <(grep '^W: ' <<<"$report")
  finish
}

cmd_install() {
  local out=$1 xlb decap
  xlb=$(deb_of "$out" xlb)
  decap=$(deb_of "$out" xlb-decap)
  local root
  root=$(mktemp -d /tmp/xlb-package-root.XXXXXX)
  # shellcheck disable=SC2064
  trap "rm -rf '$root'" EXIT
  mkdir -p "$root"/var/lib/dpkg/{info,updates,triggers} "$root"/etc "$root"/var/log
  : >"$root/var/lib/dpkg/status"
  : >"$root/var/lib/dpkg/available"
  printf 'root:x:0:0:root:/root:/bin/sh\n' >"$root/etc/passwd"
  printf 'root:*:19000:0:99999:7:::\n' >"$root/etc/shadow"
  printf 'root:x:0:\n' >"$root/etc/group"
  printf 'root:*::\n' >"$root/etc/gshadow"
  # The root has no libc, systemd or passwd: --force-depends. The maintainer
  # scripts run here, outside the root, with DPKG_ROOT set, and act on it.
  local dpkg=(dpkg --root="$root" --log="$root/var/log/dpkg.log" --force-script-chrootless
    --force-depends --force-unsafe-io)
  local log=$root/dpkg.out
  run_dpkg() {
    if "${dpkg[@]}" "$@" >"$log" 2>&1; then return 0; fi
    cat "$log" >&2
    fail "dpkg $*"
    finish
  }

  run_dpkg -i "$xlb" "$decap"
  [ "$(dpkg-query --root="$root" -W -f='${Status}' xlb)" = "install ok installed" ] &&
    [ "$(dpkg-query --root="$root" -W -f='${Status}' xlb-decap)" = "install ok installed" ] &&
    ok "installed into $root" || fail "not installed: $(dpkg-query --root="$root" -W -f='${Package} ${Status}\n')"
  for f in usr/sbin/xlbd usr/bin/xlbctl usr/bin/xlb-sim usr/sbin/xlb-decap; do
    [ -x "$root/$f" ] || fail "/$f not installed"
  done
  grep -q '^xlb:x:[0-9]*:$' "$root/etc/group" && ok "postinst created the group xlb" ||
    fail "no group xlb in the root's /etc/group"
  local gid
  gid=$(awk -F: '$1 == "xlb" {print $3}' "$root/etc/group")
  [ -n "$gid" ] && [ "$gid" -lt 1000 ] || fail "group xlb is not a system group (gid $gid)"
  [ "$(stat -c %a "$root/var/lib/xlb")" = 700 ] || fail "/var/lib/xlb is not 0700"
  [ "$(stat -c %a "$root/etc/xlb/xlbd.yaml")" = 640 ] || fail "/etc/xlb/xlbd.yaml is not 0640"
  if [ -n "$(find "$root/etc/systemd" -name xlbd.service 2>/dev/null)" ]; then
    fail "the first install enabled xlbd.service"
  fi

  # the installed units, with their real paths, in the root; the units they
  # need (sysinit.target, ...) and the programs they run besides ours
  # (/bin/sh, /bin/kill) come from the host
  mkdir -p "$root/bin"
  cp -an /lib/systemd/system/. "$root/lib/systemd/system/"
  cp -n "$(readlink -f /bin/sh)" "$root/bin/sh"
  cp -n "$(readlink -f /bin/kill)" "$root/bin/kill"
  local verify
  for unit in xlbd.service xlb-decap@eth0.service; do
    if verify=$(systemd-analyze verify --root="$root" --man=no "$unit" 2>&1); then
      ok "systemd-analyze verify $unit"
    else
      fail "systemd-analyze verify $unit: $verify"
    fi
  done
  # the check can fail: a unit whose program is missing is refused
  mv "$root/usr/sbin/xlbd" "$root/usr/sbin/xlbd.away"
  if systemd-analyze verify --root="$root" --man=no xlbd.service >/dev/null 2>&1; then
    fail "systemd-analyze verify accepts xlbd.service without /usr/sbin/xlbd"
  fi
  mv "$root/usr/sbin/xlbd.away" "$root/usr/sbin/xlbd"

  # an upgrade (the same version again: prerm upgrade, postinst configure
  # with the old version) keeps the administrator's configuration
  printf '# edited by the administrator\n' >>"$root/etc/xlb/xlbd.yaml"
  run_dpkg --force-confold -i "$xlb" "$decap"
  grep -q 'edited by the administrator' "$root/etc/xlb/xlbd.yaml" &&
    ok "an upgrade keeps the edited conffile" || fail "an upgrade replaced the edited conffile"
  [ "$(grep -c '^xlb:' "$root/etc/group")" -eq 1 ] || fail "an upgrade added the group xlb again"

  # removal: programs gone, configuration and group stay
  run_dpkg -r xlb xlb-decap
  [ ! -e "$root/usr/sbin/xlbd" ] && [ ! -e "$root/usr/sbin/xlb-decap" ] &&
    [ ! -e "$root/lib/systemd/system/xlbd.service" ] && ok "removed" || fail "files left after removal"
  [ -f "$root/etc/xlb/xlbd.yaml" ] && grep -q '^xlb:' "$root/etc/group" &&
    ok "removal keeps the configuration and the group" ||
    fail "removal took the configuration or the group"

  # purge: says what it removes, then removes it
  mkdir -p "$root/sys/fs/bpf/xlb/eth0" "$root/var/lib/xlb" "$root/run/xlb"
  : >"$root/sys/fs/bpf/xlb/eth0/xlb_vips"
  : >"$root/var/lib/xlb/state.json"
  mkdir -p "$root/etc/systemd/system/multi-user.target.wants"
  ln -s /lib/systemd/system/xlb-decap@.service \
    "$root/etc/systemd/system/multi-user.target.wants/xlb-decap@eth0.service"
  run_dpkg --purge xlb xlb-decap
  local said
  said=$(cat "$log")
  for what in "removing the pinned maps under /sys/fs/bpf/xlb" "removing /var/lib/xlb" \
    "removing /run/xlb" "removed the group xlb" \
    "removing /etc/systemd/system/multi-user.target.wants/xlb-decap@eth0.service"; do
    grep -qF "$what" <<<"$said" && ok "purge says: $what" || fail "purge does not say '$what'"
  done
  [ ! -e "$root/sys/fs/bpf/xlb" ] && [ ! -e "$root/var/lib/xlb" ] && [ ! -e "$root/run/xlb" ] &&
    ok "purge removed the pins and the state" || fail "purge left pins or state"
  [ ! -e "$root/etc/xlb/xlbd.yaml" ] || fail "purge left /etc/xlb/xlbd.yaml"
  ! grep -q '^xlb:' "$root/etc/group" && ok "purge removed the group xlb" ||
    fail "purge left the group xlb"
  [ ! -L "$root/etc/systemd/system/multi-user.target.wants/xlb-decap@eth0.service" ] ||
    fail "purge left the enabled instance's link"
  [ -z "$(dpkg-query --root="$root" -W 2>/dev/null)" ] || fail "packages left in the root's database"
  finish
}

need() {
  local tool
  for tool in "$@"; do
    if ! command -v "$tool" >/dev/null; then
      echo "FAIL: $tool not found (scripts/install-deps.sh installs it), then run again" >&2
      exit 1
    fi
  done
}
need dpkg dpkg-deb dpkg-query
case "${1:-}" in
  build) need dpkg-buildpackage dh ;;
  lintian) need lintian ;;
  install) need systemd-analyze groupadd groupdel deb-systemd-helper ;;
esac

case "${1:-}" in
  build) cmd_build "$2" "$3" "$4" ;;
  contents) cmd_contents "$2" ;;
  lintian) cmd_lintian "$2" "$3" ;;
  install) cmd_install "$2" ;;
  *)
    echo "usage: $0 build SRC BUILD OUT | contents OUT | lintian OUT SRC | install OUT" >&2
    exit 2
    ;;
esac
