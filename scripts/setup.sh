#!/usr/bin/env bash
# The README's set-up for a fresh Debian/Ubuntu machine: installs, from the
# distribution's packages, what the tests and `inca bench` use and that is
# missing. Run as root (or with sudo); does nothing when all is present.
#
#   tshark             the wire tests check that Wireshark dissects our frames
#   fonts-dejavu-core  the text in the plots `inca report` draws
#   iperf3, iproute2, iputils-ping, ethtool
#                      the live testbed tests (real TCP through inca switch
#                      processes between network namespaces)
#   redis-server, redis-tools
#                      `inca bench`'s baseline for the RedPlane state store
#                      (redis-server + redis-benchmark on loopback)
#   valgrind           callgrind instruction counts (docs/performance.md)
#   cmake, g++, libclang-dev
#                      building HiGHS, the planner's ILP solver (C++, built
#                      from source by the highs-sys crate; bindgen needs
#                      libclang)
#
# Rust itself is not installed here: use rustup (the project is developed
# and tested with Rust 1.95).
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive

need=()
have() { command -v "$1" >/dev/null 2>&1; }
have tshark || need+=(tshark)
have iperf3 || need+=(iperf3)
have ip || need+=(iproute2)
have ping || need+=(iputils-ping)
have ethtool || need+=(ethtool)
have redis-server || need+=(redis-server)
have redis-benchmark || need+=(redis-tools)
have valgrind || need+=(valgrind)
[ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need+=(fonts-dejavu-core)
have cmake || need+=(cmake)
have g++ || need+=(g++)
ls /usr/lib/llvm-*/lib/libclang.so >/dev/null 2>&1 || need+=(libclang-dev)

if [ ${#need[@]} -eq 0 ]; then
    echo "setup: everything is installed"
    exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
    have sudo || { echo "setup: need root (or sudo) to install: ${need[*]}" >&2; exit 1; }
    sudo=(sudo)
fi
echo "setup: installing ${need[*]}"
"${sudo[@]}" apt-get update -qq
# tshark asks whether non-root users may capture; the default (no) is fine.
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
# The Debian package starts redis-server as a service on port 6379; the
# benchmark starts its own instance on a free port, so the service is left
# as the package set it up.
echo "setup: done"
