-- Chat attachments (spec 2.1, endpoint 1): a file uploaded to an assistant conversation, and its
-- text, extracted once. The upload's bytes are kept only until extraction finishes (ready or
-- failed), then set null; the pages are what every read serves.

create table chat_attachments (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  conversation_id uuid not null references assistant_conversations (id) on delete cascade,
  -- The uploader.
  member_id uuid references members (id) on delete set null,
  filename text not null,
  content_type text not null,
  kind text not null check (kind in ('pdf', 'xlsx', 'csv')),
  byte_size integer not null check (byte_size >= 0),
  content bytea,
  status text not null default 'pending' check (status in ('pending', 'ready', 'failed')),
  error text,
  -- Pages of the whole file (a spreadsheet's rows, its `Sheet:` lines included); set when ready.
  page_count integer check (page_count >= 0),
  created_at timestamptz not null default now(),
  ready_at timestamptz,
  check ((status = 'ready') = (page_count is not null)),
  check ((status = 'failed') = (error is not null))
);
create index chat_attachments_conversation on chat_attachments (conversation_id, created_at, id);
create index chat_attachments_workspace on chat_attachments (workspace_id);

-- One row per page (per row for a spreadsheet), written once in the transaction that makes the
-- attachment ready. `text_bytes` lets a read stop at its byte size without reading the text.
create table chat_attachment_pages (
  attachment_id uuid not null references chat_attachments (id) on delete cascade,
  page_index integer not null check (page_index >= 0),
  text text not null,
  text_bytes integer generated always as (octet_length(text)) stored,
  primary key (attachment_id, page_index)
);
