#!/bin/sh
# §8 item 9 — ASIC resources ([TH] Table 5.2): `inca check` of each app with
# and without RedPlane at 100K flows on the tofino profile, and the extra
# use RedPlane adds per resource category (used blocks / units). The
# non-FT apps are inca-apps' own (e.g. the plain NAT keys its two tables by
# 13-byte 5-tuples, RedPlane's NAT by 6-byte endpoints), so "extra" can be
# negative in a category.
#
#   sh experiments/redplane/asic-resources.sh [INCA]     (INCA: the inca binary,
#                                                          default: cargo run --release -p inca --)
# Prints a CSV: app,resource,without,with,extra.
set -eu
INCA=${1:-"cargo run -q --release -p inca --"}
used() {
    # `inca check` prints "resource  used  available  %": keep name,used.
    $INCA check "$@" | awk '/^resource +used/ {on=1; next} on && NF==0 {exit}
        on { n=NF; name=$1; for (i=2;i<=n-3;i++) name=name" "$i; gsub(",","",$(n-2)); print name "," $(n-2) }'
}
pair() {
    app=$1; base=$2; rp=$3; flows=${4:-100000}
    used $base --set flows=$flows > /tmp/inca-res-base.$$
    used $rp --set slots=100000 > /tmp/inca-res-rp.$$
    join -t, /tmp/inca-res-base.$$ /tmp/inca-res-rp.$$ 2>/dev/null |
        awk -F, -v app="$app" '{ print app "," $1 "," $2 "," $3 "," $3-$2 }'
    rm -f /tmp/inca-res-base.$$ /tmp/inca-res-rp.$$
}
echo "app,resource,without,with,extra"
pair nat nat redplane_nat
pair firewall firewall redplane_firewall
pair lb lb redplane_lb
pair epc epc redplane_epc
# flow_counter indexes by hash bits: 131,072 entries (the power of two above).
pair counter flow_counter redplane_sync_counter 131072
pair kv kvstore redplane_kv
