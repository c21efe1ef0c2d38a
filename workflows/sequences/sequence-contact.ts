/**
 * One contact's progression through a sequence (id `sequence-contact/<sequence_id>/<contact_id>`).
 * Postgres holds where the contact stands; this workflow owns its time. It asks the advance
 * activity for the next transition and does what it says: wait on a durable timer (a wait step
 * in the sender's business hours), have the outbound agent write a message, send an email, or
 * wait for a person or a pnet step (woken by a signal; re-checked every few hours in case a
 * signal was lost). A `wake` signal (reply recorded, contact or sequence resumed, approval
 * decided, pnet step settled) makes it look again at once, so a reply stops it before its next
 * send. Why it waits and until when is in its query and its memo (`wait`), for operators.
 */
import {
  ActivityFailure,
  condition,
  continueAsNew,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  upsertMemo,
  workflowInfo,
} from '@temporalio/workflow';
import type { MailerActivities } from '../../activities/sequences/mailer.js';
import type { OutboundAgentActivities } from '../../activities/agents/outbound-agent.js';
import type { ContactAction, SequenceActivities } from '../../activities/sequences/sequences.js';
import { msUntil, workflowNow } from '../shared/clock.js';
import {
  sequenceContactStateQuery,
  wakeContactSignal,
  type SequenceContactInput,
  type SequenceContactView,
  type SequenceFeedInput,
} from './sequence-contact.contract.js';

/** A contact waiting on a person or a pnet step looks again this often even without a signal. */
const recheckMs = 6 * 3_600_000;
/** No SMTP configured: the email waits, and is tried again this often. */
const noMailerRetryMs = 3_600_000;

// Short limits: a worker killed mid-activity stalls its contacts until the attempt times out.
// A move is a few statements; a send is one SMTP exchange.
const moveRetry = { initialInterval: '2 seconds', maximumInterval: '5 minutes', nonRetryableErrorTypes: ['not_found'] };
const acts = proxyActivities<SequenceActivities>({ startToCloseTimeout: '30 seconds', retry: moveRetry });
/**
 * A move (advance, record a written message) is a few SQL statements: as a local activity it runs
 * inside the workflow task that asked for it, one task instead of a task, an activity task and
 * another task per move.
 */
const moves = proxyLocalActivities<Pick<SequenceActivities, 'advanceSequenceContact' | 'recordWrittenMessage'>>({
  startToCloseTimeout: '30 seconds',
  retry: moveRetry,
});
const mailRetry = { initialInterval: '10 seconds', maximumInterval: '10 minutes' };
/**
 * A send is one SMTP exchange to the relay, short enough to run inside the workflow task too, so
 * an email step (advance, send, advance, wait) is one task. At most once holds: the send is
 * claimed in SQL before the exchange, and a re-run (a killed worker's task run again)
 * finds the claim and records the email unconfirmed instead of sending it twice.
 */
const mail = proxyLocalActivities<MailerActivities>({ startToCloseTimeout: '1 minute', retry: mailRetry });
const agent = proxyActivities<OutboundAgentActivities>({
  startToCloseTimeout: '10 minutes',
  retry: { initialInterval: '10 seconds', maximumInterval: '10 minutes', maximumAttempts: 5 },
});

export async function sequenceContactWorkflow(input: SequenceContactInput): Promise<SequenceContactView> {
  const turnsPerRun = input.turnsPerRun ?? 80;
  const view: SequenceContactView = {
    contactId: input.contactId,
    phase: 'advancing',
    wait: null,
    turns: 0,
    continued: input.continued ?? 0,
  };
  let woken = false;
  setHandler(wakeContactSignal, () => {
    woken = true;
  });
  setHandler(sequenceContactStateQuery, () => view);

  const showWait = (wait: SequenceContactView['wait']) => {
    if (view.wait?.reason === wait?.reason && view.wait?.until === wait?.until) return;
    view.wait = wait;
    upsertMemo({ wait });
  };
  const sleep = async (ms: number) => {
    // A wake ends the sleep early; the contact is looked at again and sleeps on if nothing changed.
    await condition(() => woken, Math.max(1, ms));
  };

  for (;;) {
    if (view.turns >= turnsPerRun || workflowInfo().continueAsNewSuggested) {
      await continueAsNew<typeof sequenceContactWorkflow>({ ...input, continued: view.continued + 1 });
    }
    view.turns += 1;
    // Cleared before the read, so a wake arriving while it runs is seen afterwards.
    woken = false;
    view.phase = 'advancing';
    const action: ContactAction = await moves.advanceSequenceContact({
      contactId: input.contactId,
      now: workflowNow().toISOString(),
    });
    switch (action.kind) {
      case 'done':
        view.phase = action.status;
        showWait(null);
        return view;
      case 'next':
        continue;
      case 'write': {
        view.phase = 'writing';
        let written;
        try {
          written = await agent.writeStepMessage(action.input);
        } catch (error) {
          if (!(error instanceof ActivityFailure)) throw error;
          // The agent could not write it: a person writes it in the approval queue instead.
          written = {
            messageId: '',
            subject: null,
            body: '',
            needsReview: true,
            reason: `agent_failed: ${error.cause?.message ?? error.message}`,
          };
        }
        await moves.recordWrittenMessage({
          contactId: input.contactId,
          stepId: action.stepId,
          version: action.version,
          written,
        });
        continue;
      }
      case 'send_email': {
        view.phase = 'sending';
        const sent = await mail.sendSequenceEmail({ sendId: action.sendId });
        if (sent.outcome === 'no_mailer') {
          showWait({ reason: 'no_mailer', until: new Date(workflowNow().getTime() + noMailerRetryMs).toISOString() });
          await sleep(noMailerRetryMs);
        }
        continue;
      }
      case 'wait':
        view.phase = 'waiting';
        showWait({ reason: action.reason, until: action.until });
        await sleep(action.until ? msUntil(action.until) : recheckMs);
        continue;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The audience feed (id `sequence-feed/<sequence_id>`)

/**
 * Lets a table feed a sequence: while the sequence has `feed_new_rows` on, rows added to its
 * audience table are enrolled as they arrive (read every `pollSeconds`, or at once on `wake`).
 * It ends when feeding is switched off or the sequence is archived; switching it on starts it again.
 */
export async function sequenceFeedWorkflow(input: SequenceFeedInput): Promise<{ enrolled: number }> {
  let woken = false;
  let enrolled = 0;
  setHandler(wakeContactSignal, () => {
    woken = true;
  });
  for (let turn = 0; ; turn++) {
    if (turn >= 200 || workflowInfo().continueAsNewSuggested) {
      await continueAsNew<typeof sequenceFeedWorkflow>({ ...input, continued: (input.continued ?? 0) + 1 });
    }
    woken = false;
    const fed = await acts.feedSequence({ sequenceId: input.sequenceId });
    enrolled += fed.enrolled;
    if (!fed.feeding) return { enrolled };
    if (!fed.more) await condition(() => woken, (input.pollSeconds ?? 30) * 1000);
  }
}
