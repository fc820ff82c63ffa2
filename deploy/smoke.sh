#!/usr/bin/env bash
# Smoke test of the docker-compose path (docker-compose.yml's header), run for real, that leaves
# the host's network as it found it.
#
#   usage: deploy/smoke.sh            (as root, from anywhere; see docs/howto/containers.md)
#
# Steps: start dockerd if none runs; build the base image if it is missing
# (deploy/build-base-image.sh); fill the wheelhouse (deploy/build-wheelhouse.sh); build the
# image; check in the image that securelp is one package and that `securelp --help` runs;
# solve deploy/afiro.mps centrally with HiGHS in the image (no securelp code involved); run each
# scenario (init, parties up, coordinator, parties exit 0, report.json optimal with the objective
# within SMOKE_TOL relative to the central one); docker-compose down.
#
# Host state: before anything runs it records iptables-save, ip6tables-save, the nft ruleset,
# ip link/addr/route, the forwarding and bridge sysctls, docker's runtime paths and whether
# dockerd (and containerd, shims, docker-proxy) runs. On every exit path (success, a failed
# step, INT or TERM) it takes the compose project down; if it started dockerd itself, it stops
# it and undoes what dockerd leaves behind (docker0 and br-* bridges, veths, the DOCKER,
# DOCKER-USER and DOCKER-ISOLATION-* chains and nat rules, the FORWARD policy, ip_forward,
# /run/docker). A dockerd that already ran is left running and only the compose project is
# removed. It then records the state again, compares, and prints what it restored and whether
# the state equals the one before. A run killed outright (SIGKILL) leaves /run/securelp-smoke
# behind; the next run finds it, restores the host to the state recorded there and stops the
# dockerd the killed run had started.
#
# Exit status: 0 the session was optimal and the host state equals the one before; 1 a step
# failed or the session's report was wrong; 2 the host state differs from the one before (the
# differences are printed; this wins over 1); 3 a precondition is missing (not root, a command,
# another smoke run holds the lock, an unknown scenario); 130/143 interrupted by INT/TERM (after
# cleaning up).
#
# Environment: SMOKE_SCENARIOS (default "dialin dialout"), SMOKE_PROJECT (compose project, default
# securelpsmoke), SMOKE_RECORD (the run's record, default deploy/smoke), SMOKE_COMPOSE (default
# docker-compose), SMOKE_TOL (default 1e-9), DOCKERD_ARGS (extra dockerd flags), MIRROR (Debian
# mirror for the base image).
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
cd "$REPO"

PROJECT="${SMOKE_PROJECT:-securelpsmoke}"
SCENARIOS="${SMOKE_SCENARIOS:-dialin dialout}"
RECORD="${SMOKE_RECORD:-$REPO/deploy/smoke}"
TOL="${SMOKE_TOL:-1e-9}"
STATE=/run/securelp-smoke            # host-wide: the state found, the dockerd this test started
LOCK=/run/securelp-smoke.lock
IMAGE=securelp:local                 # docker-compose.yml's image
BASE_IMAGE=securelp-base:bookworm    # the Dockerfile's default BASE_IMAGE
read -ra COMPOSE_CMD <<<"${SMOKE_COMPOSE:-docker-compose}"
COMPOSE=("${COMPOSE_CMD[@]}" -p "$PROJECT" -f "$REPO/docker-compose.yml")
# sysctls dockerd changes or depends on; ip_forward first: writing it also sets conf.*.forwarding
SYSCTLS=(net.ipv4.ip_forward net.ipv4.conf.all.forwarding net.ipv4.conf.default.forwarding
         net.ipv6.conf.all.forwarding net.ipv6.conf.default.forwarding
         net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables)
DOCKER_PROCS=(dockerd containerd containerd-shim docker-proxy)   # comm names (15 characters)
RUNTIME_PATHS=(/run/docker /run/docker.sock /run/docker.pid /run/containerd)

