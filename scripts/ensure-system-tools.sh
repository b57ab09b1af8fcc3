#!/usr/bin/env bash
# Install the system programs the end-to-end tests drive, when they are missing:
#   fio (load generator), sysstat (iostat/sar/sadf, the reference we compare against),
#   fuse3 (the lab's emulated disk), util-linux (losetup),
#   chromium (Debian's headless browser: the HTML report is opened in it and checked),
#   prometheus (with promtool), prometheus-node-exporter, victoria-metrics (the fleet source
#   reads node_exporter's counters through their query API; the exporter's tests scrape with
#   the real programs and check the alert rules with promtool).
# As root this installs with apt-get; otherwise it says what is missing and the tests that
# need those programs skip with that reason.
set -euo pipefail

declare -A pkg_for=( [fio]=fio [iostat]=sysstat [sar]=sysstat [sadf]=sysstat
                     [fusermount3]=fuse3 [losetup]=util-linux [chromium]=chromium
                     [prometheus]=prometheus [promtool]=prometheus
                     [prometheus-node-exporter]=prometheus-node-exporter
                     [victoria-metrics]=victoria-metrics )
missing=()
for cmd in "${!pkg_for[@]}"; do
    command -v "$cmd" >/dev/null 2>&1 || missing+=("${pkg_for[$cmd]}")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "system tools: fio, sysstat, fuse3, losetup, chromium, prometheus, promtool," \
         "node_exporter, victoria-metrics present"
    exit 0
fi
mapfile -t pkgs < <(printf '%s\n' "${missing[@]}" | sort -u)
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "system tools missing: ${pkgs[*]} (not root or no apt-get: tests needing them will skip)" >&2
    exit 0
fi
echo "installing: ${pkgs[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
echo "system tools installed: ${pkgs[*]}"
