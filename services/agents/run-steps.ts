/**
 * What every step of a research run shares (services/agents/agent-run.ts, agent-tools.ts,
 * profile-reads.ts): the run it works on must be running, and a step is recorded once per
 * (run, n), so a retried activity finds the step it recorded before.
 */
import type { Db } from '../../db/sql.js';
import { clippedStep } from '../../domain/agents/agent-run.js';
import { nonRetryable } from '../../domain/shared/errors.js';
import {
  findRunStep,
  insertRunStep,
  loadAgentRun,
  type AgentRunRecord,
  type NewRunStep,
  type RecordedStep,
} from '../../store/agents/agent-runs.js';

/** The run a step works on; one no longer running (ended, or gone with its row or column) stops the workflow's retries. */
export async function runningRun(db: Db, runId: string): Promise<AgentRunRecord> {
  const run = await loadAgentRun(db, runId);
  if (!run || run.status !== 'running') throw nonRetryable('The run is not running.', 'agent_run_gone');
  return run;
}

/** Records step `n` (once: a retry keeps the first) and answers it as stored. */
export async function recordStep(db: Db, runId: string, step: NewRunStep): Promise<RecordedStep> {
  await insertRunStep(db, runId, clippedStep(step));
  const stored = await findRunStep(db, runId, step.n);
  // The run's record went with its row or column while the step ran.
  if (!stored) throw nonRetryable('The run is gone: its row or column was deleted.', 'agent_run_gone');
  return stored;
}
