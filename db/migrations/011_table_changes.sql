-- The grid's change feed (spec section 6). Every write of a table's rows or computed cells is
-- logged here by statement-level triggers, in the writing transaction, whichever code path wrote
-- it (single and bulk row writes, CSV import, formula recompute, column runs). One log
-- entry lists up to 1000 rows or cells of one statement, so a 100k-row import is 100 entries, and
-- each transaction sends one NOTIFY per table it changed (Postgres folds identical notifications
-- of a transaction into one). Subscribers read the log after the last id they saw.

create table table_changes (
  id bigint generated always as identity,
  table_id uuid not null,
  kind text not null check (kind in ('rows_added', 'rows_updated', 'rows_deleted', 'cells_updated')),
  -- The event's data as sent: json, not jsonb, since it is only ever read back as text and
  -- building jsonb would cost every bulk write for nothing.
  data json not null,
  created_at timestamptz not null default now(),
  -- No foreign key: a table's rows are deleted by cascade while the table row is already gone.
  primary key (table_id, id)
);
-- Retention (24 h) deletes by age.
create index table_changes_created on table_changes (created_at);

-- The newest id retention removed, per table: a subscriber whose last id is older may have
-- missed changes and is told to reload the grid.
create table table_change_horizon (
  table_id uuid primary key,
  pruned_through bigint not null
);

-- Ids must become visible in id order within a table: a reader that has seen id 11 would never
-- look back for a slower transaction's id 10. So each writer takes this lock before drawing ids
-- and holds it to commit: writes of one table are serialised from their first logged change to
-- commit (other tables are not affected). Tables are locked in order, so two statements that
-- touch several (a cascade) cannot deadlock on these locks.
create function table_changes_begin(table_ids uuid[]) returns void language plpgsql as $$
declare
  t uuid;
begin
  foreach t in array coalesce((select array_agg(distinct x order by x) from unnest(table_ids) as x), '{}') loop
    perform pg_advisory_xact_lock(hashtext('table-changes:' || t::text));
    perform pg_notify('table_changes', t::text);
  end loop;
end $$;

create function table_rows_added() returns trigger language plpgsql as $$
begin
  perform table_changes_begin(array(select distinct table_id from new_rows));
  insert into table_changes (table_id, kind, data)
  select table_id, 'rows_added', json_build_object('table_id', table_id, 'row_ids', json_agg(id order by seq))
  from (select table_id, id, seq, (row_number() over (partition by table_id order by seq) - 1) / 1000 as chunk from new_rows) x
  group by table_id, chunk
  order by table_id, chunk;
  return null;
end $$;

-- Only the input cells that changed, with their new values (null: emptied).
create function table_rows_updated() returns trigger language plpgsql as $$
begin
  perform table_changes_begin(array(
    select distinct n.table_id from new_rows n join old_rows o on o.id = n.id where n.cells is distinct from o.cells));
  insert into table_changes (table_id, kind, data)
  select table_id, 'rows_updated', json_build_object('table_id', table_id, 'rows', json_agg(json_build_object('id', id, 'cells', cells) order by seq))
  from (
    select n.table_id, n.id, n.seq,
      (select jsonb_object_agg(k, n.cells -> k)
       from (select jsonb_object_keys(n.cells) union select jsonb_object_keys(o.cells)) as keys (k)
       where (n.cells -> k) is distinct from (o.cells -> k)) as cells,
      (row_number() over (partition by n.table_id order by n.seq) - 1) / 1000 as chunk
    from new_rows n join old_rows o on o.id = n.id
    where n.cells is distinct from o.cells
  ) x
  group by table_id, chunk
  order by table_id, chunk;
  return null;
end $$;

create function table_rows_deleted() returns trigger language plpgsql as $$
begin
  perform table_changes_begin(array(select distinct table_id from old_rows));
  insert into table_changes (table_id, kind, data)
  select table_id, 'rows_deleted', json_build_object('table_id', table_id, 'row_ids', json_agg(id order by seq))
  from (select table_id, id, seq, (row_number() over (partition by table_id order by seq) - 1) / 1000 as chunk from old_rows) x
  group by table_id, chunk
  order by table_id, chunk;
  return null;
end $$;

-- Computed cells as they are now. A cell deleted goes with its row (rows_deleted) or its column,
-- so deletes are not logged; an update that leaves a cell as it was is not logged either. The
-- table comes from the column (a small table) and cells are listed by row id: joining each cell
-- to its row for the grid's order would cost a formula pass more than the rest of the logging.
create function table_cells_added() returns trigger language plpgsql as $$
begin
  perform table_changes_begin(array(select c.table_id from table_columns c where c.id in (select column_id from new_cells)));
  insert into table_changes (table_id, kind, data)
  select table_id, 'cells_updated', json_build_object('table_id', table_id, 'cells', json_agg(cell order by row_id, column_id))
  from (
    select c.table_id, n.row_id, n.column_id,
      json_build_object('row_id', n.row_id, 'column_id', n.column_id, 'state', n.state, 'value', n.value, 'error', n.error, 'cost', n.cost) as cell,
      (row_number() over (partition by c.table_id order by n.row_id, n.column_id) - 1) / 1000 as chunk
    from new_cells n join table_columns c on c.id = n.column_id
  ) x
  group by table_id, chunk
  order by table_id, chunk;
  return null;
end $$;

create function table_cells_updated() returns trigger language plpgsql as $$
begin
  -- Locks (and notifies) a table whose cells were rewritten unchanged too: cheaper than comparing twice.
  perform table_changes_begin(array(select c.table_id from table_columns c where c.id in (select column_id from new_cells)));
  insert into table_changes (table_id, kind, data)
  select table_id, 'cells_updated', json_build_object('table_id', table_id, 'cells', json_agg(cell order by row_id, column_id))
  from (
    select c.table_id, n.row_id, n.column_id,
      json_build_object('row_id', n.row_id, 'column_id', n.column_id, 'state', n.state, 'value', n.value, 'error', n.error, 'cost', n.cost) as cell,
      (row_number() over (partition by c.table_id order by n.row_id, n.column_id) - 1) / 1000 as chunk
    from new_cells n
    join old_cells o on o.column_id = n.column_id and o.row_id = n.row_id
    join table_columns c on c.id = n.column_id
    where (n.state, n.value, n.error, n.cost) is distinct from (o.state, o.value, o.error, o.cost)
  ) x
  group by table_id, chunk
  order by table_id, chunk;
  return null;
end $$;

create trigger table_rows_added after insert on table_rows
  referencing new table as new_rows for each statement execute function table_rows_added();
create trigger table_rows_updated after update on table_rows
  referencing old table as old_rows new table as new_rows for each statement execute function table_rows_updated();
create trigger table_rows_deleted after delete on table_rows
  referencing old table as old_rows for each statement execute function table_rows_deleted();
create trigger table_cells_added after insert on table_cells
  referencing new table as new_cells for each statement execute function table_cells_added();
create trigger table_cells_updated after update on table_cells
  referencing old table as old_cells new table as new_cells for each statement execute function table_cells_updated();
