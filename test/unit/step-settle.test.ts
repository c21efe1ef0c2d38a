/**
 * A browser step's decisions (domain/pnet/settle.ts), every branch, without a server: a result
 * report's settle, the claim's gates, the lease and a lapsed claim.
 */
import { describe, expect, it } from 'vitest';
import {
  dailyCeilingRefusal,
  decideAtRest,
  decideClaim,
  decideLapse,
  decideLease,
  decideMeteredGate,
  decideSettle,
  decideUsageUnit,
  nextMeteredAt,
  sameResultAgain,
  type ClaimSnapshot,
  type SettleFacts,
  type SettleSnapshot,
} from '../../domain/pnet/settle.js';

const claimedAt = new Date('2026-06-01T12:00:00.000Z');
const claimedIso = claimedAt.toISOString();

const step = (over: Partial<SettleSnapshot> = {}): SettleSnapshot => ({
  status: 'claimed',
  kind: 'connection_request',
  claimed_at: claimedAt,
  error_code: null,
  usage_kind: 'connection_request',
  credit_hold_id: 'hold-1',
  ...over,
});
const report = (over: Partial<SettleFacts> = {}): SettleFacts => ({
  status: 'succeeded',
  claimed_at: claimedIso,
  error_code: null,
  ...over,
});