OWN_DOCKERD=0        # 1: no dockerd ran before, so this test answers for the daemon and its traces
DOCKERD_PID=""
CHILD_PIDS=""        # containerd started by our dockerd, stopped by pid if dockerd cannot stop it
CURRENT_PID=""       # the step running now (a `timeout` process), stopped on interrupt
SESSION_OK=0
INTERRUPTED=""
DOWN_DONE=0
T_START=$(date +%s.%N)

say() { echo "smoke: $*"; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# ---------------------------------------------------------------- preconditions
missing=()
[ "$(id -u)" -eq 0 ] || { echo "smoke: needs root (dockerd, iptables and ip link need it): run it as root or with sudo" >&2; exit 3; }
for cmd in docker dockerd iptables-save iptables-restore ip6tables-save ip sysctl flock setsid timeout findmnt python3 "${COMPOSE_CMD[0]}"; do
  command -v "$cmd" >/dev/null || missing+=("$cmd")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "smoke: missing commands: ${missing[*]} (Debian: apt-get install -y docker.io docker-compose debootstrap iptables iproute2 procps util-linux python3)" >&2
  exit 3
fi
NFT=0; command -v nft >/dev/null && NFT=1
IPT_NFT=0; iptables --version 2>/dev/null | grep -q nf_tables && IPT_NFT=1

# One run at a time on this host. The lock file is removed again at the end; a run that took
# the lock on a file removed meanwhile takes it again on the new one.
while :; do
  exec 9>>"$LOCK"
  flock -n 9 || { echo "smoke: another smoke run holds $LOCK; wait for it to finish" >&2; exit 3; }
  [ "$(stat -c %i "$LOCK" 2>/dev/null)" = "$(stat -L -c %i /proc/self/fd/9)" ] && break
  exec 9>&-
done
release_lock() { rm -f "$LOCK"; exec 9>&-; }

# ---------------------------------------------------------------- host state
# Each snapshot is a directory of normalized text files (counters, lifetimes, interface indexes
# and timestamps removed, so that only configuration is compared), plus raw iptables saves used
# to restore.
snapshot() {
  local dir="$1" fam key name
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
  for fam in iptables ip6tables; do
    "$fam-save" >"$dir.tmp/$fam.save" 2>/dev/null || true
    sed -e '/^#/d' -e 's/ \[[0-9]*:[0-9]*\]$//' "$dir.tmp/$fam.save" >"$dir.tmp/$fam.rules"
  done
  if [ "$NFT" = 1 ]; then
    nft list ruleset 2>/dev/null | sed -E 's/counter packets [0-9]+ bytes [0-9]+/counter/' >"$dir.tmp/nft.rules" || true
  fi
  ip -o link show | sed -E -e 's/^[0-9]+: //' -e 's/ link-netnsid [0-9]+//' >"$dir.tmp/links"
  ip -o addr show | sed -E -e 's/^[0-9]+: //' -e 's/valid_lft [^ ]+ preferred_lft [^ ]+//' >"$dir.tmp/addrs"
  { ip -4 route show table all; ip -6 route show table all; } 2>/dev/null |
    sed -E 's/ expires [0-9]+sec//' >"$dir.tmp/routes"
  for key in "${SYSCTLS[@]}"; do
    if [ -e "/proc/sys/${key//.//}" ]; then echo "$key = $(sysctl -n "$key")"; fi
  done >"$dir.tmp/sysctl"
  for name in "${DOCKER_PROCS[@]}"; do
    for pid in $(live_pids "$name"); do echo "$name $pid"; done
  done >"$dir.tmp/processes"
  for name in "${RUNTIME_PATHS[@]}"; do
    if [ -e "$name" ]; then echo "$name exists"; else echo "$name absent"; fi
  done >"$dir.tmp/runtime"
  date -u +%Y-%m-%dT%H:%M:%SZ >"$dir.tmp/taken"
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
}

COMPARED=(iptables.rules ip6tables.rules nft.rules links addrs routes sysctl processes runtime)
compare_states() {   # before after diff-file -> 0 when equal
  local before="$1" after="$2" out="$3" f rc=0
  : >"$out"
  for f in "${COMPARED[@]}"; do
    [ -e "$before/$f" ] || [ -e "$after/$f" ] || continue
    if ! diff -u --label "before/$f" --label "after/$f" "$before/$f" "$after/$f" >>"$out" 2>&1; then rc=1; fi
  done
  return $rc
}

link_names() { sed -E -e 's/^[0-9]+: //' -e 's/^([^:@ ]+)[@:].*/\1/'; }   # `ip -o link` lines -> names

# processes by command name, without zombies: a daemon that exited but whose parent has not
# reaped it yet (one left by a killed run is reparented) runs no more
live_pids() {
  local pid
  for pid in $(pgrep -x "$1" || true); do
    if proc_alive "$pid"; then echo "$pid"; fi
  done
}
dockerd_running() { [ -n "$(live_pids dockerd)" ]; }
daemon_answers() { timeout 10 docker info >/dev/null 2>&1; }
proc_alive() {   # a pid that is alive and not a zombie
  local st
  st="$(ps -o stat= -p "$1" 2>/dev/null || true)"
  [ -n "$st" ] && [ "${st:0:1}" != Z ]
}

# ---------------------------------------------------------------- restoring
RESTORED=()

stop_own_dockerd() {
  [ -n "$DOCKERD_PID" ] || return 0
  if proc_alive "$DOCKERD_PID"; then
    kill -TERM "$DOCKERD_PID" 2>/dev/null || true
    for _ in $(seq 60); do proc_alive "$DOCKERD_PID" || break; sleep 1; done
    if proc_alive "$DOCKERD_PID"; then
      kill -KILL "$DOCKERD_PID" 2>/dev/null || true
      RESTORED+=("dockerd (pid $DOCKERD_PID) did not stop within 60 s of TERM: killed")
    else
      RESTORED+=("stopped dockerd (pid $DOCKERD_PID), which this test had started")
    fi
    wait "$DOCKERD_PID" 2>/dev/null || true
  fi
  for pid in $CHILD_PIDS; do
    if proc_alive "$pid"; then kill -TERM "$pid" 2>/dev/null || true; sleep 2
      proc_alive "$pid" && kill -KILL "$pid" 2>/dev/null
      RESTORED+=("stopped containerd (pid $pid) left by dockerd")
    fi
  done
  rm -f "$STATE/dockerd.pid"
}

SESSION_BRIDGES=""   # the compose network's bridges (br-<network id>), seen while the session ran
note_session_bridges() {
  local id
  for id in $(docker network ls -q --no-trunc --filter "label=com.docker.compose.project=$PROJECT" 2>/dev/null); do
    SESSION_BRIDGES="$SESSION_BRIDGES br-${id:0:12}"
  done
}

report_session_bridges() {
  local b
  for b in $SESSION_BRIDGES; do
    if ip link show "$b" >/dev/null 2>&1; then continue; fi
    RESTORED+=("the compose network's bridge $b is gone")
  done
}

restore_links() {
  local name
  for name in $(comm -13 <(link_names <"$STATE/before/links" | sort) <(ip -o link show | link_names | sort)); do
    case "$name" in
      docker0|br-*|veth*)
        if ip link delete "$name" 2>/dev/null; then RESTORED+=("deleted link $name"); fi ;;
    esac
  done
}

