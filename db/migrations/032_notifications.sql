-- Notifications (issue 21): the workspace event outbox, notification rules and member
-- preferences, outbound webhook endpoints, the team-chat connection, and one delivery row per
-- (event, channel) with every attempt recorded.
--
-- Events are written by store functions in the same transaction as the change that causes them
-- (store/notifications/outbox.ts); a dispatcher starts one delivery workflow per event after
-- commit and marks the event dispatched. Secrets (webhook signing secrets, the team-chat bot token,
-- PKCE verifiers) are sealed by integrations/secrets/sealed.ts before they reach SQL.

create table workspace_events (
  id uuid primary key default gen_random_uuid(),
  -- Commit order for the dispatcher and for "replay everything since"; never shown.
  seq bigserial not null unique,
  workspace_id uuid not null references workspaces (id) on delete cascade,
  type text not null check (type ~ '^[a-z_]+(\.[a-z_]+)+$'),
  payload jsonb not null check (jsonb_typeof(payload) = 'object'),
  occurred_at timestamptz not null default now(),
  -- Set once the event's delivery workflow has been started (compare-and-set from null).
  dispatched_at timestamptz
);
create index workspace_events_undispatched on workspace_events (seq) where dispatched_at is null;
create index workspace_events_workspace on workspace_events (workspace_id, occurred_at, id);

-- Wake the dispatcher as soon as an event commits (it also polls, so a lost notification only
-- delays). NOTIFY is delivered at commit, never for a rolled-back transaction.
create function workspace_events_notify() returns trigger language plpgsql as $$
begin
  perform pg_notify('workspace_events', '');
  return null;
end $$;
create trigger workspace_events_notify after insert on workspace_events
  for each statement execute function workspace_events_notify();

-- A webhook endpoint. The signing secret (`whsec_…`) is shown once at creation and at rotation;
-- during a rotation's overlap the previous secret signs too (two `v1,` signatures).
create table webhook_endpoints (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  url text not null check (char_length(url) between 1 and 2048),
  description text not null default '' check (char_length(description) <= 500),
  -- Empty means every event type.
  event_types text[] not null default '{}',
  enabled boolean not null default true,
  -- Why it was disabled, when the service disabled it (failing for 5 days); null when a person did.
  disabled_reason text,
  secret_sealed text not null,
  previous_secret_sealed text,
  previous_secret_expires_at timestamptz,
  -- The time of the first failed attempt since the last success; null while healthy.
  failing_since timestamptz,
  created_by uuid references members (id) on delete set null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  check ((previous_secret_sealed is null) = (previous_secret_expires_at is null))
);
create index webhook_endpoints_workspace on webhook_endpoints (workspace_id, created_at, id);

-- The workspace's team-chat (Slack-shaped) connection: one per workspace. Disconnecting deletes
-- this row only; rules keep their channel ids.
create table team_chat_connections (
  workspace_id uuid primary key references workspaces (id) on delete cascade,
  team_id text not null,
  team_name text not null default '',
  bot_user_id text,
  bot_token_sealed text not null,
  scopes text[] not null default '{}',
  status text not null default 'connected' check (status in ('connected', 'reconnect_required')),
  last_error text,
  connected_by uuid references members (id) on delete set null,
  connected_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);

-- A pending OAuth authorization: the state's SHA-256 and the sealed PKCE verifier; used once.
create table team_chat_authorizations (
  state_hash bytea primary key,
  workspace_id uuid not null references workspaces (id) on delete cascade,
  member_id uuid references members (id) on delete set null,
  code_verifier_sealed text not null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null
);
create index team_chat_authorizations_expiry on team_chat_authorizations (expires_at);

-- A rule: an event type (with optional filters) routed to one channel.
create table notification_rules (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  event_type text not null,
  -- {"sequence_id": uuid, "sender_id": uuid, ...}: every key given must match the event's payload.
  filters jsonb not null default '{}'::jsonb check (jsonb_typeof(filters) = 'object'),
  channel text not null check (channel in ('email', 'team_chat', 'webhook')),
  -- email: the members to tell (empty = every member); team_chat: the channel id and its name as
  -- last seen; webhook: the endpoint.
  member_ids uuid[] not null default '{}',
  chat_channel_id text,
  chat_channel_name text,
  webhook_endpoint_id uuid references webhook_endpoints (id) on delete cascade,
  enabled boolean not null default true,
  created_by uuid references members (id) on delete set null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  check ((channel = 'team_chat') = (chat_channel_id is not null)),
  check ((channel = 'webhook') = (webhook_endpoint_id is not null))
);
create index notification_rules_workspace on notification_rules (workspace_id, event_type);

-- A member's preference for one event type: each event (the default, no row), a daily digest, or
-- muted. Critical types refuse mute and digest in the domain.
create table notification_preferences (
  workspace_id uuid not null references workspaces (id) on delete cascade,
  member_id uuid not null references members (id) on delete cascade,
  event_type text not null,
  mode text not null check (mode in ('each', 'digest', 'mute')),
  updated_at timestamptz not null default now(),
  primary key (member_id, event_type)
);

-- One delivery of one event to one channel. The id is the webhook message id (`msg_<hex>`), so a
-- retry or a replay of the same message carries the same `webhook-id`. `channel_key` makes the
-- fan-out idempotent: 'webhook:<endpoint>', 'team_chat:<channel>', 'email:<member>'.
create table notification_deliveries (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  event_id uuid not null references workspace_events (id) on delete cascade,
  channel text not null check (channel in ('email', 'team_chat', 'webhook')),
  channel_key text not null,
  rule_id uuid references notification_rules (id) on delete set null,
  webhook_endpoint_id uuid references webhook_endpoints (id) on delete cascade,
  member_id uuid references members (id) on delete cascade,
  chat_channel_id text,
  -- pending → succeeded | failed | skipped; digest_pending → digested (email digests).
  status text not null default 'pending'
    check (status in ('pending', 'succeeded', 'failed', 'skipped', 'digest_pending', 'digested')),
  -- Bumped by a replay; every attempt write is compare-and-set on (id, run).
  run integer not null default 1 check (run >= 1),
  attempt_count integer not null default 0 check (attempt_count >= 0),
  last_status_code integer,
  last_error text,
  next_attempt_at timestamptz,
  succeeded_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (event_id, channel_key)
);
create index notification_deliveries_endpoint on notification_deliveries (webhook_endpoint_id, created_at, id)
  where webhook_endpoint_id is not null;
create index notification_deliveries_workspace on notification_deliveries (workspace_id, created_at, id);
create index notification_deliveries_digest on notification_deliveries (member_id, created_at)
  where status = 'digest_pending';

-- Every attempt: when, the HTTP status (or none), how long, and the first 1,000 characters of the
-- response. (delivery_id, run, attempt) is unique so a retried activity records an attempt once.
create table notification_delivery_attempts (
  id bigserial primary key,
  delivery_id uuid not null references notification_deliveries (id) on delete cascade,
  run integer not null,
  attempt integer not null check (attempt >= 1),
  trigger text not null default 'scheduled' check (trigger in ('scheduled', 'replay')),
  attempted_at timestamptz not null default now(),
  duration_ms integer not null default 0,
  outcome text not null check (outcome in ('succeeded', 'failed', 'timeout', 'refused', 'skipped')),
  status_code integer,
  response_excerpt text check (response_excerpt is null or char_length(response_excerpt) <= 1000),
  error text,
  unique (delivery_id, run, attempt)
);
