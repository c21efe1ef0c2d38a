-- Data sourcing (issue 23, spec 1): lead searches, CRM connections, imports (a CRM object set or
-- a CSV at an address) with their column mappings, recurring import schedules, write-back of
-- table rows to the CRM with a result per row, and subdomain discovery.
--
-- Every source lands rows in an ordinary table (table_rows). A landed row carries a stable key
-- (a profile URL, an email, a domain, a CRM object id, a subdomain) in sourced_row_keys, unique
-- per table: a repeated search, a re-run import or a retried activity finds the key taken and
-- writes no second row. Progress counters move in the same transaction as the rows they count,
-- guarded by a cursor compare-and-set (a page number, a watermark), so a retry moves nothing twice.

-- A landed row's stable key, unique per table. Deleting the row frees its key.
create table sourced_row_keys (
  workspace_id uuid not null,
  table_id uuid not null,
  key text not null check (char_length(key) between 1 and 2048),
  row_id uuid not null references table_rows (id) on delete cascade,
  -- What landed it first: 'lead_search:<id>', 'import:<id>', 'subdomains:<id>'.
  source text not null,
  created_at timestamptz not null default now(),
  primary key (table_id, key),
  foreign key (workspace_id, table_id) references tables (workspace_id, id) on delete cascade
);
create index sourced_row_keys_row on sourced_row_keys (row_id);

-- A lead search: a query run against a provider, paged into a table by the lead-search/<id>
-- workflow. `next_page` is the cursor: a page lands (rows, counters, the credit charge) in one
-- transaction only while next_page still names it, so a retried page changes nothing.
create table lead_searches (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  table_id uuid not null,
  provider text not null,
  kind text not null check (kind in ('people', 'companies')),
  query jsonb not null,
  max_results integer not null check (max_results between 1 and 10000),
  price_per_row integer not null check (price_per_row >= 0),
  -- The table's column for each result field, by field name (made or matched at start).
  columns jsonb not null default '{}',
  status text not null default 'pending' check (status in ('pending', 'running', 'succeeded', 'failed', 'cancelled')),
  next_page integer not null default 1 check (next_page >= 1),
  pages_read integer not null default 0 check (pages_read >= 0),
  total_available integer check (total_available >= 0),
  results_seen integer not null default 0 check (results_seen >= 0),
  rows_landed integer not null default 0 check (rows_landed >= 0),
  duplicates integer not null default 0 check (duplicates >= 0),
  credits_charged bigint not null default 0 check (credits_charged >= 0),
  -- Times the provider said "too many requests" (each waited out as it asked).
  rate_limited integer not null default 0 check (rate_limited >= 0),
  error text,
  created_by uuid references members (id) on delete set null,
  created_at timestamptz not null default now(),
  started_at timestamptz,
  finished_at timestamptz,
  updated_at timestamptz not null default now(),
  unique (workspace_id, id),
  foreign key (workspace_id, table_id) references tables (workspace_id, id) on delete cascade
);
create index lead_searches_workspace on lead_searches (workspace_id, created_at desc, id);
create index lead_searches_table on lead_searches (table_id, created_at desc);

-- A connected CRM (HubSpot-shaped CRM v3). Tokens are sealed by integrations/secrets/sealed.ts
-- before they reach SQL (decision 036), for the context 'crm_connections:<workspace>:<id>:<field>'.
create table crm_connections (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  provider text not null default 'hubspot' check (provider in ('hubspot')),
  name text not null check (char_length(name) between 1 and 255),
  auth_kind text not null check (auth_kind in ('private_app', 'oauth')),
  token_sealed text not null,
  refresh_token_sealed text,
  expires_at timestamptz,
  -- The CRM account the token belongs to (HubSpot's portal id), when it says.
  account_id text,
  status text not null default 'connected' check (status in ('connected', 'reconnect_required')),
  last_error text,
  connected_by uuid references members (id) on delete set null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (workspace_id, id)
);
create unique index crm_connections_name on crm_connections (workspace_id, lower(name));

-- A pending OAuth authorization of a CRM connection: the state's SHA-256 (the table alone cannot
-- complete a callback) and the PKCE verifier, sealed. Short-lived; taken once.
create table crm_authorizations (
  state_hash bytea primary key,
  workspace_id uuid not null references workspaces (id) on delete cascade,
  member_id uuid references members (id) on delete set null,
  name text not null check (char_length(name) between 1 and 255),
  code_verifier_sealed text not null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null
);
create index crm_authorizations_expiry on crm_authorizations (expires_at);

-- What an import reads and where it lands: a CRM object set (a list, or a filtered search) or a
-- CSV at an address, with its column mapping ([{source, column_id}]) and the source field whose
-- value keys a row. `watermark` / `watermark_id` are the last (updatedAt, id) imported: a run
-- reads only what changed after them and moves them with the rows it wrote, in one transaction.
create table sourcing_imports (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  table_id uuid not null,
  name text not null check (char_length(name) between 1 and 255),
  source text not null check (source in ('crm', 'csv_url')),
  connection_id uuid,
  object_type text check (object_type in ('contacts', 'companies')),
  list_id text,
  filters jsonb not null default '[]',
  csv_url text check (char_length(csv_url) <= 2048),
  mapping jsonb not null,
  key_field text not null,
  watermark timestamptz,
  watermark_id text,
  -- A CSV source's fingerprint of the last content imported (unchanged content imports nothing).
  content_hash text,
  created_by uuid references members (id) on delete set null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (workspace_id, id),
  foreign key (workspace_id, table_id) references tables (workspace_id, id) on delete cascade,
  foreign key (workspace_id, connection_id) references crm_connections (workspace_id, id) on delete cascade,
  check ((source = 'crm') = (connection_id is not null and object_type is not null)),
  check ((source = 'csv_url') = (csv_url is not null))
);
create index sourcing_imports_table on sourcing_imports (table_id);
create index sourcing_imports_workspace on sourcing_imports (workspace_id, created_at desc, id);

