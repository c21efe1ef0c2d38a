-- The outbound agent (spec 2.6) and its training sessions (2.5, 3.2).
-- An agent is versioned: every prompt change inserts a row of outbound_agent_versions and moves
-- outbound_agents.version, so a message records the version that wrote it and a training session
-- knows the version it started from. Messages are keyed (conversation, write_key) so a retried
-- write finds the message it already stored instead of writing (and charging) a second one.

create table outbound_agents (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  name text not null check (length(name) between 1 and 255),
  version integer not null default 1 check (version >= 1),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (workspace_id, id)
);
create index outbound_agents_workspace on outbound_agents (workspace_id, created_at desc);

create table outbound_agent_versions (
  agent_id uuid not null references outbound_agents (id) on delete cascade,
  version integer not null check (version >= 1),
  instructions text not null default '',
  -- [{slot_key, kind, prompt}], in sequence order
  slots jsonb not null,
  -- Why this version exists: 'created', 'edited', 'training:<session id>'
  origin text not null,
  created_at timestamptz not null default now(),
  primary key (agent_id, version)
);

-- Which agent writes a sequence's agent-written steps (owned here, set by PUT /sequences/{id}/agent/).
alter table sequences add column outbound_agent_id uuid references outbound_agents (id) on delete set null;

create table outbound_conversations (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  agent_id uuid not null references outbound_agents (id) on delete cascade,
  contact_key text not null check (length(contact_key) between 1 and 255),
  company_key text not null default '',
  subject_key text not null default '',
  sources text[] not null default '{}',
  research_brief jsonb not null default '[]',
  researched_at timestamptz,
  last_turn_at timestamptz,
  created_at timestamptz not null default now(),
  unique (agent_id, contact_key)
);

create table outbound_messages (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  conversation_id uuid not null references outbound_conversations (id) on delete cascade,
  -- The slot key for a sequence step; unique per conversation, the idempotency key of a write.
  write_key text not null,
  -- Each try of a write that failed gets a new attempt number, so its credit hold has a cause key of its own.
  attempt integer not null default 1,
  agent_version integer not null,
  angle text not null default '',
  slot_key text not null,
  kind text not null check (kind in ('email', 'pnet_message', 'connection_note')),
  subject text,
  body text not null default '',
  generated_subject text,
  generated_body text not null default '',
  reasoning text not null default '',
  facts_used text[] not null default '{}',
  findings jsonb not null default '[]',
  judge_verdict jsonb not null default '{}',
  confidence text not null default 'low' check (confidence in ('high', 'medium', 'low')),
  confidence_score integer not null default 0,
  confident boolean not null default false,
  insufficient_data boolean not null default false,
  is_preview boolean not null default false,
  opens_thread boolean not null default false,
  model_key text not null default '',
  reach text not null default 'none' check (reach in ('none', 'mcp', 'web')),
  price_tenths integer not null default 0 check (price_tenths >= 0),
  credits_charged integer not null default 0 check (credits_charged >= 0),
  quality_score integer not null default 0,
  status text not null check (status in ('writing', 'ready', 'needs_review', 'failed', 'sent')),
  error text,
  created_at timestamptz not null default now(),
  sent_at timestamptz,
  unique (conversation_id, write_key)
);
create index outbound_messages_conversation on outbound_messages (conversation_id, created_at, id);

-- A training session: the row's columns are what guarded statements compare (status, revision);
-- `doc` holds contacts, steps, progress, lessons and the proposal, rewritten whole under a
-- compare-and-set on revision (a session has a handful of sample contacts).
create table training_sessions (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  sequence_id uuid not null references sequences (id) on delete cascade,
  agent_id uuid not null references outbound_agents (id) on delete cascade,
  base_version integer not null,
  applied_version integer,
  revision integer not null default 1 check (revision >= 1),
  status text not null check (status in ('running', 'reviewing', 'proposing', 'proposed', 'completed', 'abandoned')),
  error text not null default '',
  note_waiting boolean not null default false,
  doc jsonb not null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index training_sessions_sequence on training_sessions (sequence_id, created_at desc);
-- One live session per sequence: a second start while one runs is refused.
create unique index training_sessions_live on training_sessions (sequence_id)
  where status in ('running', 'reviewing', 'proposing', 'proposed');