describe('settling a browser step with its result', () => {
  it('refuses a result for a step that does not exist with not_found', () => {
    expect(decideSettle(undefined, report())).toEqual({
      kind: 'refuse',
      code: 'not_found',
      message: 'Step not found.',
    });
  });

  it('records a success of the current claim: acted, hold charged, usage kept', () => {
    expect(decideSettle(step(), report())).toEqual({
      kind: 'record',
      status: 'succeeded',
      claim: 'current',
      acted: true,
      returnUsageUnit: false,
      countUsageAgain: false,
      recordCheck: false,
      recordRead: true,
      holdAtCheckpoint: false,
      credits: 'charge',
      checkpoint: false,
    });
  });

  it('takes a result that names no claim as one for the current claim', () => {
    expect(decideSettle(step(), report({ claimed_at: null }))).toMatchObject({ kind: 'record', claim: 'current' });
  });

  it.each(['failed', 'skipped'] as const)(
    'records %s for the current claim: the unit and the hold go back, nothing acted',
    (status) => {
      const decision = decideSettle(
        step(),
        report({ status, error_code: status === 'failed' ? 'selector_missing' : null }),
      );
      expect(decision).toMatchObject({
        kind: 'record',
        status,
        claim: 'current',
        acted: false,
        returnUsageUnit: true,
        credits: 'release',
        recordRead: false,
      });
    },
  );

  it('returns no unit for an unmetered step (its claim consumed none) and settles no hold for a free one', () => {
    const decision = decideSettle(
      step({ usage_kind: null, credit_hold_id: null }),
      report({ status: 'failed', error_code: 'timed_out' }),
    );
    expect(decision).toMatchObject({ kind: 'record', returnUsageUnit: false, credits: 'none' });
    expect(decideSettle(step({ credit_hold_id: null }), report())).toMatchObject({ credits: 'none' });
  });

  it('holds the account at a checkpoint the browser reports, and says so in the answer', () => {
    const decision = decideSettle(step(), report({ status: 'failed', error_code: 'blocked_checkpoint' }));
    expect(decision).toMatchObject({
      kind: 'record',
      holdAtCheckpoint: true,
      checkpoint: true,
      credits: 'release',
      returnUsageUnit: true,
    });
    expect(decideSettle(step(), report({ status: 'failed', error_code: 'not_authenticated' }))).toMatchObject({
      holdAtCheckpoint: false,
      checkpoint: false,
    });
  });

  it('records the check of a housekeeping read, and not of an outreach step', () => {
    const read = step({ kind: 'check_inbox', usage_kind: 'check_inbox', credit_hold_id: null });
    expect(decideSettle(read, report({ status: 'failed', error_code: 'navigation_failed' }))).toMatchObject({
      recordCheck: true,
      recordRead: false,
    });
    expect(decideSettle(read, report())).toMatchObject({ recordCheck: true, recordRead: true, credits: 'none' });
    expect(decideSettle(step(), report())).toMatchObject({ recordCheck: false });
  });

  it('refuses a result naming an earlier claim of a step claimed again since, with nothing recorded', () => {
    const earlier = new Date(claimedAt.getTime() - 60_000).toISOString();
    for (const status of ['succeeded', 'failed'] as const) {
      expect(decideSettle(step(), report({ status, claimed_at: earlier }))).toEqual({
        kind: 'refuse',
        code: 'conflict',
        message: 'The step is claimed again since; this result is no longer current.',
      });
    }
  });

  it('takes a late success for a read requeued when its claim lapsed, counting its unit again', () => {
    const requeued = step({
      status: 'queued',
      kind: 'check_connections',
      usage_kind: 'check_connections',
      credit_hold_id: null,
    });
    expect(decideSettle(requeued, report())).toMatchObject({
      kind: 'record',
      status: 'succeeded',
      claim: 'lapsed',
      acted: true,
      countUsageAgain: true,
      returnUsageUnit: false,
      recordCheck: true,
      credits: 'none',
    });
    // A requeued read whose claim used no unit (unmetered, or released) has none to count.
    expect(decideSettle({ ...requeued, usage_kind: null }, report())).toMatchObject({
      kind: 'record',
      countUsageAgain: false,
    });
  });

  it('takes a late success for a resuming step once: it kept its unit, and its hold is charged', () => {
    expect(decideSettle(step({ status: 'resuming' }), report({ claimed_at: null }))).toMatchObject({
      kind: 'record',
      claim: 'lapsed',
      countUsageAgain: false,
      returnUsageUnit: false,
      credits: 'charge',
    });
  });

  it('never holds the account for a checkpoint code on a late result, though the answer carries it', () => {
    const decision = decideSettle(step({ status: 'resuming' }), report({ error_code: 'blocked_checkpoint' }));
    expect(decision).toMatchObject({ kind: 'record', claim: 'lapsed', holdAtCheckpoint: false, checkpoint: true });
  });

  it('refuses a late failure or skip for a step put back in line', () => {
    for (const status of ['queued', 'resuming'] as const) {
      expect(decideSettle(step({ status }), report({ status: 'failed', error_code: 'timed_out' }))).toEqual({
        kind: 'refuse',
        code: 'conflict',
        message: `The step is ${status}; this result is no longer current.`,
      });
      expect(decideSettle(step({ status }), report({ status: 'skipped' }))).toMatchObject({
        kind: 'refuse',
        code: 'conflict',
      });
    }
  });

  it('refuses a success for a step no browser ever claimed', () => {
    expect(decideSettle(step({ status: 'queued', claimed_at: null }), report({ claimed_at: null }))).toMatchObject({
      kind: 'refuse',
      message: 'The step is queued; this result is no longer current.',
    });
  });

  it('answers the same result again for a settled step with the record as it stands', () => {
    expect(decideSettle(step({ status: 'succeeded' }), report())).toEqual({ kind: 'same_result' });
    expect(decideSettle(step({ status: 'succeeded' }), report({ claimed_at: null }))).toEqual({ kind: 'same_result' });
    expect(
      decideSettle(
        step({ status: 'failed', error_code: 'timed_out' }),
        report({ status: 'failed', error_code: 'timed_out' }),
      ),
    ).toEqual({ kind: 'same_result' });
    expect(decideSettle(step({ status: 'skipped' }), report({ status: 'skipped' }))).toEqual({ kind: 'same_result' });
  });

  it('refuses another result for a settled step: another status, code or claim', () => {
    const failed = step({ status: 'failed', error_code: 'claim_expired' });
    // The service gave up on it (claim_expired): the browser's late failure is another result.
    expect(decideSettle(failed, report({ status: 'failed', error_code: 'timed_out' }))).toMatchObject({
      kind: 'refuse',
      message: 'The step is failed; this result is no longer current.',
    });
    expect(decideSettle(failed, report())).toMatchObject({ kind: 'refuse', code: 'conflict' });
    expect(
      decideSettle(step({ status: 'succeeded' }), report({ claimed_at: new Date(0).toISOString() })),
    ).toMatchObject({ kind: 'refuse' });
    expect(decideSettle(step({ status: 'skipped' }), report())).toMatchObject({
      kind: 'refuse',
      message: 'The step is skipped; this result is no longer current.',
    });
  });

  it('refuses every result for a cancelled or rejected step, and one awaiting approval', () => {
    // A cancelled step reads as failed with error_code cancelled, yet no result repeats it.
    expect(
      sameResultAgain(
        step({ status: 'cancelled', error_code: 'cancelled' }),
        report({ status: 'failed', error_code: 'cancelled' }),
      ),
    ).toBe(false);
    expect(
      decideSettle(
        step({ status: 'cancelled', error_code: 'cancelled' }),
        report({ status: 'failed', error_code: 'cancelled' }),
      ),
    ).toMatchObject({ kind: 'refuse' });
    expect(decideSettle(step({ status: 'rejected', claimed_at: null }), report())).toMatchObject({
      kind: 'refuse',
      message: 'The step is rejected; this result is no longer current.',
    });
    expect(decideSettle(step({ status: 'awaiting_approval', claimed_at: null }), report())).toMatchObject({
      kind: 'refuse',
      code: 'conflict',
    });
  });
});

