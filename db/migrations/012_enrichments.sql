-- Enrichment columns and their runs. An enrichment column names a provider, maps the provider's
-- inputs to columns and fans its output fields out into child columns (parent_column_id); a run
-- computes its cells over rows, one Temporal workflow per run (column-run/<run id>).

insert into column_kinds (kind, computed) values ('enrichment', true) on conflict (kind) do nothing;

-- The run that last claimed the cell: only that run's activities may move it (compare-and-set
-- on state and run), so a run that was cancelled or superseded can never overwrite a newer one.
alter table table_cells add column if not exists run_id uuid;
-- What a cell held before a run made it pending: a run that stops before reaching the row puts
-- it back, so cancelling never loses a result that was there.
alter table table_cells add column if not exists previous jsonb;

create table column_runs (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null,
  table_id uuid not null,
  -- Deleting the column ends its runs' records; a workflow still going finds no run and stops.
  column_id uuid not null references table_columns (id) on delete cascade,
  provider text not null,
  status text not null default 'queued'
    check (status in ('queued', 'running', 'cancelling', 'completed', 'cancelled', 'failed')),
  trigger text not null check (trigger in ('manual', 'auto')),
  -- all: every row in order; rows: the rows named; new_rows: rows with no cell of the column yet.
  scope text not null check (scope in ('all', 'rows', 'new_rows')),
  row_ids uuid[],
  keep_existing_results boolean not null,
  -- After the pass in row order, also take rows added meanwhile (auto_run woke the run).
  sweep_new_rows boolean not null default false,
  -- Bumped by every row add that finds this run going: the run may finish only with the count it read.
  wakes integer not null default 0,
  cursor_seq bigint not null default 0,
  cursor_done boolean not null default false,
  rows_total integer not null default 0,
  rows_claimed integer not null default 0,
  rows_done integer not null default 0,
  rows_empty integer not null default 0,
  rows_failed integer not null default 0,
  rows_skipped integer not null default 0,
  rows_kept integer not null default 0,
  credits_charged integer not null default 0,
  error text,
  created_at timestamptz not null default now(),
  started_at timestamptz,
  cancel_requested_at timestamptz,
  finished_at timestamptz,
  foreign key (workspace_id, table_id) references tables (workspace_id, id) on delete cascade
);
-- One going run per column: a second request is refused, and a row add wakes the one going.
create unique index column_runs_active on column_runs (column_id) where status in ('queued', 'running');
create index column_runs_table on column_runs (table_id, created_at desc);