table_section() {   # raw-save table -> that table's section of an iptables-save file
  awk -v t="*$2" '$0 == t { on = 1 } on { print } on && $0 == "COMMIT" { exit }' "$1"
}

describe_table() {   # save-file table -> "chains ..., N rules, policies ..."
  table_section "$1" "$2" | awk '
    /^:/ { name = substr($1, 2); if ($2 == "-") chains = chains " " name; else if ($2 != "ACCEPT") pol = pol " " name " " $2 }
    /^-A/ { rules++ }
    END { printf "chains%s, %d rules%s", (chains == "" ? " none" : chains), rules, (pol == "" ? "" : ", policy" pol) }'
}

restore_tables() {
  local fam family before now t
  for fam in iptables ip6tables; do
    family=ip; [ "$fam" = ip6tables ] && family=ip6
    before="$STATE/before/$fam.save"
    now="$(mktemp)"
    "$fam-save" >"$now" 2>/dev/null || true
    for t in $(grep -E '^\*' "$now" | tr -d '*'); do
      if grep -qx "\*$t" "$before"; then
        if ! diff -q <(table_section "$before" "$t" | sed -e '/^#/d' -e 's/ \[[0-9]*:[0-9]*\]$//') \
                     <(table_section "$now" "$t" | sed -e '/^#/d' -e 's/ \[[0-9]*:[0-9]*\]$//') >/dev/null; then
          if table_section "$before" "$t" | "$fam-restore"; then
            RESTORED+=("$fam table $t restored to its saved rules and policies")
          fi
        fi
      elif [ "$NFT" = 1 ] && [ "$IPT_NFT" = 1 ]; then
        if nft delete table "$family" "$t" 2>/dev/null; then
          RESTORED+=("deleted table $family $t (created by dockerd: $(describe_table "$now" "$t"))")
        fi
      else
        # legacy iptables keeps its built-in tables: empty them and reset the policies
        "$fam" -t "$t" -F && "$fam" -t "$t" -X &&
          for chain in $("$fam" -t "$t" -S | awk '$1 == "-P" { print $2 }'); do "$fam" -t "$t" -P "$chain" ACCEPT; done &&
          RESTORED+=("emptied $fam table $t (created by dockerd: $(describe_table "$now" "$t"))")
      fi
    done
    rm -f "$now"
  done
}

