/** The import and write-back workflows' contract (workflows/sourcing/imports.ts). */
export interface ImportRunInput {
  importId: string;
  workspaceId: string;
  trigger: 'manual' | 'schedule';
  /** A manual run's id (made by the API); a scheduled run makes its own. */
  runId?: string;
}

export type ImportRunOutcome = { status: 'succeeded' | 'failed'; runId: string; error?: string } | { status: 'gone' };

export const importRunWorkflowId = (importId: string, runId: string) => `import-run/${importId}/${runId}`;

export interface WriteBackInput {
  writeBackId: string;
  workspaceId: string;
}

export const writeBackWorkflowId = (id: string) => `write-back/${id}`;

/** A refusal no retry fixes (a refused token, a deleted connection, an unreadable CSV): the run's error. */
export const sourcingRefusedFailure = 'sourcing_refused';