const account = { status: 'connected', checkpoint_status: 'ok', replies_failing: false };
const waiting = {
  status: 'queued' as const,
  kind: 'connection_request' as const,
  held: false,
  metered: true,
  claim_session_id: null,
  acted_at: null,
  cut_offs: 0,
  credit_round: 0,
  commit_granted_at: null,
};
const snapshot = (
  over: Partial<ClaimSnapshot> = {},
  stepOver: Partial<NonNullable<ClaimSnapshot['step']>> = {},
): ClaimSnapshot => ({
  account,
  step: { ...waiting, ...stepOver },
  running: false,
  ...over,
});
const request = { sessionId: 'session-1', verifyFirst: false };

describe('a result for a step already at rest (reportStepResult)', () => {
  it.each([
    ['claimed', 'succeeded', null],
    ['queued', 'succeeded', null],
    ['succeeded', 'succeeded', null],
    ['succeeded', 'failed', { message: 'The step is already succeeded; nothing changed.', markActed: false }],
    ['failed', 'succeeded', { message: 'The step is already failed; nothing changed.', markActed: true }],
    ['skipped', 'succeeded', { message: 'The step is already skipped; nothing changed.', markActed: false }],
    ['rejected', 'failed', { message: 'The step is already rejected; nothing changed.', markActed: false }],
    ['cancelled', 'succeeded', { message: 'The step is already cancelled; nothing changed.', markActed: false }],
    ['cancelled', 'skipped', { message: 'The step is already cancelled; nothing changed.', markActed: false }],
  ] as const)('a %s step, a %s result: %j', (status, reported, expected) => {
    const errorCode = reported === 'failed' ? 'selector_missing' : null;
    expect(
      decideAtRest(
        step({ status, error_code: status === 'failed' ? 'selector_missing' : null }),
        report({ status: reported, error_code: errorCode }),
      ),
    ).toEqual(expected);
  });

  it('lets the same failure again through to decideSettle (200 with the record), but not another failure code', () => {
    const failed = step({ status: 'failed', error_code: 'selector_missing' });
    expect(decideAtRest(failed, report({ status: 'failed', error_code: 'selector_missing' }))).toBeNull();
    expect(decideAtRest(failed, report({ status: 'failed', error_code: 'timed_out' }))).toMatchObject({
      markActed: false,
    });
  });
});

