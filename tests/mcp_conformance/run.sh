#!/usr/bin/env bash
# MCP conformance harness for the toolscout gateway.
#
# usage: run.sh TOOLSCOUT_EXECUTABLE [OUTDIR]
#
# Runs the official MCP conformance suite (@modelcontextprotocol/conformance 0.1.16,
# `server --suite all`) against the suite's own reference server (everything-server.ts)
#   1. alone,
#   2. fronted by `toolscout mcp serve --transport http --mode "$MODE"` (bearer token added by authproxy.mjs),
#   3. fronted by `toolscout mcp serve --mode "$MODE"` over stdio, bridged to HTTP by supergateway --stateful.
# Prints a per-scenario table and, as the last line:
#   conformance: alone A/T, gateway-http H/T, gateway-stdio S/T
# Exit 0 only if H == A and S == A (and T > 0).
# Everything listens and connects on 127.0.0.1/localhost only.
# Env: KEEP_WORK=1 keeps the temp dir; CONF_TIMEOUT (s, per conformance run, default 900);
#      MODE=direct|dynamic (the gateway's listing mode, default direct);
#      MODES="direct dynamic": steps 2 and 3 for each mode, the modes side by side, after one
#      install and one baseline; a table per mode in OUTDIR/table-MODE.txt (exit 0 only if
#      every mode passes what the reference server passes alone);
#      SG_IDLE_MS (default 30000): the stdio bridge closes a session (and its gateway process)
#      that has had no request open for that long;
#      STDIO_PYTHON=PYTHON: a Python that imports toolscout (the one TOOLSCOUT_EXECUTABLE runs):
#      every stdio session's gateway is then forked from one process of it that has imported
#      the gateway (tests/forkserver.py), not started cold; each is still a process of its own,
#      `python -m toolscout mcp serve ...` on the session's pipes (unset: TOOLSCOUT_EXECUTABLE);
#      CONF_CACHE=DIR: keep the installs (Node 22 when the system's is older, the reference
#      server's deps, the conformance CLI and supergateway) in DIR, under a key made of what
#      is installed, and reuse them on later runs (without it they go in the temp dir).
# The baseline (1) runs beside the gateway runs (2, 3), and each mode's HTTP and stdio runs
# side by side: every run has its own client, and the reference server serves them all.
set -u

