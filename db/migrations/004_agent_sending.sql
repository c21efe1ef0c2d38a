-- The agent sending switch (spec 2.4): a workspace may pause the agent's own sends; every change
-- is kept with its reason. The operator-wide switch lives in service_settings ('paused_everywhere').

create table agent_sending (
  workspace_id uuid primary key references workspaces (id) on delete cascade,
  paused boolean not null default false,
  changed_by text,
  changed_at timestamptz
);

create table agent_sending_history (
  id bigint generated always as identity primary key,
  workspace_id uuid not null references workspaces (id) on delete cascade,
  paused boolean not null,
  reason text,
  changed_by text,
  changed_at timestamptz not null default now()
);
create index agent_sending_history_workspace on agent_sending_history (workspace_id, id desc);
