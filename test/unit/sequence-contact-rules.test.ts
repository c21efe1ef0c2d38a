/**
 * The pure rules of domain/sequences/contact-rules.ts that the sequence use cases ask before they
 * act: whether a sequence may launch, which enrolled contacts start, and what a contact's retry
 * does with its pnet step (services/sequences/contacts.ts retrySequenceContact).
 */
import { describe, expect, it } from 'vitest';
import type { StoredStepStatus } from '../../domain/pnet/steps.js';
import { contactsToStart, launchIssues, stepRetryOf } from '../../domain/sequences/contact-rules.js';
import {
  SequenceGraphSchema,
  type EnrolResult,
  type Sequence,
  type SequenceContact,
} from '../../domain/sequences/sequences.js';

const WORKSPACE = '00000000-0000-4000-8000-0000000000a1';

function sequenceWith(steps: unknown[], senders: unknown[] = []): Sequence {
  const graph = SequenceGraphSchema.parse({ start: (steps[0] as { id: string }).id, steps });
  return { graph, senders } as unknown as Sequence;
}

const emailStep = (id: string, writer: 'template' | 'agent', next = 'done') => ({ id, type: 'email', writer, next });
const pnetStep = (id: string, writer: 'template' | 'agent', next = 'done') => ({
  id,
  type: 'pnet',
  action: 'send_message',
  writer,
  next,
});
const end = { id: 'done', type: 'end' };

describe('launchIssues', () => {
  it('has nothing to say of template steps with a sender', () => {
    const seq = sequenceWith([emailStep('a', 'template', 'b'), pnetStep('b', 'template'), end], [{}]);
    expect(launchIssues(seq, null)).toEqual([]);
  });

  it('names each agent-written step while the sequence has no outbound agent, by its place in the graph', () => {
    const seq = sequenceWith([emailStep('a', 'agent', 'b'), emailStep('b', 'template'), end], [{}]);
    expect(launchIssues(seq, null)).toEqual([
      {
        loc: ['body', 'graph.steps.0'],
        msg: 'no outbound agent on this sequence (set one before launching an agent-written step)',
        type: 'no_outbound_agent',
        input: 'a',
      },
    ]);
    expect(launchIssues(seq, '00000000-0000-4000-8000-0000000000b1')).toEqual([]);
  });

  it('names a pnet step of a sequence with no sender, after its agent issue', () => {
    const seq = sequenceWith([pnetStep('p', 'agent'), end], []);
    expect(launchIssues(seq, null).map((i) => [i.loc[1], i.type])).toEqual([
      ['graph.steps.0', 'no_outbound_agent'],
      ['graph.steps.0', 'no_sender'],
    ]);
  });
});

describe('contactsToStart', () => {
  const contact = (id: string, status: SequenceContact['status']) =>
    ({ id, status, sequence_id: 's', contact_key: `s:${id}` }) as unknown as SequenceContact;
  const result = (c: SequenceContact | null, status: EnrolResult['status'] = 'enrolled'): EnrolResult => ({
    row_id: c?.id ?? 'none',
    status,
    reason: c ? null : 'do_not_contact',
    contact: c,
  });

  it('starts live contacts, already-enrolled ones too, each once, with the workspace', () => {
    const a = contact('a', 'active');
    const started = contactsToStart(
      [
        result(a),
        result(contact('b', 'paused'), 'already_enrolled'),
        result(contact('c', 'failed'), 'already_enrolled'),
        result(a, 'already_enrolled'),
      ],
      WORKSPACE,
    );
    expect(started.map((c) => [c.id, c.workspace_id])).toEqual([
      ['a', WORKSPACE],
      ['b', WORKSPACE],
      ['c', WORKSPACE],
    ]);
  });

  it('leaves refused rows and finished contacts alone', () => {
    const started = contactsToStart(
      [result(null, 'refused'), result(contact('d', 'stopped'), 'already_enrolled'), result(contact('e', 'completed'))],
      WORKSPACE,
    );
    expect(started).toEqual([]);
  });
});

describe('stepRetryOf', () => {
  const step = (status: StoredStepStatus) => ({ id: 'step', status });

  it('retries a failed step through its workflow, with the step', () => {
    const failed = step('failed');
    expect(stepRetryOf(failed)).toEqual({ kind: 'retry', step: failed });
  });

  it('releases a cancelled step, or one that is gone, so a new one is queued', () => {
    expect(stepRetryOf(step('cancelled'))).toEqual({ kind: 'release' });
    expect(stepRetryOf(undefined)).toEqual({ kind: 'release' });
  });

  it('leaves a step in any other status for the contact to follow', () => {
    for (const status of ['awaiting_approval', 'queued', 'resuming', 'claimed', 'succeeded'] as StoredStepStatus[]) {
      expect(stepRetryOf(step(status))).toEqual({ kind: 'leave' });
    }
  });
});
