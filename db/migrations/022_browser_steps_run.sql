-- The run of the step's workflow that its start created. An Update that names the run lets
-- Temporal go straight to it; one that names only the workflow id makes the server look up the
-- current run in its persistence first, on every claim and every result. Null for a step whose
-- start was lost or that predates this column: its Updates name the workflow id alone.
alter table browser_steps add column workflow_run_id text;
