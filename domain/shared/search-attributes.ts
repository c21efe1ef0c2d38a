/**
 * Custom search attributes the service's workflows set, so operators can filter in the
 * Temporal Web UI. The local stack registers them at start; temporal-docker registers the same.
 */
export const searchAttributes = {
  WorkspaceId: 'Keyword',
  SenderAccountId: 'Keyword',
  StepKind: 'Keyword',
  StepStatus: 'Keyword',
  SequenceId: 'Keyword',
  ContactId: 'Keyword',
  CreditHoldStatus: 'Keyword',
  /** Why a step ended without succeeding (the failure vocabulary), to find every claim_expired, say. */
  StepErrorCode: 'Keyword',
  /** A column run's status and percent done (the dev server allows 10 Keyword attributes; this is the 10th). */
  ColumnRunStatus: 'Keyword',
  ColumnRunProgress: 'Int',
} as const;

export type SearchAttributeName = keyof typeof searchAttributes;