describe('claiming a step', () => {
  it('claims a waiting metered step against its kind’s ceiling, with nothing to verify', () => {
    expect(decideClaim(snapshot(), request)).toEqual({
      kind: 'claim',
      metered: true,
      usageKind: 'connection_request',
      verification: null,
    });
    // An InMail counts against the message ceiling.
    expect(decideClaim(snapshot({}, { kind: 'inmail' }), request)).toMatchObject({ usageKind: 'send_message' });
  });

  it('claims an unmetered step without a usage unit', () => {
    expect(decideClaim(snapshot({}, { metered: false }), request)).toEqual({
      kind: 'claim',
      metered: false,
      usageKind: null,
      verification: null,
    });
  });

  it('refuses a missing, disconnected or checkpointed account', () => {
    expect(decideClaim(snapshot({ account: undefined }), request)).toEqual({
      kind: 'refuse',
      code: 'not_found',
      message: 'Account not found.',
    });
    expect(decideClaim(snapshot({ account: { ...account, status: 'disconnected' } }), request)).toMatchObject({
      message: 'The account is not connected.',
    });
    expect(decideClaim(snapshot({ account: { ...account, checkpoint_status: 'checkpoint' } }), request)).toMatchObject({
      kind: 'refuse',
      code: 'conflict',
      message: 'The account is held at a checkpoint.',
    });
  });

  it('answers the same session’s claim again, verify_only when the step may have acted', () => {
    const own = { status: 'claimed' as const, claim_session_id: 'session-1' };
    expect(decideClaim(snapshot({ running: true }, own), request)).toEqual({
      kind: 'answer_again',
      verification: null,
    });
    for (const mayHaveActed of [{ acted_at: claimedAt }, { cut_offs: 1 }, { credit_round: 1 }]) {
      expect(decideClaim(snapshot({ running: true }, { ...own, ...mayHaveActed }), request)).toEqual({
        kind: 'answer_again',
        verification: { mode: 'verify_only', commit_granted_at: null },
      });
    }
  });

  it('allows one running step per account: another session’s claim is refused', () => {
    expect(decideClaim(snapshot({ running: true }), request)).toMatchObject({
      kind: 'refuse',
      message: 'Another step of this account is running.',
    });
    expect(
      decideClaim(snapshot({ running: true }, { status: 'claimed', claim_session_id: 'session-2' }), request),
    ).toMatchObject({ kind: 'refuse' });
  });

  it('refuses a step that is not waiting for this browser: gone, held, settled, or resuming for a browser that does not verify', () => {
    const notWaiting = { kind: 'refuse', code: 'conflict', message: 'The step is not waiting for this browser.' };
    expect(decideClaim(snapshot({ step: undefined }), request)).toEqual(notWaiting);
    expect(decideClaim(snapshot({}, { held: true }), request)).toEqual(notWaiting);
    expect(decideClaim(snapshot({}, { status: 'succeeded' }), request)).toEqual(notWaiting);
    expect(decideClaim(snapshot({}, { status: 'awaiting_approval' }), request)).toEqual(notWaiting);
    expect(decideClaim(snapshot({}, { status: 'resuming' }), request)).toEqual(notWaiting);
  });

  it('hands a resuming step to a verifying browser: verify_only after a granted commit, verify_then_act without', () => {
    const verifying = { ...request, verifyFirst: true };
    expect(decideClaim(snapshot({}, { status: 'resuming' }), verifying)).toMatchObject({
      kind: 'claim',
      verification: { mode: 'verify_then_act', commit_granted_at: null },
    });
    expect(decideClaim(snapshot({}, { status: 'resuming', commit_granted_at: claimedAt }), verifying)).toMatchObject({
      kind: 'claim',
      verification: { mode: 'verify_only', commit_granted_at: claimedIso },
    });
  });

  it('holds messages back while the inbox read fails, and lets other kinds through', () => {
    const failing = { account: { ...account, replies_failing: true } };
    for (const kind of ['send_message', 'inmail'] as const) {
      expect(decideClaim(snapshot(failing, { kind }), request)).toMatchObject({
        kind: 'refuse',
        message: 'The inbox read is failing; a reply may have come in unseen.',
      });
    }
    expect(decideClaim(snapshot(failing, { kind: 'check_inbox', metered: false }), request)).toMatchObject({
      kind: 'claim',
    });
    expect(decideClaim(snapshot(failing), request)).toMatchObject({ kind: 'claim' });
  });
});