restore_sysctls() {
  local line key want have
  while read -r line; do
    key="${line%% = *}"; want="${line#* = }"
    have="$(sysctl -n "$key" 2>/dev/null || true)"
    if [ "$have" != "$want" ] && sysctl -qw "$key=$want"; then RESTORED+=("$key $have -> $want"); fi
  done <"$STATE/before/sysctl"
}

restore_runtime() {
  # /run/docker is dockerd's (removed once the daemon this test started is gone); /run/containerd
  # holds the shims' socket directories that any container creates (removed while it is empty)
  if grep -qx "/run/docker absent" "$STATE/before/runtime" && [ -e /run/docker ] && ! dockerd_running &&
     ! findmnt -rn -o TARGET | grep -q "^/run/docker/"; then
    rm -rf --one-file-system /run/docker && RESTORED+=("removed dockerd's runtime directory /run/docker")
  fi
  if grep -qx "/run/containerd absent" "$STATE/before/runtime" && [ -d /run/containerd ] &&
     [ -z "$(find /run/containerd ! -type d -print -quit)" ] &&
     ! findmnt -rn -o TARGET | grep -q "^/run/containerd/"; then
    rm -rf --one-file-system /run/containerd && RESTORED+=("removed the shims' empty runtime directory /run/containerd")
  fi
}

compose_down() {
  daemon_answers || return 0
  timeout 120 "${COMPOSE[@]}" down --remove-orphans -t 10 >>"$RECORD/cleanup.log" 2>&1 ||
    say "docker-compose down failed (see $RECORD/cleanup.log)"
  # one-off `run` containers and networks of the project that down did not remove
  local ids
  ids="$(docker ps -aq --filter "label=com.docker.compose.project=$PROJECT" 2>/dev/null || true)"
  if [ -n "$ids" ]; then
    # shellcheck disable=SC2086
    docker rm -f $ids >>"$RECORD/cleanup.log" 2>&1 && RESTORED+=("removed leftover containers of project $PROJECT")
  fi
  ids="$(docker network ls -q --filter "label=com.docker.compose.project=$PROJECT" 2>/dev/null || true)"
  if [ -n "$ids" ]; then
    # shellcheck disable=SC2086
    docker network rm $ids >>"$RECORD/cleanup.log" 2>&1 && RESTORED+=("removed leftover networks of project $PROJECT")
  fi
}