-- One run of an import (by hand or by its schedule). A scheduled run is keyed by its fire time,
-- so the same firing started twice is one run.
create table import_runs (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  import_id uuid not null references sourcing_imports (id) on delete cascade,
  trigger text not null check (trigger in ('manual', 'schedule')),
  scheduled_for timestamptz,
  workflow_id text,
  status text not null default 'running' check (status in ('running', 'succeeded', 'failed')),
  records_read integer not null default 0 check (records_read >= 0),
  rows_created integer not null default 0 check (rows_created >= 0),
  rows_updated integer not null default 0 check (rows_updated >= 0),
  rows_unchanged integer not null default 0 check (rows_unchanged >= 0),
  rows_rejected integer not null default 0 check (rows_rejected >= 0),
  watermark_from timestamptz,
  watermark_to timestamptz,
  error text,
  started_at timestamptz not null default now(),
  finished_at timestamptz
);
create index import_runs_import on import_runs (import_id, started_at desc, id);
create unique index import_runs_firing on import_runs (import_id, scheduled_for) where scheduled_for is not null;

-- A recurring import: one Temporal Schedule per row (id 'import-schedule/<id>'), overlap SKIP.
create table import_schedules (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  import_id uuid not null unique references sourcing_imports (id) on delete cascade,
  interval_seconds integer not null check (interval_seconds between 60 and 2678400),
  catchup_window_seconds integer not null check (catchup_window_seconds between 60 and 2678400),
  paused boolean not null default false,
  note text,
  created_by uuid references members (id) on delete set null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (workspace_id, id)
);

-- A write-back: table rows upserted into the CRM by an id property, in batches; each row's
-- result is a write_back_rows row. `mapping` is [{column_id, property}].
create table write_backs (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  table_id uuid not null,
  connection_id uuid not null,
  object_type text not null check (object_type in ('contacts', 'companies')),
  id_property text not null,
  mapping jsonb not null,
  row_ids uuid[],
  -- An input column of the table that receives each row's result in words ('written 123',
  -- 'failed: ...'), so the result is on the row in the grid; null, the result is only listed.
  result_column_id uuid,
  status text not null default 'running' check (status in ('running', 'succeeded', 'failed')),
  -- The last table row sequence number handled (the cursor: a retried batch starts after it).
  after_seq bigint not null default 0,
  rows_total integer not null default 0 check (rows_total >= 0),
  rows_written integer not null default 0 check (rows_written >= 0),
  rows_unchanged integer not null default 0 check (rows_unchanged >= 0),
  rows_failed integer not null default 0 check (rows_failed >= 0),
  error text,
  created_by uuid references members (id) on delete set null,
  created_at timestamptz not null default now(),
  finished_at timestamptz,
  unique (workspace_id, id),
  foreign key (workspace_id, table_id) references tables (workspace_id, id) on delete cascade,
  foreign key (workspace_id, connection_id) references crm_connections (workspace_id, id) on delete cascade
);
create index write_backs_table on write_backs (table_id, created_at desc, id);

create table write_back_rows (
  write_back_id uuid not null references write_backs (id) on delete cascade,
  row_id uuid not null references table_rows (id) on delete cascade,
  result text not null check (result in ('written', 'unchanged', 'failed')),
  object_id text,
  error text,
  updated_at timestamptz not null default now(),
  primary key (write_back_id, row_id)
);

-- A row's link to its CRM object and the last properties written there (their hash): the same
-- write again is 'unchanged' and never reaches the CRM. The row's latest write-back result.
create table crm_row_links (
  row_id uuid not null references table_rows (id) on delete cascade,
  connection_id uuid not null references crm_connections (id) on delete cascade,
  object_type text not null check (object_type in ('contacts', 'companies')),
  object_id text,
  written_hash text,
  last_result text check (last_result in ('written', 'unchanged', 'failed')),
  last_error text,
  last_written_at timestamptz,
  primary key (row_id, connection_id, object_type)
);

-- A subdomain discovery: certificate-transparency names for one domain or a table column's
-- domains, each confirmed by DNS; one row per live subdomain.
create table subdomain_discoveries (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  table_id uuid not null,
  domain text,
  source_table_id uuid,
  source_column_id uuid,
  status text not null default 'pending' check (status in ('pending', 'running', 'succeeded', 'failed', 'cancelled')),
  domains_total integer not null default 0 check (domains_total >= 0),
  domains_done integer not null default 0 check (domains_done >= 0),
  candidates integer not null default 0 check (candidates >= 0),
  live integer not null default 0 check (live >= 0),
  rows_landed integer not null default 0 check (rows_landed >= 0),
  columns jsonb not null default '{}',
  error text,
  created_by uuid references members (id) on delete set null,
  created_at timestamptz not null default now(),
  started_at timestamptz,
  finished_at timestamptz,
  updated_at timestamptz not null default now(),
  unique (workspace_id, id),
  foreign key (workspace_id, table_id) references tables (workspace_id, id) on delete cascade,
  check ((domain is null) <> (source_column_id is null))
);
create index subdomain_discoveries_workspace on subdomain_discoveries (workspace_id, created_at desc, id);
-- The domains a discovery has finished (a retried domain is skipped).
create table subdomain_discovery_domains (
  discovery_id uuid not null references subdomain_discoveries (id) on delete cascade,
  domain text not null,
  candidates integer not null default 0,
  live integer not null default 0,
  error text,
  finished_at timestamptz not null default now(),
  primary key (discovery_id, domain)
);
