/**
 * The line on the workflow's clock (time-skipping server): the day's ceiling resets at 00:00 in
 * the sender's time zone on both sides of a daylight-saving change, working hours hold metered
 * work (not an operator's test), the gap holds the next metered step, and a held step waits.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { StepRow } from '../../store/pnet/steps.js';
import { startOptions } from '../../services/pnet/browser-step-client.js';
import { defaultLimits } from '../../domain/pnet/limits.js';
import { zonedInstant } from '../../domain/shared/zoned-time.js';
import { browserStepWorkflow } from '../../workflows/pnet/browser-step.js';
import { claimAndTell, newSenderProfile, settleAndTell, useStepTimeSkippingWorker } from '../support/pnet.js';
import { useTestStack } from '../support/test-stack.js';

const { stack, paid } = useTestStack();
const taskQueue = 'pnet-clock-test';
const temporal = useStepTimeSkippingWorker(stack, taskQueue, { housekeeping: {} });

const zone = 'America/New_York';
const allWeek = { start: '00:00', end: '00:00', days: [1, 2, 3, 4, 5, 6, 7] };

async function account(settings: { working_hours?: typeof allWeek; limits?: Record<string, number> } = {}) {
  const profileId = await newSenderProfile(stack, paid, { timezone: zone });
  const [row] = await stack.sql<{ id: string }[]>`
    update pnet_accounts set status = 'connected', connected_at = now() - interval '400 days', member_urn = ${randomUUID()},
      working_hours = ${stack.sql.json(settings.working_hours ?? allWeek)}, min_action_interval_seconds = 30,
      limits = ${stack.sql.json({ ...defaultLimits, ...settings.limits })}
    where sender_profile_id = ${profileId} returning id`;
  const [session] = await stack.sql<{ id: string }[]>`
    insert into pnet_sessions (account_id, browser_id, browser_label, extension_version) values (${row!.id}, gen_random_uuid(), 'B', '2.0.0') returning id`;
  const accountId = row!.id;

  /** Queues a follow (or an unmetered test follow) and starts its workflow. */
  async function queue(options: { metered?: boolean } = {}) {
    const [step] = await stack.sql<StepRow[]>`
      insert into browser_steps (workspace_id, account_id, kind, params, status, queued_at, metered)
      values (${paid.workspaceId}, ${accountId}, 'follow_contact', ${stack.sql.json({ kind: 'follow_contact', profile_url: 'https://pnet.example/in/x' })},
              'queued', now(), ${options.metered ?? true}) returning *`;
    return temporal.env.client.workflow.start(browserStepWorkflow, {
      ...startOptions(taskQueue, step!),
      typedSearchAttributes: [],
    });
  }
  type Handle = Awaited<ReturnType<typeof queue>>;
  /** The claim's refusal, or null when it was handed out (and then settled, freeing the account). */
  async function refusal(handle: Handle): Promise<string | null> {
    const stepId = handle.workflowId.slice('browser-step/'.length);
    try {
      const claimed = await claimAndTell(stack.sql, temporal.env, handle, {
        stepId,
        accountId,
        sessionId: session!.id,
        verifyFirst: false,
      });
      await settleAndTell(stack.sql, handle, stepId, {
        status: 'succeeded',
        claimed_at: claimed.step.claimed_at,
        duration_ms: 1,
        error_code: null,
        error_message: null,
        outcome: null,
      });
      return null;
    } catch (error) {
      return (error as Error).message;
    }
  }
  const skipGap = () => stack.sql`update pnet_accounts set next_metered_at = null where id = ${accountId}`;
  return { accountId, queue, refusal, skipGap };
}

/** Moves the workflow clock to `at` (it only moves forward). */
async function sleepUntil(at: Date) {
  const ms = at.getTime() - (await temporal.env.currentTimeMs());
  expect(ms).toBeGreaterThan(0);
  await temporal.env.sleep(ms);
}

describe('the line on the workflow clock', () => {
  it('resets the daily ceiling at local midnight on both sides of the spring-forward day', async () => {
    const a = await account({ limits: { daily_limit_follow: 1 } });
    // 2027-03-14 has 23 hours in New York: clocks go from 02:00 EST to 03:00 EDT.
    await sleepUntil(zonedInstant({ year: 2027, month: 3, day: 13 }, 23, 30, zone));
    expect(await a.refusal(await a.queue())).toBeNull();
    await a.skipGap();
    const second = await a.queue();
    expect(await a.refusal(second)).toMatch(/daily ceiling of follow/);
    await sleepUntil(zonedInstant({ year: 2027, month: 3, day: 14 }, 0, 5, zone));
    expect(await a.refusal(second)).toBeNull();
    await a.skipGap();
    const third = await a.queue();
    // 23:30 EDT on the short day is 03:30 UTC the next day: still the 14th in New York.
    await sleepUntil(zonedInstant({ year: 2027, month: 3, day: 14 }, 23, 30, zone));
    expect(await a.refusal(third)).toMatch(/daily ceiling of follow/);
    await sleepUntil(zonedInstant({ year: 2027, month: 3, day: 15 }, 0, 5, zone));
    expect(await a.refusal(third)).toBeNull();
  });

  it('holds metered work outside working hours, but not an operator’s unmetered test', async () => {
    const a = await account({ working_hours: { start: '09:00', end: '17:00', days: [1, 2, 3, 4, 5] } });
    // Saturday 2027-03-20, noon in New York.
    await sleepUntil(zonedInstant({ year: 2027, month: 3, day: 20 }, 12, 0, zone));
    const metered = await a.queue();
    expect(await a.refusal(metered)).toMatch(/Outside working hours/);
    expect(await a.refusal(await a.queue({ metered: false }))).toBeNull();
    await sleepUntil(zonedInstant({ year: 2027, month: 3, day: 22 }, 8, 59, zone));
    expect(await a.refusal(metered)).toMatch(/Outside working hours/);
    await sleepUntil(zonedInstant({ year: 2027, month: 3, day: 22 }, 9, 1, zone));
    expect(await a.refusal(metered)).toBeNull();
  });

  it('keeps the gap between metered steps, jitter included, and lets a test step skip it', async () => {
    const a = await account();
    expect(await a.refusal(await a.queue())).toBeNull();
    const next = await a.queue();
    expect(await a.refusal(next)).toMatch(/gap/);
    expect(await a.refusal(await a.queue({ metered: false }))).toBeNull();
    await temporal.env.sleep('29 seconds');
    expect(await a.refusal(next)).toMatch(/gap/);
    // The gap is 30 s plus up to half again of jitter.
    await temporal.env.sleep('17 seconds');
    expect(await a.refusal(next)).toBeNull();
  });

  it('never hands out a held step until its hold is lifted', async () => {
    const a = await account();
    const step = await a.queue();
    await stack.sql`update browser_steps set held = true where account_id = ${a.accountId}`;
    expect(await a.refusal(step)).toMatch(/not waiting for this browser/);
    await stack.sql`update browser_steps set held = false where account_id = ${a.accountId}`;
    expect(await a.refusal(step)).toBeNull();
  });
});
