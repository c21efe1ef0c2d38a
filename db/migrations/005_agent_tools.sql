-- Which agent tools a workspace has switched on (spec 2.4, agent tool availability).
create table agent_tools (
  workspace_id uuid not null references workspaces (id) on delete cascade,
  key text not null check (key in ('find_work_email', 'read_pnet_profile')),
  enabled boolean not null,
  updated_at timestamptz not null default now(),
  primary key (workspace_id, key)
);
