#!/bin/sh
# Registers Datum's search attributes in a Temporal namespace (compose service
# datum-search-attributes, image temporalio/admin-tools), creating the namespace first when it
# does not exist yet. The Datum services start only after this exits 0.
#
#   sh register-search-attributes.sh DatumNode=Keyword DatumGeneration=Int …
#
# Idempotent: an attribute that already exists with the same type is fine (newer servers
# answer OK, older ones "already exists"); one that exists with another type fails loudly,
# because Datum would then write values Temporal cannot index. Every wait is bounded.
#
# Environment (the temporal CLI reads the TEMPORAL_* ones itself, so the same script works
# against Temporal Cloud with TEMPORAL_API_KEY or TEMPORAL_TLS_CLIENT_CERT_PATH/_KEY_PATH):
#   TEMPORAL_ADDRESS               host:port of the frontend (CLI default localhost:7233)
#   TEMPORAL_NAMESPACE             namespace Datum runs in (default: default)
#   TEMPORAL_NAMESPACE_RETENTION   retention of closed workflows when the namespace is created (default 720h)
#   SETUP_MAX_ATTEMPTS, SETUP_SLEEP_SECONDS   retry bound per step (default 60 × 5 s)
set -eu

NAMESPACE=${TEMPORAL_NAMESPACE:-default}
RETENTION=${TEMPORAL_NAMESPACE_RETENTION:-720h}
MAX_ATTEMPTS=${SETUP_MAX_ATTEMPTS:-60}
SLEEP_SECONDS=${SETUP_SLEEP_SECONDS:-5}
ADDRESS=${TEMPORAL_ADDRESS:-localhost:7233}
export TEMPORAL_NAMESPACE="$NAMESPACE"

log() { printf 'register-search-attributes: %s\n' "$*"; }
fail() {
  printf 'register-search-attributes: ERROR: %s\n' "$*" >&2
  exit 1
}
# One line of CLI output is enough for a log; the full text goes into the failure message.
first_line() { printf '%s\n' "$1" | sed -n '1p'; }

[ "$#" -gt 0 ] || fail 'no search attributes given — fix: pass Name=Type arguments, such as DatumNode=Keyword'
for spec in "$@"; do
  case "$spec" in
    ?*=?*) ;;
    *) fail "\"$spec\" is not Name=Type — fix: write it like DatumNode=Keyword" ;;
  esac
done

# 1. The frontend answers.
attempt=1
until out=$(temporal operator cluster health 2>&1); do
  [ "$attempt" -lt "$MAX_ATTEMPTS" ] || fail "Temporal at $ADDRESS is not healthy after $MAX_ATTEMPTS attempts: $out"
  log "waiting for Temporal at $ADDRESS ($attempt/$MAX_ATTEMPTS): $(first_line "$out")"
  attempt=$((attempt + 1))
  sleep "$SLEEP_SECONDS"
done
log "Temporal at $ADDRESS is serving"

# 2. The namespace exists (created on a fresh cluster; on Temporal Cloud it already does).
attempt=1
until temporal operator namespace describe --namespace "$NAMESPACE" >/dev/null 2>&1; do
  if out=$(temporal operator namespace create --namespace "$NAMESPACE" --retention "$RETENTION" 2>&1); then
    log "namespace $NAMESPACE created (retention $RETENTION)"
    break
  fi
  case "$out" in
    *'already exists'* | *AlreadyExists* | *'already registered'*) break ;;
  esac
  [ "$attempt" -lt "$MAX_ATTEMPTS" ] || fail "cannot create namespace $NAMESPACE after $MAX_ATTEMPTS attempts: $out"
  log "namespace $NAMESPACE not ready ($attempt/$MAX_ATTEMPTS): $(first_line "$out")"
  attempt=$((attempt + 1))
  sleep "$SLEEP_SECONDS"
done
log "namespace $NAMESPACE exists"

# 3. Each search attribute, one at a time, so one answer never hides another's.
for spec in "$@"; do
  name=${spec%%=*}
  type=${spec#*=}
  attempt=1
  while :; do
    if out=$(temporal operator search-attribute create --name "$name" --type "$type" 2>&1); then
      log "$name ($type): registered"
      break
    fi
    case "$out" in
      *'different type'*)
        fail "$name already exists in namespace $NAMESPACE with another type than $type: $out — fix: Datum needs $name as $type; remove the old attribute (temporal operator search-attribute remove --name $name) or use another namespace"
        ;;
      *'already exists'* | *AlreadyExists*)
        log "$name ($type): already registered"
        break
        ;;
    esac
    # Typically the namespace was just created and is not in the frontend's cache yet.
    [ "$attempt" -lt "$MAX_ATTEMPTS" ] || fail "cannot register $name ($type) after $MAX_ATTEMPTS attempts: $out"
    log "$name ($type) not registered yet ($attempt/$MAX_ATTEMPTS): $(first_line "$out")"
    attempt=$((attempt + 1))
    sleep "$SLEEP_SECONDS"
  done
done
log "done: $# search attributes in namespace $NAMESPACE"
