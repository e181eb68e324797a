#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Debian packages (label package; tests/package/CMakeLists.txt).
#
#   package_test.sh build    SOURCE_DIR BUILD_DIR OUT_DIR
#   package_test.sh contents OUT_DIR
#   package_test.sh lintian  OUT_DIR SOURCE_DIR
#   package_test.sh install  OUT_DIR
#   package_test.sh configure OUT_DIR
#   package_test.sh service  OUT_DIR
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
  # noautodbgsym: the -dbgsym packages (55 MB to compress, half of this
  # test's time) are left out; debhelper keeps the regular packages
  # identical with and without it, and those are what the tests read.
  DEB_BUILD_OPTIONS="noautodbgsym ${DEB_BUILD_OPTIONS:-}" JOBS=1 "$src/scripts/build-deb.sh" "$out" "$build"
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
  # postinst makes the state directory: dpkg would remove a shipped one on
  # removal when empty, and removal keeps it
  if grep -q ' \./var/lib/xlb/\?$' <<<"$listing"; then
    fail "xlb ships /var/lib/xlb (dpkg removes it on removal when it is empty)"
  else
    ok "/var/lib/xlb is not shipped (postinst makes it)"
  fi
  local xlb_listing=$listing

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
  # No usable hash_seed is shipped: the file parses, and xlbd refuses it for
  # the missing seed only; with a line from the packaged xlbctl gen-seed the
  # seed is no longer what it lacks.
  local yaml=$tmp/xlb/etc/xlb/xlbd.yaml said
  if grep -qE '^hash_seed:' "$yaml"; then
    fail "the packaged xlbd.yaml sets a hash_seed: $(grep -E '^hash_seed:' "$yaml")"
  else
    ok "the packaged xlbd.yaml sets no hash_seed"
  fi
  said=$("$tmp/xlb/usr/sbin/xlbd" --check-config "$yaml" 2>&1) &&
    fail "xlbd --check-config accepts the packaged xlbd.yaml without a seed"
  if grep -q 'xlbd.yaml:[0-9]*:[0-9]*:' <<<"$said"; then
    fail "the packaged xlbd.yaml has syntax or validation errors: $said"
  else
    ok "the packaged xlbd.yaml parses"
  fi
  grep -qF "$yaml: hash_seed is not set" <<<"$said" && grep -qF "xlbctl gen-seed" <<<"$said" &&
    ok "xlbd --check-config refuses the packaged xlbd.yaml for its missing seed, naming xlbctl gen-seed" ||
    fail "xlbd --check-config on the packaged xlbd.yaml does not report the missing seed: $said"
  cp "$yaml" "$tmp/seeded.yaml"
  "$tmp/xlb/usr/bin/xlbctl" gen-seed >>"$tmp/seeded.yaml"
  said=$("$tmp/xlb/usr/sbin/xlbd" --check-config "$tmp/seeded.yaml" 2>&1) || true
  if grep -q 'hash_seed is not set\|seeded.yaml:[0-9]*:[0-9]*:' <<<"$said"; then
    fail "the packaged xlbd.yaml with a gen-seed line: $said"
  else
    ok "the packaged xlbd.yaml with a line of xlbctl gen-seed has its seed"
  fi

  # the units: the packaged paths, never /usr/local
  local unit=$tmp/xlb/lib/systemd/system/xlbd.service
  grep -q '^ExecStart=/usr/sbin/xlbd --config /etc/xlb/xlbd.yaml$' "$unit" &&
    grep -q '^ExecStartPre=/usr/sbin/xlbd --check-config /etc/xlb/xlbd.yaml$' "$unit" &&
    grep -q '^ExecReload=/usr/bin/xlbctl reload ' "$unit" && ok "xlbd.service has /usr paths" ||
    fail "xlbd.service: $(grep '^Exec' "$unit" | tr '\n' ' ')"
  # ExecReload reaches the socket the packaged file's api.socket names
  local api_socket reload_socket
  api_socket=$(awk '/^api:/ {a = 1; next} /^[^ #]/ {a = 0} a && $1 == "socket:" {print $2}' "$yaml")
  reload_socket=$(sed -n 's/^ExecReload=.* --socket \([^ ]*\).*/\1/p' "$unit")
  if [ -n "$api_socket" ] && [ "$reload_socket" = "$api_socket" ]; then
    ok "ExecReload's xlbctl --socket $reload_socket is xlbd.yaml's api.socket"
  else
    fail "ExecReload's socket '$reload_socket' is not xlbd.yaml's api.socket '$api_socket'"
  fi
  # every Documentation= link names a man page or a path the package ships
  local doc docs=0
  for doc in $(sed -n 's/^Documentation=//p' "$unit"); do
    docs=$((docs + 1))
    case "$doc" in
      man:*)
        local page=${doc#man:} section
        section=${page##*(}
        section=${section%)}
        page=${page%(*}
        expect_listed "$xlb_listing" -rw-r--r-- "usr/share/man/man$section/$page.$section.gz"
        ;;
      file://*)
        if [ -e "$tmp/xlb${doc#file://}" ]; then
          ok "Documentation=$doc is in the package"
        else
          fail "Documentation=$doc: the package has no ${doc#file://} (a dead link)"
        fi
        ;;
      *) fail "Documentation=$doc: neither man: nor file:" ;;
    esac
  done
  [ "$docs" -ge 2 ] || fail "xlbd.service has $docs Documentation= links"
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
  [ "$(stat -c %a "$root/var/lib/xlb" 2>&1)" = 700 ] && ok "postinst made /var/lib/xlb (0700)" ||
    fail "/var/lib/xlb is missing or not 0700: $(stat -c %a "$root/var/lib/xlb" 2>&1)"
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

  # removal: programs gone, configuration, state directory (even empty) and
  # group stay
  run_dpkg -r xlb xlb-decap
  [ ! -e "$root/usr/sbin/xlbd" ] && [ ! -e "$root/usr/sbin/xlb-decap" ] &&
    [ ! -e "$root/lib/systemd/system/xlbd.service" ] && ok "removed" || fail "files left after removal"
  [ -f "$root/etc/xlb/xlbd.yaml" ] && grep -q '^xlb:' "$root/etc/group" &&
    ok "removal keeps the configuration and the group" ||
    fail "removal took the configuration or the group"
  [ -d "$root/var/lib/xlb" ] && [ -z "$(ls -A "$root/var/lib/xlb")" ] &&
    ok "removal keeps /var/lib/xlb, empty as it was" || fail "removal took the empty /var/lib/xlb"
  # reinstalling after a removal finds the directory and keeps it
  run_dpkg -i "$xlb"
  [ "$(stat -c %a "$root/var/lib/xlb")" = 700 ] || fail "reinstall changed /var/lib/xlb"
  run_dpkg -r xlb

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
    "removing /run/xlb" \
    "removing /etc/systemd/system/multi-user.target.wants/xlb-decap@eth0.service"; do
    grep -qF "$what" <<<"$said" && ok "purge says: $what" || fail "purge does not say '$what'"
  done
  [ ! -e "$root/sys/fs/bpf/xlb" ] && [ ! -e "$root/var/lib/xlb" ] && [ ! -e "$root/run/xlb" ] &&
    ok "purge removed the pins and the state" || fail "purge left pins or state"
  [ ! -e "$root/etc/xlb/xlbd.yaml" ] || fail "purge left /etc/xlb/xlbd.yaml"
  # Debian keeps system groups on purge (a file may still carry its gid)
  [ "$(grep -c '^xlb:' "$root/etc/group")" -eq 1 ] && ok "purge keeps the system group xlb" ||
    fail "purge removed the group xlb"
  if grep -q 'the group xlb' <<<"$said"; then fail "purge talks about removing the group: $said"; fi
  [ ! -L "$root/etc/systemd/system/multi-user.target.wants/xlb-decap@eth0.service" ] ||
    fail "purge left the enabled instance's link"
  [ -z "$(dpkg-query --root="$root" -W 2>/dev/null)" ] || fail "packages left in the root's database"
  finish
}

