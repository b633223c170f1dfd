#!/bin/sh
# Creates the roles and databases of the compose stack (compose service db-setup, image
# postgres, run against the postgres service as its superuser):
#   Temporal: role $TEMPORAL_DB_USER owning $TEMPORAL_DBNAME and $TEMPORAL_VISIBILITY_DBNAME
#   Datum:    role $DATUM_DB_USER owning $DATUM_DBNAME (the ledger, DATUM_LEDGER_URL)
# Each application gets its own login that owns only its own databases.
#
# Idempotent, and runs on every `docker compose up`, unlike /docker-entrypoint-initdb.d which
# only runs on an empty data volume: a missing role or database is created, and each role's
# password is set from .env again, so rotating a password is "edit .env, docker compose up -d".
# Passwords reach psql as variables (:'name'), never through the shell or string concatenation.
#
# Environment: PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE (libpq's own), TEMPORAL_DB_USER,
# TEMPORAL_DB_PASSWORD, TEMPORAL_DBNAME, TEMPORAL_VISIBILITY_DBNAME, DATUM_DB_USER,
# DATUM_DB_PASSWORD, DATUM_DBNAME.
set -eu

: "${TEMPORAL_DB_PASSWORD:?TEMPORAL_DB_PASSWORD is not set — fix: set it in .env (see deploy/env.example)}"
: "${DATUM_DB_PASSWORD:?DATUM_DB_PASSWORD is not set — fix: set it in .env (see deploy/env.example)}"
MAX_ATTEMPTS=${SETUP_MAX_ATTEMPTS:-30}
SLEEP_SECONDS=${SETUP_SLEEP_SECONDS:-2}

attempt=1
until pg_isready --quiet; do
  if [ "$attempt" -ge "$MAX_ATTEMPTS" ]; then
    echo "db-setup: ERROR: PostgreSQL at ${PGHOST:-localhost}:${PGPORT:-5432} is not ready after $MAX_ATTEMPTS attempts" >&2
    exit 1
  fi
  echo "db-setup: waiting for PostgreSQL at ${PGHOST:-localhost}:${PGPORT:-5432} ($attempt/$MAX_ATTEMPTS)"
  attempt=$((attempt + 1))
  sleep "$SLEEP_SECONDS"
done

psql --no-psqlrc --set ON_ERROR_STOP=1 --quiet \
  --set temporal_user="${TEMPORAL_DB_USER:-temporal}" \
  --set temporal_password="$TEMPORAL_DB_PASSWORD" \
  --set temporal_db="${TEMPORAL_DBNAME:-temporal}" \
  --set temporal_visibility_db="${TEMPORAL_VISIBILITY_DBNAME:-temporal_visibility}" \
  --set datum_user="${DATUM_DB_USER:-datum}" \
  --set datum_password="$DATUM_DB_PASSWORD" \
  --set datum_db="${DATUM_DBNAME:-datum}" <<'SQL'
-- Roles: created when missing, password (re)set every time.
SELECT format('CREATE ROLE %I LOGIN', :'temporal_user')
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'temporal_user') \gexec
ALTER ROLE :"temporal_user" WITH LOGIN PASSWORD :'temporal_password';
SELECT format('CREATE ROLE %I LOGIN', :'datum_user')
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'datum_user') \gexec
ALTER ROLE :"datum_user" WITH LOGIN PASSWORD :'datum_password';

-- Databases, each owned by its application's role (CREATE DATABASE cannot run in a
-- transaction, so each is its own \gexec statement).
SELECT format('CREATE DATABASE %I OWNER %I', :'temporal_db', :'temporal_user')
 WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'temporal_db') \gexec
SELECT format('CREATE DATABASE %I OWNER %I', :'temporal_visibility_db', :'temporal_user')
 WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'temporal_visibility_db') \gexec
SELECT format('CREATE DATABASE %I OWNER %I', :'datum_db', :'datum_user')
 WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'datum_db') \gexec

-- Nobody else connects to the application databases.
SELECT format('REVOKE CONNECT ON DATABASE %I FROM PUBLIC', d)
  FROM unnest(ARRAY[:'temporal_db', :'temporal_visibility_db', :'datum_db']) AS d \gexec
SQL
echo "db-setup: roles ${TEMPORAL_DB_USER:-temporal}, ${DATUM_DB_USER:-datum} and databases ${TEMPORAL_DBNAME:-temporal}, ${TEMPORAL_VISIBILITY_DBNAME:-temporal_visibility}, ${DATUM_DBNAME:-datum} are ready"
