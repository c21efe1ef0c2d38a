/** The sender-account workflow's contract (workflows/pnet/sender-account.ts): its id, input, signal and query. */
import { defineQuery, defineSignal } from '@temporalio/workflow';
import type { AccountClock } from '../../domain/pnet/accounts.js';

export type { AccountClock };

export const senderAccountWorkflowId = (accountId: string) => `sender-account/${accountId}`;

export interface SenderAccountInput {
  accountId: string;
  workspaceId: string;
}

/** The account changed (settings, a checkpoint reported): tick now. */
export const accountChangedSignal = defineSignal('accountChanged');
export const senderAccountStateQuery = defineQuery<AccountClock | null>('senderAccountState');
