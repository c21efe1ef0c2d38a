#!/bin/sh
# Runs once, when the postgres image initialises an empty data volume: creates the service's own
# role and database ("outreach") next to Temporal's databases on the same server. The service's
# migrations (db/migrations) create its tables at start.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  -v app_password="${OUTREACH_DB_PASSWORD:-outreach}" <<'SQL'
CREATE ROLE outreach LOGIN PASSWORD :'app_password';
CREATE DATABASE outreach OWNER outreach;
SQL