describe('the gates of metered work', () => {
  const hours = { start: '09:00', end: '18:00', days: [1, 2, 3, 4, 5] };
  const monday = new Date('2026-06-01T12:00:00Z');
  const gate = { sendingStopped: false, working_hours: hours, timezone: 'UTC', next_metered_at: null };

  it('opens within working hours once the gap has passed', () => {
    expect(decideMeteredGate(gate, monday)).toEqual({ kind: 'open' });
    expect(decideMeteredGate({ ...gate, next_metered_at: monday }, monday)).toEqual({ kind: 'open' });
  });

  it('refuses while sending is paused, before anything else', () => {
    expect(decideMeteredGate({ ...gate, sendingStopped: true }, new Date('2026-06-06T12:00:00Z'))).toMatchObject({
      kind: 'refuse',
      message: 'Unattended sending is paused.',
    });
  });

  it('refuses outside working hours, in the sender’s time zone', () => {
    expect(decideMeteredGate(gate, new Date('2026-06-01T19:00:00Z'))).toMatchObject({
      message: 'Outside working hours.',
    });
    expect(decideMeteredGate(gate, new Date('2026-06-06T12:00:00Z'))).toMatchObject({
      message: 'Outside working hours.',
    });
    // 12:00 UTC is 21:00 in Tokyo.
    expect(decideMeteredGate({ ...gate, timezone: 'Asia/Tokyo' }, monday)).toMatchObject({
      kind: 'refuse',
      message: 'Outside working hours.',
    });
  });

  it('refuses until the gap since the last metered step has passed', () => {
    expect(decideMeteredGate({ ...gate, next_metered_at: new Date(monday.getTime() + 1) }, monday)).toMatchObject({
      message: 'The gap since the last step has not passed.',
    });
  });

  it('refuses at the week’s ceiling, and otherwise consumes a unit on the sender’s local date', () => {
    const ceiling = { used_this_week: 99, weekly_limit: 100, daily_limit: 20 };
    expect(decideUsageUnit({ ...ceiling, used_this_week: 100 }, 'connection_request', 'UTC', monday)).toMatchObject({
      kind: 'refuse',
      message: 'The weekly ceiling of connection_request is reached.',
    });
    expect(decideUsageUnit(ceiling, 'connection_request', 'UTC', monday)).toEqual({
      kind: 'consume',
      usageDate: '2026-06-01',
      dailyLimit: 20,
    });
    // 23:30 UTC on Monday is already Tuesday in Berlin.
    expect(
      decideUsageUnit(ceiling, 'connection_request', 'Europe/Berlin', new Date('2026-06-01T23:30:00Z')),
    ).toMatchObject({ usageDate: '2026-06-02' });
  });

  it('refuses at the day’s ceiling when no unit was consumed, or the ceiling is 0', () => {
    expect(dailyCeilingRefusal(true, 20, 'profile_view')).toBeNull();
    expect(dailyCeilingRefusal(false, 20, 'profile_view')).toMatchObject({
      kind: 'refuse',
      message: 'The daily ceiling of profile_view is reached.',
    });
    expect(dailyCeilingRefusal(true, 0, 'profile_view')).toMatchObject({ kind: 'refuse' });
  });

  it('waits the account’s gap and up to half of it again before the next metered step', () => {
    expect(nextMeteredAt(monday, 90, 0).getTime() - monday.getTime()).toBe(90_000);
    expect(nextMeteredAt(monday, 90, 0.999).getTime() - monday.getTime()).toBeCloseTo(134_955, 0);
  });
});

