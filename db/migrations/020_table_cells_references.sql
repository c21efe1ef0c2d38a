-- A computed cell's references to its row and its column, checked once per statement instead of
-- once per cell.
--
-- A foreign key checks each new cell with a query of its own (an index lookup and a row lock in a
-- row-level trigger): for a formula column computed over 100,000 rows that is 200,000 checks,
-- over half the time Postgres spent writing the column (bench:tables, Postgres CPU for that
-- step: 2.7 s with the foreign keys, 1.3 s with these triggers and the pass's other changes).
-- The same rules are kept here as statement-level triggers over the statement's new cells: every
-- referenced row and column must exist and is locked FOR KEY SHARE, as a foreign key locks it, so
-- a row or column deleted by another transaction meanwhile fails the statement and one not yet
-- deleted cannot be until this transaction ends; deleting a row or a column deletes its cells
-- (the cascade); and the ids a cell refers to never change. The service runs at read committed,
-- where the cascade's delete sees every cell committed before it; at a stricter isolation a
-- delete could miss cells committed after its snapshot, so the cascade refuses to run there (a
-- foreign key would raise a serialization failure instead).

alter table table_cells drop constraint table_cells_column_id_fkey;
alter table table_cells drop constraint table_cells_row_id_fkey;

create function table_cells_check_references() returns trigger language plpgsql as $$
declare
  ids uuid[];
  found bigint;
begin
  -- = any(ids): an index lookup per id whatever the statement's size (a join could be planned
  -- once for a small statement and kept, or as a scan of every row of every table).
  ids := array(select distinct column_id from new_cells);
  select count(*) into found from (select 1 from table_columns c where c.id = any(ids) for key share of c) x;
  if found < cardinality(ids) then
    raise exception 'insert or update on table "table_cells" violates foreign key constraint "table_cells_column_id_fkey"'
      using errcode = 'foreign_key_violation', detail = 'A cell refers to a column that does not exist.';
  end if;
  ids := array(select distinct row_id from new_cells);
  select count(*) into found from (select 1 from table_rows r where r.id = any(ids) for key share of r) x;
  if found < cardinality(ids) then
    raise exception 'insert or update on table "table_cells" violates foreign key constraint "table_cells_row_id_fkey"'
      using errcode = 'foreign_key_violation', detail = 'A cell refers to a row that does not exist.';
  end if;
  return null;
end $$;

create trigger table_cells_references after insert on table_cells
  referencing new table as new_cells for each statement execute function table_cells_check_references();

-- A cell keeps its row and column; a row or column keeps its id.
create function refuse_id_change() returns trigger language plpgsql as $$
begin
  raise exception '%', tg_argv[0] using errcode = 'foreign_key_violation';
end $$;

create trigger table_cells_keys before update of column_id, row_id on table_cells for each row
  when (old.column_id is distinct from new.column_id or old.row_id is distinct from new.row_id)
  execute function refuse_id_change('A cell keeps its column and its row.');
create trigger table_rows_id before update of id on table_rows for each row
  when (old.id is distinct from new.id) execute function refuse_id_change('A row keeps its id.');
create trigger table_columns_id before update of id on table_columns for each row
  when (old.id is distinct from new.id) execute function refuse_id_change('A column keeps its id.');

-- The cascades.
create function table_cells_cascade_check() returns void language plpgsql as $$
begin
  if current_setting('transaction_isolation') <> 'read committed' then
    raise exception 'Rows and columns of tables are deleted at read committed isolation (their cells go with them).'
      using errcode = 'serialization_failure';
  end if;
end $$;

create function table_rows_delete_cells() returns trigger language plpgsql as $$
begin
  perform table_cells_cascade_check();
  delete from table_cells c where c.row_id = any(array(select id from old_rows));
  return null;
end $$;

create trigger table_rows_cells after delete on table_rows
  referencing old table as old_rows for each statement execute function table_rows_delete_cells();

create function table_columns_delete_cells() returns trigger language plpgsql as $$
begin
  perform table_cells_cascade_check();
  delete from table_cells c where c.column_id = any(array(select id from old_columns));
  return null;
end $$;

create trigger table_columns_cells after delete on table_columns
  referencing old table as old_columns for each statement execute function table_columns_delete_cells();
