/**
 * A sequence's activities, each a door to its use case: a contact's transition and the message
 * the outbound agent wrote for its step (services/sequences/contact-moves.ts), and the feed's
 * enrolment of new rows (services/sequences/contacts.ts). Their names and arguments are what the
 * contact's and the feed's workflows call. Below, the pnet step activities' wake of the contact a
 * settled step belongs to.
 */
import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import type { Sql } from '../../db/sql.js';
import type { TemporalHandle } from '../../services/deps.js';
import * as moves from '../../services/sequences/contact-moves.js';
import { feedSequence } from '../../services/sequences/contacts.js';
import { wakeContactsOfSteps } from '../../services/sequences/sequence-client.js';
import type { WriteStepMessageResult } from '../agents/outbound-agent.js';
import { afterStepTransitions } from '../pnet/steps.js';

export type { ContactAction } from '../../services/sequences/contact-moves.js';

export interface SequenceActivityDeps {
  sql: Sql;
  /** The Message-ID domain of sequence emails. */
  messageDomain?: string;
  /** The Temporal client for browser steps and wake-ups; the worker's own when omitted. */
  client?: () => Client;
}

export function createSequenceActivities(deps: SequenceActivityDeps) {
  const { sql } = deps;
  const domain = deps.messageDomain ?? 'sequences.local';
  const temporal = (): TemporalHandle => ({
    client: deps.client?.() ?? Context.current().client,
    taskQueue: Context.current().info.taskQueue,
  });

  return {
    /**
     * One transition of a contact. `now` is the workflow's clock (a wait's end is computed from
     * it, so time-skipping tests and replays read the same time).
     */
    advanceSequenceContact: async ({ contactId, now }: { contactId: string; now: string }) =>
      moves.advanceContact({ sql, temporal: temporal() }, domain, contactId, new Date(now)),
    /** Enrols the audience rows added since the feed last read (at most `batch`), and starts their contacts. */
    feedSequence: async (input: { sequenceId: string; batch?: number }) =>
      feedSequence({ sql, temporal: temporal() }, input),
    /** Stores what the outbound agent wrote for a step as the step's message (manual mode or a doubtful message waits for a person). */
    recordWrittenMessage: async (input: {
      contactId: string;
      stepId: string;
      version: number;
      written: WriteStepMessageResult;
    }) => moves.recordWrittenMessage({ sql }, domain, input),
  };
}
export type SequenceActivities = ReturnType<typeof createSequenceActivities>;

/**
 * Wraps the pnet step activities so a step of a sequence contact wakes that contact's workflow
 * once it settles (or is retried): the contact waits for its step without polling.
 */
export function withSequenceWake<T extends object>(activities: T, sql: Sql): T {
  return afterStepTransitions(
    activities,
    ['readStepChange', 'expireClaim', 'missWindow', 'rejectStep', 'cancelStep', 'retryStep'],
    async (stepId, step) => {
      // A transition that answers the record shows whether the step belongs to a sequence: a step
      // outside one has no contact to wake, and the look-up would cost every settle a round trip.
      if (step && step.sequence_id === null) return;
      await wakeContactsOfSteps(sql, Context.current().client, [stepId]).catch(() => undefined);
    },
  );
}
