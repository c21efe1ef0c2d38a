-- A result's duration_ms is any integer >= 0 (2.3); an int4 column refused a result past 24.8 days
-- of milliseconds with a 500, losing the report. bigint holds every safe JSON integer.
alter table browser_steps alter column duration_ms type bigint;
