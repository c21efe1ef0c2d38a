-- The in-app assistant (spec 2.11, 2.12): conversations and their messages, each assistant
-- message's stream parts as they were sent, the model steps a turn has finished (so a retried
-- turn never asks the model again for a step it already has), the cards it proposed, the grants
-- people gave, the settings, and the activity log of every decision and outcome.

create table assistant_settings (
  workspace_id uuid primary key references workspaces (id) on delete cascade,
  approval_threshold_credits integer not null default 25 check (approval_threshold_credits between 0 and 100000),
  default_granted_verbs text[] not null default '{}',
  updated_at timestamptz not null default now()
);

create table assistant_conversations (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  member_id uuid references members (id) on delete set null,
  title text not null,
  archived_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index assistant_conversations_member on assistant_conversations (workspace_id, member_id, updated_at desc);

create table assistant_messages (
  id uuid primary key default gen_random_uuid(),
  -- Orders a conversation's messages even when two share a timestamp.
  position bigint generated always as identity,
  workspace_id uuid not null references workspaces (id) on delete cascade,
  conversation_id uuid not null references assistant_conversations (id) on delete cascade,
  role text not null check (role in ('user', 'assistant')),
  member_id uuid references members (id) on delete set null,
  content text not null default '',
  status text not null check (status in ('streaming', 'complete', 'failed')),
  error text,
  model_key text,
  created_at timestamptz not null default now(),
  completed_at timestamptz
);
create index assistant_messages_conversation on assistant_messages (conversation_id, position);

-- One row per stream event of an assistant message, in the order sent; `seq` is the SSE event id.
create table assistant_message_parts (
  message_id uuid not null references assistant_messages (id) on delete cascade,
  seq integer not null,
  part jsonb not null,
  created_at timestamptz not null default now(),
  primary key (message_id, seq)
);

-- A model step the turn finished: its text and tool calls, written with its last parts.
create table assistant_model_steps (
  message_id uuid not null references assistant_messages (id) on delete cascade,
  step integer not null,
  result jsonb not null,
  created_at timestamptz not null default now(),
  primary key (message_id, step)
);

create table assistant_proposals (
  id uuid primary key default gen_random_uuid(),
  position bigint generated always as identity,
  workspace_id uuid not null references workspaces (id) on delete cascade,
  conversation_id uuid references assistant_conversations (id) on delete cascade,
  message_id uuid references assistant_messages (id) on delete cascade,
  -- The model's tool call that raised the card: a retried turn finds its card instead of a second one.
  tool_call_id text,
  member_id uuid references members (id) on delete set null,
  origin text not null,
  kind text not null check (kind in ('verb', 'tool')),
  verb text not null,
  input jsonb not null,
  batch_id uuid,
  verb_label text not null,
  summary text not null,
  detail jsonb,
  price_credits integer check (price_credits >= 0),
  price_per text not null default 'call' check (price_per in ('call', 'day')),
  expected_credits integer,
  charged_credits integer,
  price_label text not null,
  approve_label text not null,
  price_aside text not null,
  destructive boolean not null default false,
  loss text,
  sends boolean not null default false,
  status text not null default 'pending'
    check (status in ('pending', 'applying', 'applied', 'failed', 'dismissed', 'expired')),
  decision text check (decision in ('approved', 'automatic', 'rejected')),
  decision_key text,
  scope text check (scope in ('once', 'thread', 'project_me', 'project_all')),
  proposed_at timestamptz not null default now(),
  expires_at timestamptz not null,
  decided_at timestamptz,
  decided_by_member_id uuid references members (id) on delete set null,
  decided_by_display_name text,
  applied_result jsonb,
  error text,
  source_column_id uuid,
  source_record_id uuid,
  runs_column_id uuid,
  prepared_column jsonb,
  hold_id uuid references credit_holds (id),
  unique (message_id, tool_call_id)
);
create index assistant_proposals_workspace on assistant_proposals (workspace_id, position);
create index assistant_proposals_conversation on assistant_proposals (conversation_id, position);

create table assistant_grants (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  verb text not null,
  scope text not null check (scope in ('thread', 'project_me', 'project_all')),
  -- `thread` covers this conversation; `project_me` this member's conversations; `project_all` everyone's.
  conversation_id uuid references assistant_conversations (id) on delete cascade,
  member_id uuid references members (id) on delete cascade,
  granted_by_member_id uuid references members (id) on delete set null,
  proposal_id uuid references assistant_proposals (id) on delete set null,
  created_at timestamptz not null default now(),
  revoked_at timestamptz
);
create unique index assistant_grants_live on assistant_grants
  (workspace_id, verb, scope, coalesce(conversation_id, '00000000-0000-0000-0000-000000000000'), coalesce(member_id, '00000000-0000-0000-0000-000000000000'))
  where revoked_at is null;

create table assistant_activity (
  id uuid primary key default gen_random_uuid(),
  position bigint generated always as identity,
  workspace_id uuid not null references workspaces (id) on delete cascade,
  conversation_id uuid references assistant_conversations (id) on delete cascade,
  proposal_id uuid references assistant_proposals (id) on delete cascade,
  verb text not null,
  decision text not null check (decision in ('approved', 'automatic', 'rejected', 'sent_by_person', 'not_recorded')),
  outcome text check (outcome in ('sent', 'done', 'failed', 'skipped', 'already_pending', 'stopped', 'not_sent')),
  actor_kind text not null check (actor_kind in ('user', 'api', 'system')),
  actor_member_id uuid references members (id) on delete set null,
  actor_display_name text,
  note text,
  created_at timestamptz not null default now(),
  -- One decision row and one outcome row per card, whatever retries happen.
  cause_key text not null,
  unique (workspace_id, cause_key)
);
create index assistant_activity_workspace on assistant_activity (workspace_id, position);
