/**
 * Timing constants the step workflow needs, kept apart from the zod contract in pnet.ts: a
 * workflow importing pnet.ts would rebuild every schema and the time-zone list in each new
 * workflow's sandbox (about 20 ms of CPU per step).
 */

/** How long a claim lives without a check-in from the browser running it. */
export const claimLeaseSeconds = 90;

/**
 * How late a claim's lease timer may be before someone other than its workflow lapses the claim
 * (the account's next claim asking, or the step-signal sweeper): long enough that a timer on a
 * working worker always comes first, short enough to hand the step out again well within the
 * lease plus 15 s.
 */
export const overdueClaimGraceSeconds = 5;
