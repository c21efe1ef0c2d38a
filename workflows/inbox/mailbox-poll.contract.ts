/** The mailbox-poll workflow's contract (workflows/inbox/mailbox-poll.ts): its id, input, view, signal and query. */
import { defineQuery, defineSignal } from '@temporalio/workflow';
import type { MailboxPollResult } from '../../domain/inbox/inbox.js';

export type { MailboxPollResult };

export const mailboxPollWorkflowId = (mailboxId: string) => `inbox-mailbox/${mailboxId}`;

export interface MailboxPollInput {
  mailboxId: string;
  workspaceId: string;
  /** Polls per execution before continuing as new. */
  pollsPerRun?: number;
}

export interface MailboxPollView {
  mailboxId: string;
  polls: number;
  lastPollAt: string | null;
  last: MailboxPollResult | null;
  /** Why it waits, for operators: `interval` until `nextPollAt`, or `stopped`. */
  waiting: 'interval' | 'polling' | 'stopped';
  nextPollAt: string | null;
}

/** Read now (after the mailbox's settings changed, or a person asked). */
export const pollMailboxNowSignal = defineSignal('pollMailboxNow');
export const mailboxPollStateQuery = defineQuery<MailboxPollView>('mailboxPollState');
