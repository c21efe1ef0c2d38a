-- Issue 24 (decision 046): the API commits a browser's claim, result or release itself and then
-- signals the step's workflow, which owns the lease timer. `signal_due_at` marks a change the
-- workflow has not read yet: set in the transition's own statement, cleared by the workflow's read.
-- A signal lost with its API process is sent again by the sweeper, which reads this index.
alter table browser_steps add column signal_due_at timestamptz;
create index browser_steps_signal_due on browser_steps (signal_due_at) where signal_due_at is not null;
