/**
 * The sequence-contact and sequence-feed workflows' contract (workflows/sequences/sequence-contact.ts):
 * their ids, inputs, the contact's view, and the wake signal and query the API and the activities
 * address them with.
 */
import { defineQuery, defineSignal } from '@temporalio/workflow';
import type { ContactWait } from '../../domain/sequences/sequences.js';

export const sequenceContactWorkflowId = (sequenceId: string, contactId: string) =>
  `sequence-contact/${sequenceId}/${contactId}`;
export const sequenceFeedWorkflowId = (sequenceId: string) => `sequence-feed/${sequenceId}`;

export interface SequenceContactInput {
  contactId: string;
  sequenceId: string;
  workspaceId: string;
  /** Transitions per run before continuing as new (keeps the history small). */
  turnsPerRun?: number;
  /** Runs before this one. */
  continued?: number;
}

export interface SequenceContactView {
  contactId: string;
  /** What the contact is doing: advancing, waiting, writing, sending, or its final status. */
  phase: string;
  /** Why it waits and until when (also its memo `wait`, for operators). */
  wait: ContactWait | null;
  turns: number;
  continued: number;
}

export interface SequenceFeedInput {
  sequenceId: string;
  /** How often the audience table is read for new rows. */
  pollSeconds?: number;
  continued?: number;
}

/** Look again now: something that may stop, resume or move the contact was recorded (the feed: rows were added). */
export const wakeContactSignal = defineSignal('wake');
export const sequenceContactStateQuery = defineQuery<SequenceContactView>('sequenceContactState');
