-- Tables of rows as first shipped (spec 2.8): a table was labelled with any number of tags.
-- 009 replaces tags with folders and files these rows; keeping the two steps apart is what lets
-- a database of the tag era and a new one end the same.

create table tables (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  name text not null check (length(name) between 1 and 255),
  tags text[] not null default '{}',
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
