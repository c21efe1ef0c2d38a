-- Column changes in the grid's change feed, and a whole column computed again as one event.
--
-- A formula column added to a 100k-row table used to log 100k cells (100 events of 1000) that
-- every subscriber then applied; logging them cost more than a third of the formula pass. A pass
-- over every row now logs one `column_recomputed` event (reload this column's cells) and the cell
-- triggers stay quiet while it runs, told so by a transaction-local setting.

alter table table_changes drop constraint table_changes_kind_check;
alter table table_changes add constraint table_changes_kind_check
  check (kind in ('rows_added', 'rows_updated', 'rows_deleted', 'cells_updated', 'columns_changed', 'column_recomputed'));

-- Columns added, changed (name, position, settings) or deleted, by table.
create function table_columns_changed() returns trigger language plpgsql as $$
declare
  change text := case tg_op when 'INSERT' then 'added' when 'UPDATE' then 'updated' else 'deleted' end;
begin
  if tg_op = 'DELETE' then
    -- A column deleted with its table: the table is gone and nobody reads its feed.
    perform table_changes_begin(array(select distinct o.table_id from old_columns o join tables t on t.id = o.table_id));
    insert into table_changes (table_id, kind, data)
    select o.table_id, 'columns_changed', json_build_object('table_id', o.table_id, 'change', change, 'column_ids', json_agg(o.id order by o.position))
    from old_columns o join tables t on t.id = o.table_id
    group by o.table_id order by o.table_id;
  else
    perform table_changes_begin(array(select distinct table_id from new_columns));
    insert into table_changes (table_id, kind, data)
    select table_id, 'columns_changed', json_build_object('table_id', table_id, 'change', change, 'column_ids', json_agg(id order by position))
    from new_columns group by table_id order by table_id;
  end if;
  return null;
end $$;

create trigger table_columns_added after insert on table_columns
  referencing new table as new_columns for each statement execute function table_columns_changed();
create trigger table_columns_updated after update on table_columns
  referencing new table as new_columns for each statement execute function table_columns_changed();
create trigger table_columns_deleted after delete on table_columns
  referencing old table as old_columns for each statement execute function table_columns_changed();

-- Called by a pass over every row of these columns (they belong to one table) after it wrote them.
create function table_column_recomputed(tbl uuid, column_ids uuid[]) returns void language plpgsql as $$
begin
  perform table_changes_begin(array[tbl]);
  insert into table_changes (table_id, kind, data)
  select tbl, 'column_recomputed', json_build_object('table_id', tbl, 'column_id', c)
  from unnest(column_ids) as c;
end $$;

-- The cell triggers of 011, quiet while a whole-column pass runs (it logs column_recomputed).
create or replace function table_cells_added() returns trigger language plpgsql as $$
begin
  if current_setting('app.column_pass', true) = 'on' then return null; end if;
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

create or replace function table_cells_updated() returns trigger language plpgsql as $$
begin
  if current_setting('app.column_pass', true) = 'on' then return null; end if;
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
