#!/bin/sh
# Creates or upgrades Temporal's PostgreSQL schemas (compose service temporal-schema, image
# temporalio/admin-tools, whose temporal-sql-tool and schema files match the server version).
# The databases themselves are created by deploy/postgres/setup.sh; this only needs to own them.
#
# Idempotent: setup-schema -v 0.0 creates only the version tables and leaves a newer schema
# alone; update-schema applies just the versions the database does not have yet. So the same
# script installs a fresh cluster and upgrades an existing one after the image tags are bumped.
#
# Environment: SQL_PLUGIN (postgres12), SQL_HOST, SQL_PORT, SQL_USER, SQL_PASSWORD (read by
# temporal-sql-tool itself), TEMPORAL_DBNAME, TEMPORAL_VISIBILITY_DBNAME.
set -eu

: "${SQL_HOST:?SQL_HOST must name the PostgreSQL host}"
: "${SQL_USER:?SQL_USER must name Temporal's database role}"
: "${SQL_PASSWORD:?SQL_PASSWORD must hold the password of SQL_USER}"
export SQL_PLUGIN="${SQL_PLUGIN:-postgres12}"
export SQL_PORT="${SQL_PORT:-5432}"
DBNAME=${TEMPORAL_DBNAME:-temporal}
VISIBILITY_DBNAME=${TEMPORAL_VISIBILITY_DBNAME:-temporal_visibility}
SCHEMA_ROOT=${TEMPORAL_SCHEMA_ROOT:-/etc/temporal/schema/postgresql/v12}
MAX_ATTEMPTS=${SETUP_MAX_ATTEMPTS:-30}
SLEEP_SECONDS=${SETUP_SLEEP_SECONDS:-2}

log() { printf 'temporal-schema: %s\n' "$*"; }

# setup-schema, retried a bounded number of times: the first connection can race PostgreSQL.
attempt=1
until temporal-sql-tool --db "$DBNAME" setup-schema -v 0.0; do
  if [ "$attempt" -ge "$MAX_ATTEMPTS" ]; then
    log "ERROR: cannot reach $SQL_USER@$SQL_HOST:$SQL_PORT/$DBNAME after $MAX_ATTEMPTS attempts" >&2
    exit 1
  fi
  log "database $DBNAME not reachable yet ($attempt/$MAX_ATTEMPTS)"
  attempt=$((attempt + 1))
  sleep "$SLEEP_SECONDS"
done
temporal-sql-tool --db "$DBNAME" update-schema -d "$SCHEMA_ROOT/temporal/versioned"
log "$DBNAME: schema up to date"

temporal-sql-tool --db "$VISIBILITY_DBNAME" setup-schema -v 0.0
temporal-sql-tool --db "$VISIBILITY_DBNAME" update-schema -d "$SCHEMA_ROOT/visibility/versioned"
log "$VISIBILITY_DBNAME: schema up to date"
