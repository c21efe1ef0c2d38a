/**
 * Timing constants the step workflow needs, kept apart from the zod contract in pnet.ts: a
 * workflow importing pnet.ts would rebuild every schema and the time-zone list in each new
 * workflow's sandbox (about 20 ms of CPU per step).
 */

/** How long a claim lives without a check-in from the browser running it. */
export const claimLeaseSeconds = 90;