describe('the lease of a claim', () => {
  it('lives for 90 s after the claim, and after the latest renewal', () => {
    expect(
      decideLease({ claimed_at: claimedAt, lease_renewed_at: null }, new Date(claimedAt.getTime() + 89_999)),
    ).toEqual({
      kind: 'lives',
      leaseUntil: new Date(claimedAt.getTime() + 90_000),
    });
    expect(
      decideLease({ claimed_at: claimedAt, lease_renewed_at: null }, new Date(claimedAt.getTime() + 90_000)),
    ).toEqual({ kind: 'lapsed' });
    const renewed = new Date(claimedAt.getTime() + 60_000);
    expect(
      decideLease({ claimed_at: claimedAt, lease_renewed_at: renewed }, new Date(claimedAt.getTime() + 100_000)),
    ).toEqual({
      kind: 'lives',
      leaseUntil: new Date(renewed.getTime() + 90_000),
    });
    // A renewal older than the claim (of an earlier claim) does not extend it.
    expect(
      decideLease({ claimed_at: claimedAt, lease_renewed_at: new Date(0) }, new Date(claimedAt.getTime() + 90_000)),
    ).toEqual({ kind: 'lapsed' });
  });

  const lapsing = { kind: 'send_message' as const, cut_offs: 0, usage_kind: 'send_message', credit_hold_id: 'hold-1' };

  it('puts a housekeeping read back in line, its unit returned, however often it lapsed', () => {
    expect(
      decideLapse({ kind: 'check_inbox', cut_offs: 5, usage_kind: 'check_inbox', credit_hold_id: null }, false),
    ).toEqual({
      status: 'queued',
      errorCode: null,
      cutOffs: 6,
      backInLine: true,
      returnUsageUnit: true,
      credits: 'none',
    });
    expect(
      decideLapse({ kind: 'check_inbox', cut_offs: 0, usage_kind: null, credit_hold_id: null }, true),
    ).toMatchObject({ status: 'queued', returnUsageUnit: false });
  });

  it('brings a step that may have acted back resuming when resume is on, keeping its unit and its hold', () => {
    expect(decideLapse(lapsing, true)).toEqual({
      status: 'resuming',
      errorCode: null,
      cutOffs: 1,
      backInLine: true,
      returnUsageUnit: false,
      credits: 'none',
    });
    expect(decideLapse({ ...lapsing, cut_offs: 1 }, true)).toMatchObject({ status: 'resuming', cutOffs: 2 });
  });

  it('fails it claim_expired when resume is off, keeping the unit it may have used and returning the hold', () => {
    expect(decideLapse(lapsing, false)).toEqual({
      status: 'failed',
      errorCode: 'claim_expired',
      cutOffs: 1,
      backInLine: false,
      returnUsageUnit: false,
      credits: 'release',
    });
    expect(decideLapse({ ...lapsing, credit_hold_id: null }, false)).toMatchObject({
      status: 'failed',
      credits: 'none',
    });
  });

  it('ends it interrupted_repeatedly at the third cut-off, resume or not', () => {
    for (const resume of [true, false]) {
      expect(decideLapse({ ...lapsing, cut_offs: 2 }, resume)).toEqual({
        status: 'failed',
        errorCode: 'interrupted_repeatedly',
        cutOffs: 3,
        backInLine: false,
        returnUsageUnit: false,
        credits: 'release',
      });
    }
  });
});