usage() { echo "usage: $0 TOOLSCOUT_EXECUTABLE [OUTDIR]" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TS=$1
if [[ $TS == */* ]]; then TS="$(cd "$(dirname "$TS")" && pwd)/$(basename "$TS")"; else TS=$(command -v "$TS" || true); fi
[ -n "$TS" ] && [ -x "$TS" ] || { echo "toolscout executable not found: $1" >&2; exit 2; }

OUT=${2:-conformance-out}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd) || exit 2
mkdir -p "$OUT/logs" "$OUT/results"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/mcp-conformance.XXXXXX") || exit 2
CONF_TIMEOUT=${CONF_TIMEOUT:-900}
SG_IDLE_MS=${SG_IDLE_MS:-30000}   # supergateway closes a stdio session idle this long (ms)
STDIO_DB=${STDIO_DB:-stored}      # the stdio gateways' catalog: stored (indexed once) or memory (each indexes)
CONF_JOBS=${CONF_JOBS:-1}         # stdio: scenarios run at once (1: the suite's own run, in order)
STDIO_PYTHON=${STDIO_PYTHON:-}    # stdio: fork each session's gateway from one process of this Python
MODE=${MODE:-direct}   # the gateway's listing mode: direct or dynamic
MODES=${MODES:-$MODE}  # several modes (MODES="direct dynamic"): one install, one baseline
read -r -a MODE_LIST <<<"$MODES"
for m in "${MODE_LIST[@]}"; do [[ $m == direct || $m == dynamic ]] || { echo "unknown mode: $m" >&2; exit 2; }; done
[ "${#MODE_LIST[@]}" -gt 0 ] || usage
JWT_KEY="mcp-conformance-test-secret-not-for-production-use"   # fixed test secret (>= 32 bytes)
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1}
export NO_PROXY="127.0.0.1,localhost" no_proxy="127.0.0.1,localhost"
START=$(date +%s)

PGIDS=()
cleanup() {
  local p
  for p in "${PGIDS[@]}"; do kill -TERM -- "-$p" 2>/dev/null; done
  sleep 1
  for p in "${PGIDS[@]}"; do kill -KILL -- "-$p" 2>/dev/null; done
  if [ "${KEEP_WORK:-0}" = 1 ]; then echo "work dir kept: $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
die() { log "ERROR: $*"; exit 3; }

# start CMD... in its own process group (killed by cleanup); sets LAST_PID
start_bg() { local logf=$1; shift; setsid "$@" >"$logf" 2>&1 & LAST_PID=$!; PGIDS+=("$LAST_PID"); }
# run CMD... with a timeout, interruptibly; returns its exit status
run_step() {
  local secs=$1 logf=$2; shift 2
  setsid timeout "$secs" "$@" >"$logf" 2>&1 &
  local p=$!; PGIDS+=("$p"); wait "$p"
}
stop_bg() { kill -TERM -- "-$1" 2>/dev/null; sleep 0.5; kill -KILL -- "-$1" 2>/dev/null; wait "$1" 2>/dev/null; return 0; }
free_port() { node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
wait_port() {  # PORT SECONDS PID
  local i
  for ((i = 0; i < $2 * 4; i++)); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    kill -0 "$3" 2>/dev/null || return 1
    sleep 0.25
  done
  return 1
}

# ---- 1. where the installs go -------------------------------------------------------------------
TOOL_PKGS=(@modelcontextprotocol/conformance@0.1.16 supergateway@4.0.0)
if [ -n "${CONF_CACHE:-}" ]; then
  # one directory per set of installs: the reference server's package files and the tools
  KEY=$( { cat "$HERE/package.json" "$HERE/package-lock.json" 2>/dev/null; echo "${TOOL_PKGS[*]} node@22"; } \
    | sha256sum | cut -c1-16)
  BASE="$CONF_CACHE/$KEY"
  mkdir -p "$BASE" || die "cannot create $BASE"
  # another run installing into the same directory: wait for it (released after step 3)
  exec 9>"$BASE/.lock" && flock 9 || die "cannot lock $BASE/.lock"
  log "installs kept in $BASE"
else
  BASE="$WORK"
fi
# run INSTALL_STEP NAME CMD...: unless BASE has it complete from an earlier run
install_step() {
  local name=$1; shift
  [ -f "$BASE/.$name.done" ] && return 0
  "$@" && touch "$BASE/.$name.done"
}

# ---- 2. Node >= 22 ---------------------------------------------------------------------------
node_ok() { command -v node >/dev/null && node -e 'process.exit(+process.versions.node.split(".")[0]>=22?0:1)' 2>/dev/null; }
command -v npm >/dev/null || die "npm is required"
if ! node_ok; then
  log "Node >= 22 not found (have: $(node --version 2>/dev/null || echo none)); node@22 from npm"
  mkdir -p "$BASE/node22"
  install_step node22 run_step 600 "$OUT/logs/npm-node22.log" npm install --prefix "$BASE/node22" --no-audit --no-fund node@22 \
    || die "npm install node@22 failed (see $OUT/logs/npm-node22.log)"
  export PATH="$BASE/node22/node_modules/node/bin:$PATH"
  node_ok || die "node@22 install did not provide Node >= 22"
fi
log "node $(node --version)"

# ---- 3. npm installs ---------------------------------------------------------------------------
SRV="$BASE/server"; TOOLS="$BASE/tools"
mkdir -p "$SRV" "$TOOLS"
cp "$HERE/package.json" "$SRV/"
[ -f "$HERE/package-lock.json" ] && cp "$HERE/package-lock.json" "$SRV/"
log "npm install: reference server deps"
if [ -f "$SRV/package-lock.json" ]; then NPMCMD=(npm ci); else NPMCMD=(npm install); fi
cd "$SRV" || die "cd $SRV"
install_step server run_step 600 "$OUT/logs/npm-server.log" "${NPMCMD[@]}" --no-audit --no-fund \
  || die "npm install of the reference server failed (see $OUT/logs/npm-server.log)"
log "npm install: ${TOOL_PKGS[*]}"
echo '{"name":"mcp-conformance-tools","private":true}' >"$TOOLS/package.json"
cd "$TOOLS" || die "cd $TOOLS"
install_step tools run_step 600 "$OUT/logs/npm-tools.log" npm install --no-audit --no-fund "${TOOL_PKGS[@]}" \
  || die "npm install of conformance/supergateway failed (see $OUT/logs/npm-tools.log)"
CONF_JS="$TOOLS/node_modules/@modelcontextprotocol/conformance/dist/index.js"
SG_JS="$TOOLS/node_modules/supergateway/dist/index.js"
[ -f "$CONF_JS" ] && [ -f "$SG_JS" ] || die "conformance CLI or supergateway missing after install"
exec 9>&-  # the installs are done: another run may use (or make) them
# the reference server runs from this run's directory, on the installed modules
mkdir -p "$WORK/srv" && cp "$HERE/everything-server.ts" "$HERE/package.json" "$WORK/srv/" \
  && ln -s "$SRV/node_modules" "$WORK/srv/node_modules" || die "cannot set up $WORK/srv"

# Preload that makes node servers started without a host bind 127.0.0.1 instead of all interfaces
# (the reference server and supergateway call app.listen(port)).
cat >"$WORK/bindlocal.mjs" <<'EOF'
import net from 'node:net';
const orig = net.Server.prototype.listen;
net.Server.prototype.listen = function (...a) {
  if ((typeof a[0] === 'number' || (typeof a[0] === 'string' && /^\d+$/.test(a[0]))) && typeof a[1] !== 'string') a.splice(1, 0, '127.0.0.1');
  return orig.apply(this, a);
};
EOF
BINDLOCAL="--import=file://$WORK/bindlocal.mjs"

# ---- 4. reference server -------------------------------------------------------------------------
# the fork server of the stdio sessions' gateways (STDIO_PYTHON), in this run's directory: its
# imports run while the reference server starts
FORK_SOCK="$WORK/forkserver.sock"
if [ -n "$STDIO_PYTHON" ]; then
  log "starting the stdio gateways' fork server ($STDIO_PYTHON)"
  start_bg "$OUT/logs/forkserver.log" "$STDIO_PYTHON" "$HERE/../forkserver.py" serve "$FORK_SOCK" </dev/null
  FORK_PID=$LAST_PID
fi
P_SRV=$(free_port)
log "starting reference server on 127.0.0.1:$P_SRV"
cd "$WORK/srv" || die "cd $WORK/srv"
start_bg "$OUT/logs/reference-server.log" env PORT="$P_SRV" NODE_OPTIONS="$BINDLOCAL" node_modules/.bin/tsx everything-server.ts
SRV_PID=$LAST_PID
cd "$WORK" || die "cd $WORK"
wait_port "$P_SRV" 90 "$SRV_PID" || die "reference server did not come up (see $OUT/logs/reference-server.log)"

run_conf() {  # LABEL URL
  log "conformance: $1 ($2)"
  rm -rf "$OUT/results/$1"; mkdir -p "$OUT/results/$1"
  run_step "$CONF_TIMEOUT" "$OUT/logs/conformance-$1.txt" node "$CONF_JS" server --url "$2" --suite all -o "$OUT/results/$1"
  echo "rc=$?" >>"$OUT/logs/conformance-$1.txt"
}

# LABEL URL: every scenario of the suite in a conformance run of its own, CONF_JOBS at once
# (each is a session of its own: over stdio, a gateway process of its own); the log ends with
# the summary lines the suite's own run prints ("✓ NAME: P passed, F failed")
run_conf_jobs() {
  local label=$1 url=$2 s f line pids=() n
  log "conformance: $label ($url), $CONF_JOBS scenarios at once"
  rm -rf "$OUT/results/$label" "$OUT/logs/$label"; mkdir -p "$OUT/results/$label" "$OUT/logs/$label"
  for s in "${SCENARIOS[@]}"; do
    while n=0; for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && n=$((n + 1)); done; [ "$n" -ge "$CONF_JOBS" ]; do
      wait -n "${pids[@]}" 2>/dev/null || sleep 0.2
    done
    setsid timeout "$CONF_TIMEOUT" node "$CONF_JS" server --url "$url" --scenario "$s" -o "$OUT/results/$label" \
      >"$OUT/logs/$label/$s.txt" 2>&1 &
    pids+=("$!"); PGIDS+=("$!")
  done
  for p in "${pids[@]}"; do wait "$p"; done
  {
    for s in "${SCENARIOS[@]}"; do
      f="$OUT/logs/$label/$s.txt"; cat "$f"
    done
    echo "=== SUMMARY ==="
    for s in "${SCENARIOS[@]}"; do
      line=$(grep -m1 -E '^Passed: [0-9]+/[0-9]+, [0-9]+ failed' "$OUT/logs/$label/$s.txt")
      if [[ $line =~ ^Passed:\ ([0-9]+)/[0-9]+,\ ([0-9]+)\ failed ]] && [ "${BASH_REMATCH[2]}" = 0 ]; then
        echo "✓ $s: ${BASH_REMATCH[1]} passed, 0 failed"
      elif [[ $line =~ ^Passed:\ ([0-9]+)/[0-9]+,\ ([0-9]+)\ failed ]]; then
        echo "✗ $s: ${BASH_REMATCH[1]} passed, ${BASH_REMATCH[2]} failed"
      else
        echo "✗ $s: 0 passed, 1 failed (no result: see $OUT/logs/$label/$s.txt)"
      fi
    done
  } >"$OUT/logs/conformance-$label.txt"
}

# run each command in a subshell of its own, side by side; a subshell stops what it started
side_by_side() {  # 'CMD ARGS' ...
  local c pids=()
  for c in "$@"; do
    (
      PGIDS=()
      trap 'for p in "${PGIDS[@]}"; do kill -KILL -- "-$p" 2>/dev/null; done' EXIT
      trap 'exit 130' INT TERM HUP
      eval "$c"
    ) &
    pids+=("$!")
  done
  for c in "${pids[@]}"; do wait "$c"; done
}

# gateway config (upstream = reference server over HTTP)
CFG="$WORK/gateway.json"
cat >"$CFG" <<EOF
{
  "mcpServers": {"conf": {"url": "http://127.0.0.1:$P_SRV/mcp"}},
  "toolscout": {
    "db": ":memory:",
    "principal": {"subject": "tester", "scopes": ["mcp:conf"]},
    "jwt_key": "$JWT_KEY",
    "timeout_s": 60,
    "connect_timeout_s": 60
  }
}
EOF
TOKEN=$(timeout 60 "$TS" token issue --sub tester --scopes mcp:conf --ttl 2h --key "$JWT_KEY" 2>>"$OUT/logs/token.log" | tail -n 1)
if [ -z "$TOKEN" ]; then
  log "WARNING: token issue failed (see $OUT/logs/token.log); gateway-http will fail"
fi

# steps 2 and 3 in MODE; labels and logs carry SUFFIX ("" for a single mode, "-MODE" otherwise)
gateway_http() {  # MODE SUFFIX PORT_GATEWAY PORT_PROXY
  local mode=$1 sfx=$2 P_GW=$3 P_PX=$4
  local GW_PID PX_PID
  # (2) toolscout over HTTP + authproxy
  log "starting toolscout http gateway ($mode) on 127.0.0.1:$P_GW"
  start_bg "$OUT/logs/gateway-http$sfx.log" "$TS" mcp serve --config "$CFG" --transport http --host 127.0.0.1 --port "$P_GW" --mode "$mode"
  GW_PID=$LAST_PID
  start_bg "$OUT/logs/authproxy$sfx.log" env TOKEN="$TOKEN" node "$HERE/authproxy.mjs" "$P_PX" "$P_GW"
  PX_PID=$LAST_PID
  if wait_port "$P_GW" 120 "$GW_PID" && wait_port "$P_PX" 30 "$PX_PID"; then
    run_conf "gateway-http$sfx" "http://localhost:$P_PX/mcp"
  else
    log "WARNING: http gateway or authproxy did not come up (see $OUT/logs/gateway-http$sfx.log)"
  fi
  stop_bg "$PX_PID"; stop_bg "$GW_PID"
}

# one stdio gateway indexes the upstream into its config's catalog file, and exits
prime_catalog() {  # CONFIG MODE LOG
  local i
  : >"$3"
  { for ((i = 0; i < 900; i++)); do grep -q "indexed 'conf'" "$3" && break; sleep 0.2; done; } \
    | timeout 200 "$TS" mcp serve --config "$1" --mode "$2" >/dev/null 2>>"$3"
  grep -q "indexed 'conf'" "$3"
}

# the stored catalog of every mode's stdio gateways, indexed once (the catalog does not depend
# on the listing mode): the first mode to need it indexes it, the others wait for it
prime_once() {  # MODE
  (
    flock 8 || exit 1
    [ -f "$WORK/catalog-primed.done" ] && exit 0
    sed "s|\"db\": \":memory:\"|\"db\": \"$WORK/catalog-primed.db\"|" "$CFG" >"$WORK/gateway-prime.json"
    log "stdio: indexing the stored catalog (a gateway in $1 mode)"
    prime_catalog "$WORK/gateway-prime.json" "$1" "$OUT/logs/gateway-stdio-prime.log" \
      && touch "$WORK/catalog-primed.done"
  ) 8>"$WORK/catalog-primed.lock"
}

gateway_stdio() {  # MODE SUFFIX PORT_BRIDGE
  local mode=$1 sfx=$2 P_SG=$3
  local SG_PID cfg=$CFG f
  # (3) toolscout over stdio, bridged by supergateway --stateful
  if [ "$STDIO_DB" = stored ]; then
    # every session's gateway starts from a stored catalog, as a desktop client's does after
    # its first start: one gateway indexes it first, and each mode's gateways get a copy
    cfg="$WORK/gateway-stdio$sfx.json"
    sed "s|\"db\": \":memory:\"|\"db\": \"$WORK/catalog-stdio$sfx.db\"|" "$CFG" >"$cfg"
    if prime_once "$mode"; then
      # the catalog file with its WAL and its dense index's files (not SQLite's shared memory)
      for f in "$WORK"/catalog-primed.db*; do
        [[ $f == *-shm ]] || cp "$f" "$WORK/catalog-stdio$sfx.db${f#"$WORK"/catalog-primed.db}"
      done
    else
      log "WARNING: the stored catalog was not indexed (see $OUT/logs/gateway-stdio-prime.log)"
    fi
  fi
  if [ -n "$STDIO_PYTHON" ]; then
    cat >"$WORK/gateway-stdio$sfx.sh" <<EOF
#!/usr/bin/env bash
exec "$STDIO_PYTHON" -I -S "$HERE/../forkserver.py" connect "$FORK_SOCK" mcp serve --config "$cfg" --mode "$mode" 2>>"$OUT/logs/gateway-stdio-stderr$sfx.log"
EOF
  else
    cat >"$WORK/gateway-stdio$sfx.sh" <<EOF
#!/usr/bin/env bash
exec "$TS" mcp serve --config "$cfg" --mode "$mode" 2>>"$OUT/logs/gateway-stdio-stderr$sfx.log"
EOF
  fi
  chmod +x "$WORK/gateway-stdio$sfx.sh"
  log "starting supergateway (stdio -> streamable HTTP, $mode) on 127.0.0.1:$P_SG"
  # a session is a gateway process (~0.4 GB); the suite never deletes its session, so an idle
  # one (no request open for SG_IDLE_MS) is closed, or 32 of them would be alive at the end
  start_bg "$OUT/logs/supergateway$sfx.log" env NODE_OPTIONS="$BINDLOCAL" node "$SG_JS" --stdio "$WORK/gateway-stdio$sfx.sh" \
    --outputTransport streamableHttp --stateful --sessionTimeout "$SG_IDLE_MS" --port "$P_SG"
  SG_PID=$LAST_PID
  if wait_port "$P_SG" 60 "$SG_PID"; then
    if [ "$CONF_JOBS" -gt 1 ]; then
      run_conf_jobs "gateway-stdio$sfx" "http://localhost:$P_SG/mcp"
    else
      run_conf "gateway-stdio$sfx" "http://localhost:$P_SG/mcp"
    fi
  else
    log "WARNING: supergateway did not come up (see $OUT/logs/supergateway$sfx.log)"
  fi
  stop_bg "$SG_PID"
}

# the fork server (started with the reference server) is up
if [ -n "$STDIO_PYTHON" ]; then
  for ((i = 0; i < 600; i++)); do
    grep -q "^forkserver: ready" "$OUT/logs/forkserver.log" && break
    kill -0 "$FORK_PID" 2>/dev/null || break
    sleep 0.1
  done
  grep -q "^forkserver: ready" "$OUT/logs/forkserver.log" \
    || die "the fork server did not come up (see $OUT/logs/forkserver.log)"
fi

# three ports a mode, taken here (not in the side-by-side subshells) and all different
PORTS=()
while [ "${#PORTS[@]}" -lt $((3 * ${#MODE_LIST[@]})) ]; do
  p=$(free_port)
  [[ " ${PORTS[*]-} $P_SRV " == *" $p "* ]] || PORTS+=("$p")
done
# (1) the baseline, and (2) and (3) of every mode, side by side
RUNS=("run_conf alone http://localhost:$P_SRV/mcp")
if [ "$CONF_JOBS" -gt 1 ]; then
  # the stdio runs take the baseline's scenarios one by one: the baseline first
  run_conf alone "http://localhost:$P_SRV/mcp"
  mapfile -t SCENARIOS < <(sed -nE 's/^(✓|✗) ([^:[:space:]]+): [0-9]+ passed.*/\2/p' "$OUT/logs/conformance-alone.txt")
  [ "${#SCENARIOS[@]}" -gt 0 ] || die "the baseline ran no scenario (see $OUT/logs/conformance-alone.txt)"
  RUNS=()
fi
i=0
for m in "${MODE_LIST[@]}"; do
  if [ "${#MODE_LIST[@]}" -eq 1 ]; then sfx=""; else sfx="-$m"; fi
  RUNS+=("gateway_http $m '$sfx' ${PORTS[i]} ${PORTS[i + 1]}" "gateway_stdio $m '$sfx' ${PORTS[i + 2]}")
  i=$((i + 3))
done
side_by_side "${RUNS[@]}"

# ---- 5. table ----------------------------------------------------------------------------------
# table of one mode: scenario, alone, http, stdio (labels gateway-http$SFX, gateway-stdio$SFX)
write_table() {  # SFX TABLE_FILE; sets A H S T
  local sfx=$1 file=$2 label f line s k a h st
  declare -A R=()
  local ORDER=()
  for label in alone "gateway-http$sfx" "gateway-stdio$sfx"; do
    f="$OUT/logs/conformance-$label.txt"
    [ -f "$f" ] || continue
    while IFS= read -r line; do
      if [[ $line =~ ^(✓|✗)\ ([^:[:space:]]+):\ [0-9]+\ passed ]]; then
        s=${BASH_REMATCH[2]}
        if [ "${BASH_REMATCH[1]}" = "✓" ]; then R[$label,$s]=P; else R[$label,$s]=F; fi
        if [ "$label" = alone ] && [[ " ${ORDER[*]-} " != *" $s "* ]]; then ORDER+=("$s"); fi
      fi
    done <"$f"
  done
  # scenarios seen only in gateway runs (should not happen) go last
  for label in "gateway-http$sfx" "gateway-stdio$sfx"; do
    for k in "${!R[@]}"; do
      [[ $k == "$label,"* ]] || continue
      s=${k#*,}
      [[ " ${ORDER[*]-} " == *" $s "* ]] || ORDER+=("$s")
    done
  done
  A=0; H=0; S=0; T=0
  {
    printf '%-32s %6s %6s %6s\n' scenario alone http stdio
    for s in "${ORDER[@]}"; do
      a=${R[alone,$s]:--}; h=${R[gateway-http$sfx,$s]:--}; st=${R[gateway-stdio$sfx,$s]:--}
      printf '%-32s %6s %6s %6s\n' "$s" "$a" "$h" "$st"
      [ "${R[alone,$s]+x}" ] && T=$((T + 1))
      [ "$a" = P ] && A=$((A + 1)); [ "$h" = P ] && H=$((H + 1)); [ "$st" = P ] && S=$((S + 1))
    done
    printf '%-32s %6s %6s %6s\n' "PASS total" "$A" "$H" "$S"
  } >"$file"
}

OK=1
for m in "${MODE_LIST[@]}"; do
  if [ "${#MODE_LIST[@]}" -eq 1 ]; then sfx=""; file="$OUT/table.txt"; else sfx="-$m"; file="$OUT/table-$m.txt"; fi
  write_table "$sfx" "$file"
  [ "${#MODE_LIST[@]}" -eq 1 ] || echo "mode: $m"
  cat "$file"
  LAST="conformance: alone $A/$T, gateway-http $H/$T, gateway-stdio $S/$T"
  [ "${#MODE_LIST[@]}" -eq 1 ] || LAST="$LAST ($m)"
  echo "$LAST" >>"$file"
  echo "$LAST"
  [ "$T" -gt 0 ] && [ "$H" -eq "$A" ] && [ "$S" -eq "$A" ] || OK=0
done
log "logs and raw results (checks.json per scenario) in $OUT; took $(( $(date +%s) - START ))s"
[ "$OK" = 1 ]
