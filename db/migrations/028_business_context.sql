-- AI business-context documents (spec 2.15, 3.3, 8; issue 18): files a workspace gives the
-- assistant so its prompts know what the workspace sells. The upload's bytes are kept only until
-- processing settles (ready or failed), then set null; the summary is what prompts read.
-- `run` counts processing runs: a re-read bumps it and empties `steps`, and every write a run
-- makes is compare-and-set on (status, run), so a worker killed at any point finishes a
-- document exactly once and a stale run never writes over a newer one.

create table business_documents (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  source text not null default 'upload' check (source in ('upload', 'cloud_drive')),
  status text not null default 'pending' check (status in ('pending', 'processing', 'ready', 'failed')),
  error text,
  title text not null check (char_length(title) between 1 and 255),
  filename text not null,
  content_type text not null,
  size_bytes integer not null check (size_bytes >= 0),
  content bytea,
  summary text check (summary is null or char_length(summary) <= 2000),
  summary_edited boolean not null default false,
  summary_generated_at timestamptz,
  -- 'model:<key>' or 'local-extractive'; null while there is no generated summary.
  summary_source text,
  included_in_context boolean not null default true,
  drive_file_id text,
  drive_web_view_link text,
  steps jsonb not null default '[]'::jsonb check (jsonb_typeof(steps) = 'array' and jsonb_array_length(steps) <= 40),
  run integer not null default 1 check (run >= 1),
  -- Whether the current run should replace an edited summary (a re-read asked for it).
  regenerate_summary boolean not null default false,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  check ((status = 'failed') = (error is not null))
);
create index business_documents_workspace on business_documents (workspace_id, created_at, id);

-- The text extracted from a document, in chunks, replaced by each run in the transaction that
-- makes it ready.
create table business_document_chunks (
  document_id uuid not null references business_documents (id) on delete cascade,
  chunk_index integer not null check (chunk_index >= 0),
  text text not null,
  primary key (document_id, chunk_index)
);