cleanup() {
  local rc=$? t0 restored=0 code
  set +e
  # INT and TERM again must not cut the clean-up short, nor a reader of our output that went
  # away (`smoke.sh | tee log` and Ctrl-C): output is then lost, the clean-up still runs
  trap '' INT TERM PIPE
  t0=$(now)
  if [ -n "$CURRENT_PID" ]; then
    kill -TERM "$CURRENT_PID" 2>/dev/null; wait "$CURRENT_PID" 2>/dev/null; CURRENT_PID=""
    echo "stopped"
  fi
  [ "$DOWN_DONE" = 1 ] || compose_down
  if [ "$OWN_DOCKERD" = 1 ]; then
    stop_own_dockerd
    restore_links
    restore_tables
    restore_sysctls
  fi
  restore_runtime
  report_session_bridges
  snapshot "$RECORD/after"
  cp -r "$STATE/before" "$RECORD/before.tmp" 2>/dev/null && rm -rf "$RECORD/before" && mv "$RECORD/before.tmp" "$RECORD/before"
  if compare_states "$STATE/before" "$RECORD/after" "$RECORD/state.diff"; then restored=1; fi
  timing "cleanup" "$t0"
  printf '%-28s %s\n' total "$(elapsed "$T_START" "$(now)")" >>"$RECORD/timings"
  if [ -n "$INTERRUPTED" ]; then code=$([ "$INTERRUPTED" = INT ] && echo 130 || echo 143)
  elif [ "$restored" != 1 ]; then code=2
  elif [ "$SESSION_OK" != 1 ] || [ "$rc" -ne 0 ]; then code=1
  else code=0
  fi
  # the summary goes to a file first: it survives a reader of our output that went away
  {
    echo
    if [ "$OWN_DOCKERD" = 1 ]; then
      say "host state: dockerd did not run before; this test started it and undid its traces"
    else
      say "host state: dockerd ran before; it was left running and only the compose project was removed"
    fi
    if [ ${#RESTORED[@]} -eq 0 ]; then say "restored: nothing needed restoring"; fi
    for line in "${RESTORED[@]}"; do say "restored: $line"; done
    if [ "$restored" = 1 ]; then
      say "host state after equals the state before: yes (${COMPARED[*]}; record in $RECORD)"
    else
      say "host state after equals the state before: NO -- differences ($RECORD/state.diff):"
      sed 's/^/    /' "$RECORD/state.diff"
      if [ "$OWN_DOCKERD" = 1 ]; then
        say "the state found is kept in $STATE: the next run restores to it (remove $STATE to accept the present state)"
      fi
    fi
    echo
    say "timings (s):"
    sed 's/^/    /' "$RECORD/timings"
    if [ -n "$INTERRUPTED" ]; then say "interrupted by SIG$INTERRUPTED; cleaned up"; fi
    if [ "$code" = 0 ]; then say "PASS: session optimal, host state restored"; else say "FAIL (exit $code)"; fi
  } >"$RECORD/summary"
  cat "$RECORD/summary"
  if [ "$restored" = 1 ] || [ "$OWN_DOCKERD" = 0 ]; then rm -rf "$STATE"; fi
  release_lock
  exit "$code"
}

interrupted() { INTERRUPTED="$1"; exit 1; }

# ---------------------------------------------------------------- steps
timing() { printf '%-28s %s\n' "$1" "$(elapsed "$2" "$(now)")" >>"$RECORD/timings"; }

# run_step NAME SECONDS COMMAND...: run one external command with a time limit, its output in
# $RECORD/logs/NAME.log; waits with `wait` so that INT/TERM reach the trap at once.
run_step() {
  local name="$1" limit="$2" t0 rc=0 log
  shift 2
  log="$RECORD/logs/${name//:/-}.log"
  t0=$(now)
  printf 'smoke: %-28s ' "$name"
  timeout -k 10 "$limit" "$@" >"$log" 2>&1 </dev/null 9>&- &
  CURRENT_PID=$!
  wait "$CURRENT_PID" || rc=$?
  CURRENT_PID=""
  timing "$name" "$t0"
  if [ "$rc" -ne 0 ]; then
    echo "FAILED (exit $rc after $(elapsed "$t0" "$(now)") s$([ "$rc" = 124 ] && echo ", time limit $limit s")); last lines of $log:"
    tail -n 25 "$log" | sed 's/^/    /'
    return "$rc"
  fi
  echo "ok ($(elapsed "$t0" "$(now)") s)"
}

# drop_replaced_image ID: the build moved the image's tag to a new image; remove the one it
# replaced (untagged now), so that repeated runs do not pile up images
drop_replaced_image() {
  local new
  new="$(docker image inspect -f '{{.Id}}' "$IMAGE" 2>/dev/null || true)"
  if [ -z "$1" ]; then
    say "    $IMAGE built"
  elif [ "$1" = "$new" ]; then
    say "    $IMAGE unchanged (every build step cached)"
  elif [ -n "$(docker image inspect -f '{{join .RepoTags ","}}' "$1" 2>/dev/null)" ]; then
    say "    $IMAGE rebuilt; the image it replaced is still tagged, kept"
  elif docker image rm "$1" >/dev/null 2>&1; then
    say "    $IMAGE rebuilt; removed the image it replaced (${1:7:12})"
  else
    say "    $IMAGE rebuilt; the image it replaced (${1:7:12}) is still in use, kept"
  fi
}

start_dockerd() {
  local t0 pid
  t0=$(now)
  printf 'smoke: %-28s ' "dockerd"
  # its own session, so that a Ctrl-C at the terminal reaches this script (which cleans up in
  # order) and not the daemon; without the lock's descriptor, so that a daemon left behind by a
  # killed run does not hold the lock against the next run, which adopts and stops it
  # shellcheck disable=SC2086
  setsid dockerd ${DOCKERD_ARGS:-} >"$RECORD/logs/dockerd.log" 2>&1 </dev/null 9>&- &
  DOCKERD_PID=$!
  echo "$DOCKERD_PID" >"$STATE/dockerd.pid"
  for _ in $(seq 60); do
    daemon_answers && break
    proc_alive "$DOCKERD_PID" || break
    sleep 1
  done
  if ! daemon_answers; then
    echo "FAILED: dockerd did not answer within 60 s; last lines of $RECORD/logs/dockerd.log:"
    tail -n 25 "$RECORD/logs/dockerd.log" | sed 's/^/    /'
    return 1
  fi
  pid="$(cat /run/docker.pid 2>/dev/null || true)"
  if [ -n "$pid" ] && [ "$pid" != "$DOCKERD_PID" ]; then
    DOCKERD_PID="$pid"; echo "$DOCKERD_PID" >"$STATE/dockerd.pid"
  fi
  CHILD_PIDS="$(pgrep -P "$DOCKERD_PID" -x containerd | tr '\n' ' ' || true)"
  echo "$CHILD_PIDS" >"$STATE/children.pid"
  timing dockerd "$t0"
  echo "started (pid $DOCKERD_PID, $(elapsed "$t0" "$(now)") s)"
}

# A scenario is a function scenario_NAME: it runs one session through docker-compose.yml and
# checks its report. SMOKE_SCENARIOS lists the ones to run, in order: dialin (the coordinator
# dials listening parties) and dialout (the parties dial a listening coordinator). Another
# deployment mode is one more function and one more name; the host-state handling stays as is.
scenario_dialin() {
  local ids
  run_step dialin:init 180 "${COMPOSE[@]}" run --rm -T init
  run_step dialin:parties-up 180 "${COMPOSE[@]}" up -d owner1 owner2 owner3
  note_session_bridges
  run_step dialin:coordinator 300 "${COMPOSE[@]}" run --rm -T coordinator
  # the parties exit by themselves once the coordinator has closed the session
  ids="$("${COMPOSE[@]}" ps -q owner1 owner2 owner3 | tr '\n' ' ')"
  # shellcheck disable=SC2086
  run_step dialin:parties-exit 60 docker wait $ids
  if grep -qvx 0 "$RECORD/logs/dialin-parties-exit.log"; then
    say "a party container exited non-zero: $(tr '\n' ' ' <"$RECORD/logs/dialin-parties-exit.log")"
    return 1
  fi
  check_report dialin "$REPO/deploy/session/coordinator/report.json"
}

scenario_dialout() {
  local coord ids
  run_step dialout:init 180 "${COMPOSE[@]}" run --rm -T init
  run_step dialout:coordinator-up 180 "${COMPOSE[@]}" up -d coordinator-listen
  run_step dialout:parties-up 180 "${COMPOSE[@]}" up -d owner1-out owner2-out owner3-out
  note_session_bridges
  coord="$("${COMPOSE[@]}" ps -q coordinator-listen)"
  run_step dialout:coordinator 300 docker wait "$coord"
  if grep -qvx 0 "$RECORD/logs/dialout-coordinator.log"; then
    say "the listening coordinator exited non-zero: $(tr '\n' ' ' <"$RECORD/logs/dialout-coordinator.log")"
    return 1
  fi
  ids="$("${COMPOSE[@]}" ps -q owner1-out owner2-out owner3-out | tr '\n' ' ')"
  # shellcheck disable=SC2086
  run_step dialout:parties-exit 60 docker wait $ids
  if grep -qvx 0 "$RECORD/logs/dialout-parties-exit.log"; then
    say "a dialing party container exited non-zero: $(tr '\n' ' ' <"$RECORD/logs/dialout-parties-exit.log")"
    return 1
  fi
  check_report dialout "$REPO/deploy/session/coordinator/report.json"
}

# check_report NAME REPORT: status optimal, objective within TOL (relative, floor 1) of CENTRAL
check_report() {
  printf 'smoke: %-28s ' "$1:report"
  python3 - "$2" "$CENTRAL" "$TOL" <<'EOF'
import json
import sys

path, central, tol = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
try:
    with open(path, encoding="utf-8") as fh:
        report = json.load(fh)
except (OSError, ValueError) as exc:
    print(f"FAILED: cannot read {path}: {exc}")
    sys.exit(1)
status, obj = report.get("status"), report.get("objective")
if status != "optimal" or not isinstance(obj, (int, float)):
    print(f"FAILED: {path}: status {status!r}, objective {obj!r}")
    sys.exit(1)
diff = abs(obj - central)
rel = diff / max(1.0, abs(central))
verdict = "ok" if rel <= tol else "FAILED"
print(f"{verdict}: status optimal, objective {obj!r}, central {central!r}, "
      f"|difference| {diff:.3e}, relative {rel:.3e} (tolerance {tol:g})")
sys.exit(0 if rel <= tol else 1)
EOF
}

CENTRAL_PY='
import highspy
h = highspy.Highs()
h.setOptionValue("output_flag", False)
assert h.readModel("/deploy/afiro.mps") == highspy.HighsStatus.kOk, "HiGHS cannot read the model"
h.run()
assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal, h.modelStatusToString(h.getModelStatus())
print(repr(h.getInfo().objective_function_value))
'

main() {
  local old_image scenario
  for scenario in $SCENARIOS; do
    declare -F "scenario_$scenario" >/dev/null || {
      echo "smoke: unknown scenario '$scenario' in SMOKE_SCENARIOS (known: $(declare -F | awk '$3 ~ /^scenario_/ { sub("scenario_", "", $3); printf "%s ", $3 }'))" >&2
      release_lock; exit 3; }
  done
  mkdir -p "$STATE" "$RECORD"
  rm -rf "$RECORD/logs" "$RECORD/timings" "$RECORD/after" "$RECORD/state.diff" "$RECORD/cleanup.log" "$RECORD/summary"
  mkdir -p "$RECORD/logs"
  : >"$RECORD/timings"
  if [ -d "$STATE/before" ]; then
    say "an earlier smoke run left the host state it had found in $STATE (it was killed, or could not restore it): restoring to that state, recorded at $(cat "$STATE/before/taken")"
    if grep -q '^dockerd ' "$STATE/before/processes"; then OWN_DOCKERD=0; else OWN_DOCKERD=1; fi
    DOCKERD_PID="$(cat "$STATE/dockerd.pid" 2>/dev/null || true)"
    CHILD_PIDS="$(cat "$STATE/children.pid" 2>/dev/null || true)"
    if [ "$OWN_DOCKERD" = 1 ] && dockerd_running && ! { [ -n "$DOCKERD_PID" ] && proc_alive "$DOCKERD_PID"; }; then
      echo "smoke: a dockerd runs that no smoke run started, but the state recorded in $STATE had none: stop it, or remove $STATE to accept the present state" >&2
      release_lock
      exit 3
    fi
  else
    snapshot "$STATE/before"
    if dockerd_running; then OWN_DOCKERD=0; else OWN_DOCKERD=1; fi
  fi
  trap cleanup EXIT
  trap 'interrupted INT' INT
  trap 'interrupted TERM' TERM
  say "repository $REPO, compose project $PROJECT, record in $RECORD"
  say "host state before: dockerd $([ "$OWN_DOCKERD" = 1 ] && echo 'not running' || echo running), $(grep -c . "$STATE/before/links") links, $(grep -c '^-A' "$STATE/before/iptables.rules" || true) iptables rules, $(tr '\n' ';' <"$STATE/before/sysctl" | sed 's/;$//')"

  if daemon_answers && [ "$OWN_DOCKERD" = 1 ]; then
    say "dockerd (pid $DOCKERD_PID) started by the unfinished run answers; it is stopped at the end"
  elif daemon_answers; then
    say "dockerd answers (pid $(live_pids dockerd | paste -sd ' ')); it is left running"
  elif [ "$OWN_DOCKERD" = 0 ]; then
    echo "smoke: dockerd runs but does not answer the docker client" >&2
    return 1
  else
    stop_own_dockerd   # one left by an unfinished run that no longer answers
    start_dockerd
  fi

  if docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    say "$(printf '%-28s ' base-image)present ($BASE_IMAGE)"
  else
    run_step base-image 1800 "$REPO/deploy/build-base-image.sh" ${MIRROR:+"$MIRROR"}
  fi
  run_step wheelhouse 900 "$REPO/deploy/build-wheelhouse.sh"
  old_image="$(docker image inspect -f '{{.Id}}' "$IMAGE" 2>/dev/null || true)"
  run_step build 1200 env SECURELP_BUILD_NETWORK=none "${COMPOSE[@]}" build
  drop_replaced_image "$old_image"
  run_step image:help 60 docker run --rm --network none "$IMAGE" --help
  run_step image:one-package 60 docker run --rm --network none --entrypoint python "$IMAGE" /deploy/check-package.py
  say "    $(tail -n 1 "$RECORD/logs/image-one-package.log")"
  run_step image:central 120 docker run --rm --network none --entrypoint python "$IMAGE" -c "$CENTRAL_PY"
  CENTRAL="$(tail -n 1 "$RECORD/logs/image-central.log")"
  say "    central objective (HiGHS on deploy/afiro.mps in the image): $CENTRAL"

  for scenario in $SCENARIOS; do
    "scenario_$scenario"
  done
  SESSION_OK=1
  run_step down 180 "${COMPOSE[@]}" down --remove-orphans -t 10
  DOWN_DONE=1
}

main "$@"