# The package build's own configuration (make deb without a reused tree),
# from the copy package_build made: debian/rules' CMake flags turn -Werror
# off (kept for development) and need neither GoogleTest nor Google
# Benchmark, which are no Build-Depends.
cmd_configure() {
  local out=$1 src
  src=$(find "$out/src" -mindepth 1 -maxdepth 1 -name 'xlb-*' -type d | head -n 1)
  [ -n "$src" ] && [ -f "$src/debian/rules" ] || {
    fail "no source copy under $out/src: did package_build pass?"
    finish
  }
  local dep
  for dep in libgtest-dev libgmock-dev libbenchmark-dev; do
    if grep -q "^ *$dep\\b" "$src/debian/control"; then
      fail "Build-Depends lists $dep, which the package build never uses"
    else
      ok "Build-Depends lacks $dep"
    fi
  done
  local flags
  flags=$(cd "$src" && make -s -n -f debian/rules override_dh_auto_configure XLB_BUILD_DIR= |
    sed -n 's/^dh_auto_configure *\(-- *\)\{0,1\}//p')
  echo "debian/rules configures with: ${flags:-(nothing)}"
  local tmp
  tmp=$(mktemp -d /tmp/xlb-package-configure.XXXXXX)
  # shellcheck disable=SC2064
  trap "rm -rf '$tmp'" RETURN
  # What is not a Build-Depends must not be looked for.
  # shellcheck disable=SC2086
  if ! cmake -S "$src" -B "$tmp" $flags -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON \
    -DCMAKE_DISABLE_FIND_PACKAGE_GMock=ON -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON \
    >"$tmp/configure.log" 2>&1; then
    cat "$tmp/configure.log" >&2
    fail "the package build's configuration needs a package that is no Build-Depends"
    finish
  fi
  ok "configured with debian/rules' flags, without GoogleTest and Google Benchmark"
  grep -q '"file": ".*userspace/front/agent/main.cpp"' "$tmp/compile_commands.json" ||
    fail "the configured tree does not compile xlbd"
  werror() { grep -rl -e '-Werror' "$tmp" --include='*.make' --include=compile_commands.json; }
  if [ -n "$(werror)" ]; then
    fail "the package build compiles with -Werror: $(werror | head -n 3 | tr '\n' ' ')"
  else
    ok "the package build compiles without -Werror"
  fi
  # the check can fail: the development default keeps -Werror
  cmake -S "$src" -B "$tmp" -DXLB_WERROR=ON >/dev/null 2>&1 || fail "reconfigure with XLB_WERROR=ON"
  [ -n "$(werror)" ] && ok "-DXLB_WERROR=ON (the default) compiles with -Werror" ||
    fail "XLB_WERROR=ON gives no -Werror: the check above proves nothing"
  finish
}

