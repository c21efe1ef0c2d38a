-- A whole-column pass locks the rows it writes cells for itself, so the cells' reference trigger
-- of 020 checks only their columns while the pass is on.
--
-- The pass (store/tables/cells.ts `recomputeFormulas`) reads every row it computes `for key
-- share`, in the transaction that writes their cells: the lock a foreign key would take, taken
-- while the rows are read anyway. Looking the same rows up again by id and locking them a second
-- time was about a quarter of what Postgres spent writing a formula column (docs/decisions/060).

create or replace function table_cells_check_references() returns trigger language plpgsql as $$
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
  if current_setting('app.column_pass', true) = 'on' then return null; end if;
  ids := array(select distinct row_id from new_cells);
  select count(*) into found from (select 1 from table_rows r where r.id = any(ids) for key share of r) x;
  if found < cardinality(ids) then
    raise exception 'insert or update on table "table_cells" violates foreign key constraint "table_cells_row_id_fkey"'
      using errcode = 'foreign_key_violation', detail = 'A cell refers to a row that does not exist.';
  end if;
  return null;
end $$;
