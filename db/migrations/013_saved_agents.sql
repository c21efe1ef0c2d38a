-- Saved agents (spec 2.4, 2.16): a prompt template over named inputs, output fields, settings and
-- reach, kept per workspace with a version bumped on every edit. Examples with expected outputs
-- train it; a deployed agent is an `agent` column whose cells a research run fills, one Temporal
-- workflow per run (agent-run/<column>/<row>, agent-run/<training run>/<example>).

insert into column_kinds (kind, computed) values ('agent', true) on conflict (kind) do nothing;

create table saved_agents (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  name text not null check (length(name) between 1 and 255),
  description text,
  -- {segments: [...]}: text, input_ref (by input id) and context_ref segments.
  prompt jsonb not null,
  -- [{id, name, description}]: ids are stable, so renaming an input never rewrites the prompt.
  inputs jsonb not null default '[]',
  output_fields jsonb not null default '[]',
  settings jsonb not null,
  reach text not null check (reach in ('none', 'mcp', 'web')),
  mcp_servers jsonb not null default '[]',
  version integer not null default 1 check (version >= 1),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (workspace_id, id)
);
create index saved_agents_workspace on saved_agents (workspace_id, updated_at desc);

create table saved_agent_examples (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null,
  agent_id uuid not null,
  label text,
  -- Input values by input id, and the expected value by output field key.
  inputs jsonb not null default '{}',
  expected jsonb not null default '{}',
  created_at timestamptz not null default now(),
  foreign key (workspace_id, agent_id) references saved_agents (workspace_id, id) on delete cascade
);
create index saved_agent_examples_agent on saved_agent_examples (agent_id, created_at);

create table agent_training_runs (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null,
  agent_id uuid not null,
  agent_version integer not null,
  status text not null default 'running' check (status in ('running', 'completed', 'failed')),
  -- Per-field agreement once scored: [{key, compared, exact, normalised, rate}].
  fields jsonb,
  overall_rate double precision,
  error text,
  created_at timestamptz not null default now(),
  finished_at timestamptz,
  foreign key (workspace_id, agent_id) references saved_agents (workspace_id, id) on delete cascade
);
create index agent_training_runs_agent on agent_training_runs (agent_id, created_at desc);

-- One research run: on a table row (its agent column's cells) or on a training example. The
-- agent it ran is kept as it was, so an edit after the start never changes a run under way.
create table agent_runs (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  agent_id uuid,
  agent_version integer not null,
  agent jsonb not null,
  target text not null check (target in ('cell', 'example')),
  table_id uuid,
  column_id uuid references table_columns (id) on delete cascade,
  row_id uuid references table_rows (id) on delete cascade,
  training_run_id uuid references agent_training_runs (id) on delete cascade,
  example_id uuid references saved_agent_examples (id) on delete set null,
  -- Input values by input id for an example; a cell run reads its row when it starts.
  inputs jsonb not null default '{}',
  use_row_context boolean not null default false,
  -- Filled when the run starts: the prompt as the model reads it, where research starts, and the
  -- attached MCP servers' tools as listed then.
  prompt text,
  start_url text,
  mcp_tools jsonb not null default '[]',
  status text not null default 'queued' check (status in ('queued', 'running', 'completed', 'failed', 'cancelled')),
  billed_reach text check (billed_reach in ('none', 'mcp', 'web')),
  price_credits integer not null default 0,
  credits_charged integer not null default 0,
  result jsonb,
  error text,
  model_key text,
  workflow_id text not null,
  created_at timestamptz not null default now(),
  started_at timestamptz,
  finished_at timestamptz,
  check ((target = 'cell') = (column_id is not null and row_id is not null))
);
create index agent_runs_cell on agent_runs (column_id, row_id, created_at desc) where target = 'cell';
-- One going run per cell: a second request for the same row is refused until it ends.
create unique index agent_runs_active_cell on agent_runs (column_id, row_id) where target = 'cell' and status in ('queued', 'running');
create index agent_runs_training on agent_runs (training_run_id) where target = 'example';
create index agent_runs_workspace on agent_runs (workspace_id, created_at desc);

-- Each step of a run's research loop; (run, n) is unique, so a retried activity records it once.
create table agent_run_steps (
  run_id uuid not null references agent_runs (id) on delete cascade,
  n integer not null check (n >= 0),
  action text not null check (action in ('search', 'fetch_page', 'map', 'scrape', 'crawl', 'mcp_tool', 'workspace_action',
    'find_work_email', 'read_pnet_profile', 'find_people_at_company', 'finish')),
  detail text not null,
  duration_ms integer not null check (duration_ms >= 0),
  observation text not null,
  outcome text not null check (outcome in ('completed', 'failed', 'refused')),
  thought text,
  created_at timestamptz not null default now(),
  primary key (run_id, n)
);