# The packaged agent started as its unit starts it, where systemd is not
# PID 1: the unit's ExecStart (paths in the extracted package) with the
# packaged configuration (api.group: xlb) given a seed by the packaged
# xlbctl gen-seed, under the unit's capabilities (setpriv: bounding,
# inheritable, ambient sets, no_new_privs), limits, umask and file-system
# sandbox (a private mount namespace: ProtectSystem=strict, ProtectHome,
# PrivateTmp, ReadWritePaths, RuntimeDirectory, StateDirectory). It runs in
# a throwaway network namespace on a veth with generic XDP, with its own pin
# directory, state directory and socket (xlbd's override flags), and must
# become ready and serve the API to a member of the group xlb (a throwaway
# user), and refuse a user outside it. A [Service] setting the test does not
# know fails it, so that the unit cannot gain a restriction the test leaves
# out.
cmd_service() {
  local out=$1 xlb
  xlb=$(deb_of "$out" xlb)
  if [ "$(id -u)" -ne 0 ]; then
    fail "package_service needs root (network namespace, XDP, bpffs, a user and a group)"
    finish
  fi
  # Globals: the EXIT trap may run after this function's locals are gone.
  # (bpffs refuses names with a dot.)
  tag=xlbpkg$$
  base=/run/xlb-package-service.$$ ns=$tag pins=/sys/fs/bpf/xlb-package-service-$$
  user=$tag made_group=0 made_lockdir=0 agent_pid='' lock_file=''
  service_cleanup() {
    set +e
    if [ -n "$agent_pid" ] && kill -0 "$agent_pid" 2>/dev/null; then
      kill -KILL "$agent_pid" 2>/dev/null || true
      wait "$agent_pid" 2>/dev/null || true
    fi
    local pid
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null
    [ ! -e "$pins" ] || rm -rf "$pins"
    id "$user" >/dev/null 2>&1 && userdel "$user"
    [ "$made_group" -eq 0 ] || groupdel xlb
    rm -rf "$base"
    # the agent's interface lock (the kernel released it with the agent)
    [ -z "$lock_file" ] || rm -f "$lock_file"
    [ "$made_lockdir" -eq 0 ] || rmdir /run/xlb 2>/dev/null
  }
  trap service_cleanup EXIT
  mkdir -p "$base"
  chmod 0755 "$base"
  dpkg-deb -x "$xlb" "$base/root"
  local unit=$base/root/lib/systemd/system/xlbd.service

  # The [Service] settings this test applies or knows to be irrelevant here.
  local known=" Type NotifyAccess ExecStartPre ExecStart ExecReload Restart RestartSec WatchdogSec"
  known+=" KillMode TimeoutStopSec CapabilityBoundingSet AmbientCapabilities LimitMEMLOCK"
  known+=" LimitNOFILE NoNewPrivileges ProtectSystem ProtectHome PrivateTmp ReadWritePaths"
  known+=" RuntimeDirectory RuntimeDirectoryMode RuntimeDirectoryPreserve StateDirectory"
  known+=" StateDirectoryMode UMask "
  local key
  for key in $(awk '/^\[/ {s = ($0 == "[Service]")} s && /^[A-Za-z]+=/ {sub(/=.*/, ""); print}' "$unit"); do
    [[ $known == *" $key "* ]] || fail "xlbd.service sets $key=, which package_service does not apply"
  done
  val() { sed -n "s/^$1=//p" "$unit" | tail -n 1; }
  local exec_start bounding ambient nnp umask_value memlock nofile protect_system protect_home
  local private_tmp rw_paths runtime_dir runtime_mode state_dir state_mode
  exec_start=$(val ExecStart)
  bounding=$(val CapabilityBoundingSet)
  ambient=$(val AmbientCapabilities)
  nnp=$(val NoNewPrivileges)
  umask_value=$(val UMask)
  memlock=$(val LimitMEMLOCK)
  nofile=$(val LimitNOFILE)
  protect_system=$(val ProtectSystem)
  protect_home=$(val ProtectHome)
  private_tmp=$(val PrivateTmp)
  rw_paths=$(val ReadWritePaths)
  runtime_dir=$(val RuntimeDirectory)
  runtime_mode=$(val RuntimeDirectoryMode)
  state_dir=$(val StateDirectory)
  state_mode=$(val StateDirectoryMode)
  echo "unit: ExecStart=$exec_start"
  echo "unit: CapabilityBoundingSet=$bounding"
  echo "unit: AmbientCapabilities=$ambient"

  # Capabilities in setpriv's form; what this machine cannot grant (not in
  # its own bounding set) is left out, and said.
  local machine
  machine=$(capsh --decode="$(awk '/^CapBnd:/ {print $2}' /proc/self/status)")
  machine=",${machine#*=},"
  caps_for() {  # caps_for "CAP_A CAP_B": -all,+a,+b without what the machine lacks
    local list=-all cap name
    for cap in $1; do
      name=$(tr '[:upper:]' '[:lower:]' <<<"$cap")
      if [[ $machine == *",$name,"* ]]; then
        list+=",+${name#cap_}"
      else
        echo "note: $cap (in the unit) is not in this machine's capability bounding set" \
          "(CapBnd $(awk '/^CapBnd:/ {print $2}' /proc/self/status)): left out here" >&2
      fi
    done
    echo "$list"
  }
  local bounding_caps inh_caps
  bounding_caps=$(caps_for "$bounding")
  inh_caps=$(caps_for "$ambient" 2>/dev/null)
  local setpriv=(setpriv "--inh-caps=$inh_caps" "--ambient-caps=$inh_caps" "--bounding-set=$bounding_caps")
  [ "$nnp" = yes ] && setpriv+=(--no-new-privs)

  # The group the packaged configuration names, and a member of it.
  local group
  group=$(awk '/^api:/ {a = 1; next} /^[^ #]/ {a = 0} a && $1 == "group:" {print $2}' \
    "$base/root/etc/xlb/xlbd.yaml")
  [ "$group" = xlb ] || fail "the packaged xlbd.yaml's api.group is '$group', expected xlb"
  if ! getent group xlb >/dev/null; then
    groupadd --system xlb
    made_group=1
  fi
  useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \
    --groups xlb "$user"

  # The network: a veth pair in a throwaway namespace, the packaged next hop
  # reachable on it.
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip -n "$ns" link add xlb0 type veth peer name xlb1
  ip -n "$ns" link set xlb0 up
  ip -n "$ns" link set xlb1 up
  lock_file=/run/xlb/xlbd-netns$(stat -L -c %i "/run/netns/$ns")-if$(ip -n "$ns" -o link show xlb1 | cut -d: -f1).lock
  local next_hop peer_mac
  next_hop=$(sed -n 's/^next_hop: {address: \([0-9.]*\)}.*/\1/p' "$base/root/etc/xlb/xlbd.yaml")
  peer_mac=$(ip -n "$ns" -o link show xlb0 | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
  if [ -n "$next_hop" ]; then
    ip -n "$ns" addr add "${next_hop%.*}.254/24" dev xlb1
    ip -n "$ns" neigh replace "$next_hop" lladdr "$peer_mac" dev xlb1 nud permanent
  fi

  # The directories systemd would make: RuntimeDirectory= (also where the
  # agent's interface lock lives) and StateDirectory=, with the unit's modes.
  local run=$base/run state=$base/state
  install -d -m "$runtime_mode" "$run"
  install -d -m "$state_mode" "$state"
  if [ ! -d "/run/$runtime_dir" ]; then
    install -d -m "$runtime_mode" "/run/$runtime_dir"
    made_lockdir=1
  fi
  echo "unit: RuntimeDirectory=$runtime_dir StateDirectory=$state_dir; here $run and $state" \
    "(and /run/$runtime_dir, where the agent's interface lock lives)"
  local config=$base/xlbd.yaml
  cp "$base/root/etc/xlb/xlbd.yaml" "$config"
  "$base/root/usr/bin/xlbctl" gen-seed >>"$config"

  # The unit's ExecStart, its programs and file taken from the package, plus
  # the overrides that keep this agent apart from any other.
  local -a cmd
  read -r -a cmd <<<"$exec_start"
  local i
  for i in "${!cmd[@]}"; do
    case "${cmd[i]}" in
      /usr/*) cmd[i]=$base/root${cmd[i]} ;;
      /etc/xlb/xlbd.yaml) cmd[i]=$config ;;
    esac
  done
  local socket=$run/xlbd.sock
  cmd+=(--interface xlb1 --xdp-mode generic --pin-dir "$pins" --state-file "$state/state.json"
    --api-socket "$socket")

  # The file-system sandbox, made in the agent's own mount namespace, then
  # the limits, the umask and the capabilities.
  local sandbox=$base/sandbox.sh
  cat >"$sandbox" <<'SANDBOX'
set -eu
protect_system=$1 protect_home=$2 private_tmp=$3 memlock=$4 nofile=$5 umask_value=$6
shift 6
writable=()
while [ "$1" != -- ]; do writable+=("$1"); shift; done
shift
for p in "${writable[@]}"; do mount --bind "$p" "$p"; done
if [ "$protect_system" = strict ]; then
  # every mount read-only but the API file systems and the writable paths
  while read -r mp; do
    case "$mp" in /proc | /proc/* | /sys | /sys/* | /dev | /dev/*) continue ;; esac
    skip=0
    for p in "${writable[@]}"; do [ "$mp" = "$p" ] && skip=1; done
    [ "$skip" -eq 1 ] && continue
    mount -o remount,bind,ro "$mp" 2>/dev/null || [ "$mp" != / ] ||
      { echo "sandbox: cannot make / read-only" >&2; exit 1; }
  done < <(awk '{print $5}' /proc/self/mountinfo | sort -u)
elif [ -n "$protect_system" ] && [ "$protect_system" != no ]; then
  echo "sandbox: ProtectSystem=$protect_system is not emulated" >&2
  exit 1
fi
if [ "$protect_home" = yes ]; then
  for d in /home /root /run/user; do
    [ -d "$d" ] && mount -t tmpfs -o mode=000 tmpfs "$d"
  done
fi
if [ "$private_tmp" = yes ]; then
  mount -t tmpfs -o mode=1777 tmpfs /tmp
  mount -t tmpfs -o mode=1777 tmpfs /var/tmp
fi
limit() {  # limit FLAG VALUE: at most what this machine allows without CAP_SYS_RESOURCE
  local want=$2 hard
  [ "$want" = infinity ] && want=unlimited
  hard=$(ulimit -H "$1")
  if ulimit -S -H "$1" "$want" 2>/dev/null; then return; fi
  echo "note: the unit's limit $1 $2 is above this machine's hard limit $hard (raising it" \
    "needs CAP_SYS_RESOURCE): left at $hard" >&2
  ulimit -S "$1" "$hard"
}
[ -z "$memlock" ] || limit -l "$memlock"
[ -z "$nofile" ] || limit -n "$nofile"
umask "$umask_value"
exec "$@"
SANDBOX
  local -a writable=("$run" "$state" "/run/$runtime_dir")
  local p
  for p in $rw_paths; do writable+=("$p"); done
  # The sandbox does what it says: seen from inside, with the agent's
  # capabilities, /usr is read-only, the state directory writable, the
  # host's /tmp hidden, and the effective set is the unit's.
  local marker
  marker=$(mktemp /tmp/xlb-package-service.XXXXXX)
  local probe
  # shellcheck disable=SC2016
  probe=$(nsenter --net="/run/netns/$ns" unshare --mount --propagation private \
    bash "$sandbox" "$protect_system" "$protect_home" "$private_tmp" "$memlock" "$nofile" \
    "${umask_value:-0022}" "${writable[@]}" -- "${setpriv[@]}" -- sh -c '
      touch /usr/xlb-sandbox-probe 2>/dev/null && echo "/usr writable"
      touch "$1/probe" && echo "state writable" && rm -f "$1/probe"
      [ -e "$2" ] && echo "host /tmp visible"
      echo "umask $(umask)"
      grep "^CapEff:" /proc/self/status' sh "$state" "$marker" 2>/dev/null) || true
  rm -f "$marker" /usr/xlb-sandbox-probe
  local want_eff
  want_eff=$(capsh --decode="$(setpriv "--bounding-set=$bounding_caps" -- \
    awk '/^CapBnd:/ {print $2}' /proc/self/status)")
  if grep -q '^state writable$' <<<"$probe" && ! grep -q 'usr writable\|host /tmp' <<<"$probe" &&
    grep -q "^umask 0*${umask_value#0}$" <<<"$probe" &&
    [ "$(capsh --decode="$(awk '/^CapEff:/ {print $2}' <<<"$probe")")" = "$want_eff" ]; then
    ok "inside the sandbox: /usr read-only, state writable, /tmp private, umask $umask_value," \
      "capabilities ${want_eff#*=}"
  else
    fail "the sandbox is not the unit's: $probe (expected effective ${want_eff#*=})"
  fi

  local log=$base/xlbd.log
  echo "starting: ${setpriv[*]} ${cmd[*]}"
  nsenter --net="/run/netns/$ns" unshare --mount --propagation private \
    bash "$sandbox" "$protect_system" "$protect_home" "$private_tmp" "$memlock" "$nofile" \
    "${umask_value:-0022}" "${writable[@]}" -- "${setpriv[@]}" -- "${cmd[@]}" >"$log" 2>&1 &
  agent_pid=$!

  # Ready: the API answers and says so.
  local xlbctl=$base/root/usr/bin/xlbctl ready=0 deadline=$((SECONDS + 30)) answer
  while [ "$SECONDS" -lt "$deadline" ]; do
    if ! kill -0 "$agent_pid" 2>/dev/null; then
      wait "$agent_pid" 2>/dev/null && status=0 || status=$?
      cat "$log" >&2
      fail "xlbd under the unit's settings exited ($status) before it was ready (its log above)"
      finish
    fi
    answer=$("$xlbctl" --socket "$socket" --timeout 1 status --json 2>/dev/null || true)
    if grep -q '"ready": *true' <<<"$answer"; then
      ready=1
      break
    fi
    sleep 0.2
  done
  if [ "$ready" -ne 1 ]; then
    cat "$log" >&2
    fail "xlbd under the unit's settings not ready within 30 s (last answer: $answer)"
    finish
  fi
  ok "xlbd started under the unit's capabilities and sandbox, and is ready"
  grep '^note:' "$log" || true
  grep -q 'hash_seed' <<<"$answer" || fail "status lacks hash_seed: $answer"

  # the socket: mode 0660, group xlb
  [ "$(stat -c '%a %G' "$socket")" = "660 xlb" ] && ok "the API socket is 0660, group xlb" ||
    fail "the API socket is $(stat -c '%a %G' "$socket"), expected 660 xlb"
  # a member of the group uses the API; the same user outside it cannot
  local said
  if said=$(setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups -- \
    "$xlbctl" --socket "$socket" vip list 2>&1); then
    ok "a member of the group xlb ($user) uses the API: $(wc -l <<<"$said") lines of vip list"
  else
    fail "a member of the group xlb cannot use the API: $said"
  fi
  if said=$(setpriv --reuid="$user" --regid="$(id -g "$user")" --clear-groups -- \
    "$xlbctl" --socket "$socket" vip list 2>&1); then
    fail "a user outside the group xlb used the API: $said"
  else
    grep -qi 'permission denied' <<<"$said" && ok "a user outside the group xlb is refused" ||
      fail "a user outside the group xlb: $said"
  fi

  # ExecReload, with the test's socket: the agent re-reads the file
  local reload
  read -r -a reload <<<"$(val ExecReload)"
  for i in "${!reload[@]}"; do
    case "${reload[i]}" in
      /usr/*) reload[i]=$base/root${reload[i]} ;;
      /run/xlb/xlbd.sock) reload[i]=$socket ;;
    esac
  done
  said=$("${reload[@]}" 2>&1) && ok "ExecReload (${reload[*]}) reloads: $(head -n 1 <<<"$said")" ||
    fail "ExecReload ${reload[*]}: $said"

  kill -TERM "$agent_pid"
  local status=0
  wait "$agent_pid" || status=$?
  agent_pid=
  [ "$status" -eq 0 ] && ok "xlbd stopped on SIGTERM (exit 0)" || {
    cat "$log" >&2
    fail "xlbd exited $status on SIGTERM"
  }
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
  configure) need cmake make ;;
  service) need ip nsenter unshare setpriv capsh useradd userdel groupadd ;;
esac

case "${1:-}" in
  build) cmd_build "$2" "$3" "$4" ;;
  contents) cmd_contents "$2" ;;
  lintian) cmd_lintian "$2" "$3" ;;
  install) cmd_install "$2" ;;
  configure) cmd_configure "$2" ;;
  service) cmd_service "$2" ;;
  *)
    echo "usage: $0 build SRC BUILD OUT | contents OUT | lintian OUT SRC | install OUT |" \
      "configure OUT | service OUT" >&2
    exit 2
    ;;
esac
