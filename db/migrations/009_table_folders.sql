-- Folders replace tags (spec 2.8, endpoint 9), and the rest of a table: columns, rows and their
-- cells, saved views and column templates. The tags step at the end files the tag-era rows.

-- Nested folders; a folder's parent is in the same workspace (the composite key says so).
create table table_folders (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  parent_id uuid,
  name text not null check (length(name) between 1 and 255),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (workspace_id, id),
  foreign key (workspace_id, parent_id) references table_folders (workspace_id, id)
);
-- Sibling folders have distinct names, whatever their case.
create unique index table_folders_sibling_name
  on table_folders (workspace_id, coalesce(parent_id, '00000000-0000-0000-0000-000000000000'), lower(name));
create index table_folders_parent on table_folders (parent_id);

alter table tables
  add column if not exists description text,
  add column if not exists owner_member_id uuid references members (id) on delete set null,
  add column if not exists folder_id uuid,
  add column if not exists auto_run boolean not null default false,
  add column if not exists keep_existing_results boolean not null default true,
  add column if not exists ai_made boolean not null default false,
  add column if not exists shared_as_template boolean not null default false,
  -- Kept in the same transaction as every row insert and delete.
  add column if not exists row_count integer not null default 0 check (row_count >= 0),
  add column if not exists archived_at timestamptz,
  -- Soft delete: a deleted table reads as 404 and is listed only in the trash, until restored.
  add column if not exists deleted_at timestamptz,
  -- The tags a table carried when folders replaced them.
  add column if not exists former_tags text[] not null default '{}',
  -- Carried more than one tag, so it could not be filed by itself (endpoint 9); moving it files it.
  add column if not exists needs_filing boolean not null default false;
alter table tables add constraint tables_workspace_id_id unique (workspace_id, id);
alter table tables add constraint tables_folder
  foreign key (workspace_id, folder_id) references table_folders (workspace_id, id);
create index tables_workspace on tables (workspace_id, folder_id) where deleted_at is null;
create index tables_unfiled on tables (workspace_id) where needs_filing and deleted_at is null;

-- Favourite and last view belong to the person, not the table.
create table table_member_marks (
  table_id uuid not null references tables (id) on delete cascade,
  member_id uuid not null references members (id) on delete cascade,
  is_favorite boolean not null default false,
  last_viewed_at timestamptz,
  primary key (table_id, member_id)
);

-- Column kinds are rows, not a check constraint, so a later kind (enrichment, agent) is an insert.
create table column_kinds (
  kind text primary key,
  -- Computed kinds keep one cell record per row in table_cells; input kinds keep values in the row.
  computed boolean not null
);
insert into column_kinds (kind, computed) values ('input', false), ('formula', true);

create table table_columns (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null,
  table_id uuid not null,
  name text not null check (length(name) between 1 and 255),
  kind text not null references column_kinds (kind),
  -- 0..n-1 within the table, kept contiguous by every insert, move and delete.
  position integer not null check (position >= 0),
  -- The kind's settings: a formula's stored expression; later a provider's mappings.
  config jsonb not null default '{}',
  -- A fan-out output of a parent column (enrichment and agent kinds); null for a top-level column.
  parent_column_id uuid references table_columns (id) on delete cascade,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  foreign key (workspace_id, table_id) references tables (workspace_id, id) on delete cascade
);
create unique index table_columns_name on table_columns (table_id, lower(name));
create index table_columns_table on table_columns (table_id, position);

create table table_rows (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null,
  table_id uuid not null,
  -- Insertion order: the grid's order when no sort is asked for.
  seq bigint generated always as identity,
  -- Values of the input columns by column id; an absent key is an empty cell.
  cells jsonb not null default '{}',
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  foreign key (workspace_id, table_id) references tables (workspace_id, id) on delete cascade
);
create index table_rows_order on table_rows (table_id, seq);

-- One record per row of a computed column: its state, value, error and what it cost. A run
-- moves a cell with a compare-and-set on its state.
create table table_cells (
  column_id uuid not null references table_columns (id) on delete cascade,
  row_id uuid not null references table_rows (id) on delete cascade,
  state text not null check (state in ('pending', 'running', 'done', 'error', 'skipped')),
  value jsonb,
  error text,
  cost integer not null default 0 check (cost >= 0),
  updated_at timestamptz not null default now(),
  primary key (column_id, row_id)
);
create index table_cells_row on table_cells (row_id);

create table table_views (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null,
  table_id uuid not null,
  name text not null check (length(name) between 1 and 255),
  filters jsonb not null default '[]',
  filter_mode text not null default 'all' check (filter_mode in ('all', 'any')),
  sorts jsonb not null default '[]',
  hidden_column_ids uuid[] not null default '{}',
  column_order uuid[] not null default '{}',
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  foreign key (workspace_id, table_id) references tables (workspace_id, id) on delete cascade
);
create unique index table_views_name on table_views (table_id, lower(name));

-- A column's configuration saved for reuse on another table. A formula is kept with column
-- names, so on another table it refers to that table's columns of the same names.
create table column_templates (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  name text not null check (length(name) between 1 and 255),
  column_name text not null check (length(column_name) between 1 and 255),
  kind text not null references column_kinds (kind),
  config jsonb not null default '{}',
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create unique index column_templates_name on column_templates (workspace_id, lower(name));

-- Grid filters and sorts read any cell as text or, when it reads as one, as a number. Only ASCII
-- digits and spaces count (a locale's other digits would not cast), and the exponent is bounded,
-- so every match casts to numeric without error.
create function cell_text(v jsonb) returns text language sql immutable parallel safe
  as $$ select case when v is null or jsonb_typeof(v) = 'null' then null else v #>> '{}' end $$;
create function cell_number(v jsonb) returns numeric language sql immutable parallel safe
  as $$ select case
    when jsonb_typeof(v) = 'number' then (v #>> '{}')::numeric
    when jsonb_typeof(v) = 'string' and (v #>> '{}') ~ '^ *[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]{1,3})? *$'
      then btrim(v #>> '{}')::numeric
  end $$;

-- Folders replace tags. A table with exactly one tag is filed into a top-level folder of that
-- name (one folder per name and workspace); one with more tags stays at the top level, keeps
-- them as former_tags and waits to be filed (endpoint 9). Blank tags and repeats do not count.
create temporary table tag_era on commit drop as
select t.id, t.workspace_id,
       array(
         select tag from (
           select left(btrim(regexp_replace(raw, '[[:cntrl:]]', '', 'g')), 255) as tag, min(n) as first
           from unnest(t.tags) with ordinality as u (raw, n)
           group by 1
         ) cleaned
         where tag <> ''
         order by first
       ) as tags
from tables t;

insert into table_folders (workspace_id, name)
select distinct on (workspace_id, lower(tags[1])) workspace_id, tags[1]
from tag_era
where cardinality(tags) = 1
order by workspace_id, lower(tags[1]), tags[1];

update tables t
set former_tags = e.tags,
    needs_filing = cardinality(e.tags) > 1,
    folder_id = case when cardinality(e.tags) = 1 then (
      select f.id from table_folders f
      where f.workspace_id = t.workspace_id and f.parent_id is null and lower(f.name) = lower(e.tags[1])
    ) end
from tag_era e
where e.id = t.id and cardinality(e.tags) > 0;

alter table tables drop column tags;
