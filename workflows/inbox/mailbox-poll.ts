/**
 * One IMAP mailbox read on a schedule (id `inbox-mailbox/<mailbox id>`). Postgres holds the
 * cursor (UIDVALIDITY and last UID), so the workflow only decides when to read: every
 * `poll_seconds`, at once when more is waiting, or when asked (a signal). It ends when the
 * mailbox is deleted or switched off, and continues as new before its history grows long.
 */
import { ActivityFailure, condition, continueAsNew, proxyActivities, setHandler } from '@temporalio/workflow';
import { workflowNow } from '../shared/clock.js';
import type { InboxActivities } from '../../activities/inbox/inbox.js';
import {
  mailboxPollStateQuery,
  pollMailboxNowSignal,
  type MailboxPollInput,
  type MailboxPollResult,
  type MailboxPollView,
} from './mailbox-poll.contract.js';

const { pollMailbox } = proxyActivities<InboxActivities>({
  startToCloseTimeout: '3 minutes',
  retry: { initialInterval: '10 seconds', backoffCoefficient: 2, maximumInterval: '2 minutes', maximumAttempts: 3 },
});

export async function mailboxPollWorkflow(input: MailboxPollInput): Promise<'gone' | 'disabled'> {
  const pollsPerRun = input.pollsPerRun ?? 200;
  let wake = false;
  const view: MailboxPollView = {
    mailboxId: input.mailboxId,
    polls: 0,
    lastPollAt: null,
    last: null,
    waiting: 'polling',
    nextPollAt: null,
  };
  setHandler(pollMailboxNowSignal, () => void (wake = true));
  setHandler(mailboxPollStateQuery, () => view);

  for (;;) {
    wake = false;
    view.waiting = 'polling';
    let result: MailboxPollResult | null = null;
    try {
      result = await pollMailbox({ mailboxId: input.mailboxId });
    } catch (err) {
      // The database was out of reach through every retry: wait the usual interval and read again.
      if (!(err instanceof ActivityFailure)) throw err;
    }
    view.polls++;
    view.lastPollAt = workflowNow().toISOString();
    view.last = result;
    if (result?.state === 'gone' || result?.state === 'disabled') {
      view.waiting = 'stopped';
      return result.state;
    }
    if (view.polls >= pollsPerRun) await continueAsNew<typeof mailboxPollWorkflow>(input);
    if (result?.more) continue;
    const seconds = result?.pollSeconds || 60;
    view.waiting = 'interval';
    view.nextPollAt = new Date(workflowNow().getTime() + seconds * 1000).toISOString();
    await condition(() => wake, `${seconds} seconds`);
    view.nextPollAt = null;
  }
}
