/**
 * The workflow's clock. Inside a workflow the SDK replaces `Date` with the time of the current
 * workflow task (recorded in history, so replay reads the same value, and a time-skipping server
 * moves it). These helpers are the one place workflows read it, so every use says so by name.
 */

/**
 * Now, as the workflow sees it: the SDK's replaced `Date` on purpose (the TypeScript SDK has no
 * other workflow-time call), never the host's clock.
 */
export function workflowNow(): Date {
  return new Date();
}

/** Milliseconds from now (workflow time) until `iso`; negative once it has passed. */
export function msUntil(iso: string): number {
  return Date.parse(iso) - workflowNow().getTime();
}
