/**
 * A training session's transitions (decideTraining in domain/agents/training-sessions.ts), every
 * branch, without a server: what each event does to the session as read, and what it refuses.
 */
import { describe, expect, it } from 'vitest';
import {
  decideTraining,
  expectedRevisionOf,
  newDoc,
  type DraftedMessage,
  type TrainingDecision,
  type TrainingEvent,
  type TrainingSnapshot,
  type Transition,
} from '../../domain/agents/training-sessions.js';
import type {
  Proposal,
  TrainingContact,
  TrainingStatus,
  TrainingStep,
} from '../../domain/agents/training-session-schemas.js';

const [ann, bob, cat] = [
  '00000000-0000-4000-8000-00000000000a',
  '00000000-0000-4000-8000-00000000000b',
  '00000000-0000-4000-8000-00000000000c',
];
const sample = (record_id: string, label: string) => ({
  record_id,
  person: { name: label },
  label,
  fields: [],
  profile_mismatch: false,
});

const step = (action: string): TrainingStep => ({
  action,
  detail: '',
  duration_ms: 5,
  observation: '',
  outcome: 'completed',
  thought: '',
});
const send = { alone: true, reason: null, doubt: null };
const draft = (slot_key: string, over: Partial<DraftedMessage> = {}): DraftedMessage => ({
  id: `msg-${slot_key}`,
  slot_key,
  kind: 'email',
  subject: `About ${slot_key}`,
  body: `Body of ${slot_key}`,
  error: null,
  send,
  reasoning: 'Role first.',
  facts_used: ['CTO'],
  model_key: 'model-1',
  ...over,
});
const context = { research_brief: [{ fact: 'CTO' }], sources: ['https://example.com'] };

function session(status: TrainingStatus = 'running', revision = 3, readyAfter = 2): TrainingSnapshot {
  return {
    revision,
    head: { status, note_waiting: false, error: '' },
    doc: newDoc([sample(ann, 'Ann'), sample(bob, 'Bob'), sample(cat, 'Cat')], readyAfter),
  };
}

/** Applies events in turn, as the activities would (each written decision is the next snapshot). */
function after(start: TrainingSnapshot, ...events: TrainingEvent[]): TrainingSnapshot {
  let current = start;
  for (const event of events) {
    const decision = decideTraining(current, event);
    if (decision.kind === 'refuse') throw new Error(`refused: ${decision.message}`);
    if (decision.kind === 'write') current = { ...decision.next, revision: current.revision + 1 };
    else current = { ...current, revision: current.revision + 1 };
  }
  return current;
}

const written = (d: TrainingDecision): Transition => {
  if (d.kind !== 'write') throw new Error(`expected a write, got ${JSON.stringify(d)}`);
  return d.next;
};
const contactOf = (t: Transition, id: string): TrainingContact => t.doc.contacts.find((c) => c.record_id === id)!;

const firstWrite = (record_id: string, drafts = [draft('opener'), draft('follow_up')]): TrainingEvent => ({
  type: 'write_landed',
  record_id,
  rewrite: false,
  drafts,
  context,
  step: step('write_messages'),
});
const writeAll = (s: TrainingSnapshot) =>
  after(
    s,
    ...[ann, bob, cat].flatMap((id): TrainingEvent[] => [{ type: 'begin_write', record_id: id }, firstWrite(id)]),
  );
const looksGood = (record_id: string): TrainingEvent => ({
  type: 'verdict',
  request: { record_id, verdict: 'looks_good' },
  writing_other: false,
});
const note = (record_id: string, text = 'Shorter, please.', writing_other = false): TrainingEvent => ({
  type: 'verdict',
  request: { record_id, verdict: 'note', note: text },
  writing_other,
});
const rewriteLanded = (record_id: string, drafts: DraftedMessage[]): TrainingEvent => ({
  type: 'write_landed',
  record_id,
  rewrite: true,
  drafts,
  context,
  step: step('rewrite_messages'),
});
/** Ann noted and rewritten, waiting for a verdict on the rewrite. */
const rewritten = (
  s: TrainingSnapshot,
  drafts = [draft('opener', { body: 'Short opener.' }), draft('follow_up', { body: 'Short follow-up.' })],
) => after(s, note(ann), { type: 'begin_write', record_id: ann }, rewriteLanded(ann, drafts));

describe('pinned events', () => {
  it('refuses an event pinned to another revision, naming both, and changes nothing', () => {
    const s = session('proposed', 7);
    expect(decideTraining(s, { type: 'apply_proposal', expected_revision: 6 })).toEqual({
      kind: 'refuse',
      code: 'conflict',
      message: 'The session is at revision 7, not 6; read it again and retry.',
    });
    expect(decideTraining(s, { type: 'close', expected_revision: 8 })).toMatchObject({
      kind: 'refuse',
      code: 'conflict',
    });
    expect(decideTraining(s, { type: 'apply_proposal', expected_revision: 7 })).toMatchObject({ kind: 'write' });
    expect(s.head.status).toBe('proposed');
  });

  it('reads the pin from each event that carries one, and none from the workflow’s own', () => {
    expect(
      expectedRevisionOf({
        type: 'verdict',
        request: { record_id: ann, verdict: 'looks_good', expected_revision: 4 },
        writing_other: false,
      }),
    ).toBe(4);
    expect(expectedRevisionOf(looksGood(ann))).toBeUndefined();
    expect(expectedRevisionOf({ type: 'discard_changes', expected_revision: 2 })).toBe(2);
    expect(expectedRevisionOf({ type: 'close' })).toBeUndefined();
    expect(expectedRevisionOf({ type: 'begin_write', record_id: ann })).toBeUndefined();
  });

  it('refuses a verdict pinned to a stale revision before judging the contact', () => {
    const s = session();
    expect(
      decideTraining(s, {
        type: 'verdict',
        request: { record_id: ann, verdict: 'looks_good', expected_revision: 2 },
        writing_other: false,
      }),
    ).toMatchObject({
      kind: 'refuse',
      message: 'The session is at revision 3, not 2; read it again and retry.',
    });
  });
});

describe('writing a contact', () => {
  it('marks a contact waiting for its first write as being written', () => {
    const next = written(decideTraining(session(), { type: 'begin_write', record_id: ann }));
    expect(contactOf(next, ann).state).toBe('writing');
  });

  it('refuses a write in a closed session, and one for a contact that owes none', () => {
    expect(decideTraining(session('abandoned'), { type: 'begin_write', record_id: ann })).toEqual({
      kind: 'refuse',
      code: 'conflict',
      message: 'The session is abandoned.',
    });
    const s = after(session(), { type: 'begin_write', record_id: ann }, firstWrite(ann));
    expect(decideTraining(s, { type: 'begin_write', record_id: ann })).toEqual({
      kind: 'refuse',
      code: 'conflict',
      message: 'Nothing to write for this contact.',
    });
    expect(decideTraining(s, { type: 'begin_write', record_id: 'no-such-contact' })).toMatchObject({
      message: 'Nothing to write for this contact.',
    });
  });

  it('lands a first write as the thread as written, in slot order, waiting for a verdict', () => {
    const s = after(session(), { type: 'begin_write', record_id: ann });
    const next = written(decideTraining(s, firstWrite(ann)));
    const contact = contactOf(next, ann);
    expect(contact.state).toBe('awaiting_verdict');
    expect(contact.context).toEqual(context);
    expect(contact.notice).toBeNull();
    expect(contact.messages.map((m) => [m.id, m.title, m.timing, m.subject, m.body])).toEqual([
      ['msg-opener', 'opener', 'first message', 'About opener', 'Body of opener'],
      ['msg-follow_up', 'follow_up', 'follow-up 1', 'About follow_up', 'Body of follow_up'],
    ]);
    expect(contact.messages[0]).toMatchObject({
      authored: true,
      send,
      reasoning: 'Role first.',
      facts_used: ['CTO'],
      model_key: 'model-1',
      proposed_body: null,
    });
    expect(next.doc.steps.map((x) => x.action)).toEqual(['write_messages']);
  });

  it('keeps a slot the writer failed with its error, and tells the person to note it', () => {
    const s = after(session(), { type: 'begin_write', record_id: ann });
    const failed = draft('follow_up', {
      subject: null,
      body: '',
      error: 'model down',
      send: { alone: false, reason: 'error', doubt: 'model down' },
    });
    const contact = contactOf(written(decideTraining(s, firstWrite(ann, [draft('opener'), failed]))), ann);
    expect(contact.messages[1]).toMatchObject({
      error: 'model down',
      body: '',
      send: { alone: false, reason: 'error' },
    });
    expect(contact.notice).toBe('A message could not be written; give a note to try again.');
  });

  it('drops a write that lands after the session closed or the contact stopped being written', () => {
    const writing = after(session(), { type: 'begin_write', record_id: ann });
    expect(decideTraining(after(writing, { type: 'close' }), firstWrite(ann))).toMatchObject({
      kind: 'refuse',
      message: 'The session is abandoned.',
    });
    expect(decideTraining(session(), firstWrite(ann))).toEqual({
      kind: 'refuse',
      code: 'conflict',
      message: 'The contact is no longer being written.',
    });
    expect(decideTraining(writing, firstWrite('no-such-contact'))).toMatchObject({
      message: 'The contact is no longer being written.',
    });
  });

  it('shows why a write could not run, and lets the person note the contact to try again', () => {
    const s = after(session(), { type: 'begin_write', record_id: ann });
    const error = `Insufficient credits. ${'x'.repeat(3000)}`;
    const next = written(decideTraining(s, { type: 'write_failed', record_id: ann, error }));
    expect(next.head.error).toHaveLength(2000);
    expect(contactOf(next, ann)).toMatchObject({ state: 'awaiting_verdict' });
    expect(contactOf(next, ann).notice).toBe(`Could not be written: ${error.slice(0, 300)} Give a note to try again.`);
    // A contact that owes no write is left as it is; the error still shows, even on a closed session.
    const done = writeAll(session());
    const reviewed = after(done, looksGood(ann));
    expect(
      contactOf(written(decideTraining(reviewed, { type: 'write_failed', record_id: ann, error: 'late' })), ann).state,
    ).toBe('reviewed');
    expect(
      written(decideTraining(session('completed'), { type: 'write_failed', record_id: ann, error: 'gone' })).head,
    ).toMatchObject({ status: 'completed', error: 'gone' });
  });

  it('clears note_waiting when a failed write was the queued rewrite', () => {
    const s = writeAll(session());
    const waiting = after(s, note(ann, 'Shorter.', true));
    expect(waiting.head.note_waiting).toBe(true);
    expect(
      written(decideTraining(waiting, { type: 'write_failed', record_id: ann, error: 'no credits' })).head.note_waiting,
    ).toBe(false);
  });
});

describe('the end of the first writes', () => {
  it('moves a running session to reviewing, and leaves any other as it is', () => {
    expect(written(decideTraining(writeAll(session()), { type: 'initial_writes_done' })).head.status).toBe('reviewing');
    for (const status of ['reviewing', 'abandoned'] as const)
      expect(decideTraining(session(status), { type: 'initial_writes_done' })).toEqual({ kind: 'unchanged' });
  });
});

describe('verdicts', () => {
  it('counts Looks good in a row and is ready after ready_after of them', () => {
    const s = after(writeAll(session('running', 3, 2)), { type: 'initial_writes_done' });
    const one = written(decideTraining(s, looksGood(ann)));
    expect(one.doc.progress).toMatchObject({ in_a_row: 1, reviewed: 1, ready: false, fixed: 0 });
    expect(contactOf(one, ann)).toMatchObject({ verdict: 'looks_good', state: 'reviewed' });
    const two = after(s, looksGood(ann), looksGood(bob));
    expect(two.doc.progress).toMatchObject({ in_a_row: 2, ready: true });
    expect(two.doc.reviewed_ids).toEqual([ann, bob]);
  });

  it('starts the count again on a note, queues the rewrite, and says whether it waits for another write', () => {
    const s = after(writeAll(session()), looksGood(ann));
    const noted = written(decideTraining(s, note(bob)));
    expect(noted.doc.progress).toMatchObject({ in_a_row: 0, ready: false });
    expect(contactOf(noted, bob)).toMatchObject({
      verdict: 'note',
      note: 'Shorter, please.',
      state: 'rewrite_queued',
      notes: [{ note: 'Shorter, please.', state: 'pending' }],
    });
    expect(contactOf(noted, bob).notice).toBe('Being rewritten from your note.');
    expect(noted.head.note_waiting).toBe(false);
    const waiting = written(decideTraining(s, note(bob, 'Shorter, please.', true)));
    expect(waiting.head.note_waiting).toBe(true);
    expect(contactOf(waiting, bob).notice).toBe(
      'Your note waits for the write under way; its rewrite follows as soon as that lands.',
    );
  });

  it('refuses a verdict outside running and reviewing, for an unknown contact, or a contact not waiting for one', () => {
    for (const status of ['proposing', 'proposed', 'completed', 'abandoned'] as const) {
      expect(decideTraining(session(status), looksGood(ann))).toEqual({
        kind: 'refuse',
        code: 'conflict',
        message: `The session is ${status}; it cannot take a verdict.`,
      });
    }
    expect(decideTraining(session(), looksGood('no-such-contact'))).toEqual({
      kind: 'refuse',
      code: 'not_found',
      message: 'That contact is not part of this training session.',
    });
    expect(decideTraining(session(), looksGood(ann))).toMatchObject({
      message: 'That contact cannot take a verdict now: it has not been written yet.',
    });
    const reviewed = after(writeAll(session()), looksGood(ann));
    expect(decideTraining(reviewed, looksGood(ann))).toMatchObject({
      message: 'That contact cannot take a verdict now: it already has a verdict.',
    });
    expect(decideTraining(after(reviewed, note(bob)), note(bob))).toMatchObject({
      message: 'That contact cannot take a verdict now: its rewrite is queued.',
    });
  });

  it('lands a rewrite as a proposal beside the thread, learns the note, and keeps it with Looks good', () => {
    const s = rewritten(writeAll(session()));
    const contact = contactOf(s, ann);
    expect(contact).toMatchObject({
      state: 'awaiting_verdict',
      verdict: null,
      round: 1,
      notes: [{ state: 'learned' }],
    });
    expect(contact.messages.map((m) => [m.body, m.proposed_body, m.note])).toEqual([
      ['Body of opener', 'Short opener.', 'Shorter, please.'],
      ['Body of follow_up', 'Short follow-up.', 'Shorter, please.'],
    ]);
    expect(s.doc.progress.lessons).toEqual(['Shorter, please.']);
    const kept = written(decideTraining(s, looksGood(ann)));
    expect(contactOf(kept, ann).messages.map((m) => [m.body, m.previous_body, m.proposed_body])).toEqual([
      ['Short opener.', 'Body of opener', null],
      ['Short follow-up.', 'Body of follow_up', null],
    ]);
    expect(kept.doc.progress).toMatchObject({ fixed: 1, in_a_row: 1 });
  });

  it('marks a message whose slot the agent no longer has as failed in the rewrite', () => {
    const s = rewritten(writeAll(session()), [draft('opener', { body: 'Short opener.' })]);
    expect(contactOf(s, ann).messages[1]).toMatchObject({
      proposed_body: null,
      proposed_error: 'The agent no longer has this slot.',
      proposed_send: null,
    });
    expect(contactOf(s, ann).notes[0]!.state).toBe('learned');
  });

  it('learns nothing from a rewrite whose every slot failed, and asks for the note again', () => {
    const failed = [draft('opener', { error: 'model down' }), draft('follow_up', { error: 'model down' })];
    const s = rewritten(writeAll(session()), failed);
    expect(contactOf(s, ann).notes[0]!.state).toBe('pending');
    expect(s.doc.progress.lessons).toEqual([]);
    expect(contactOf(s, ann).notice).toBe('The rewrite could not be written; give the note again to retry.');
  });
});

describe('discarding changes', () => {
  it('drops the pending rewrite and its lesson; the thread stays as written and waits for a verdict again', () => {
    const s = rewritten(writeAll(session()));
    const next = written(decideTraining(s, { type: 'discard_changes', expected_revision: s.revision }));
    const contact = contactOf(next, ann);
    expect(contact.messages.map((m) => [m.body, m.proposed_body])).toEqual([
      ['Body of opener', null],
      ['Body of follow_up', null],
    ]);
    expect(contact.notes[0]!.state).toBe('discarded');
    expect(next.doc.progress.lessons).toEqual([]);
    expect(contact).toMatchObject({ verdict: null, state: 'awaiting_verdict' });
  });

  it('withdraws a proposal drafted with that lesson: back to reviewing', () => {
    const s = rewritten(writeAll(session()));
    const proposed: TrainingSnapshot = {
      ...s,
      head: { ...s.head, status: 'proposed' },
      doc: { ...s.doc, proposal: { summary: 'x' } as Proposal },
    };
    const next = written(decideTraining(proposed, { type: 'discard_changes', expected_revision: s.revision }));
    expect(next.head.status).toBe('reviewing');
    expect(next.doc.proposal).toBeNull();
  });

  it('refuses with no rewrite pending, or in a session that cannot discard', () => {
    const s = writeAll(session());
    expect(decideTraining(s, { type: 'discard_changes', expected_revision: s.revision })).toEqual({
      kind: 'refuse',
      code: 'conflict',
      message: 'There is no rewrite to discard: every rewrite was already kept or discarded.',
    });
    expect(decideTraining(session('proposing'), { type: 'discard_changes', expected_revision: 3 })).toMatchObject({
      message: 'The session is proposing; it cannot discard changes.',
    });
  });
});

describe('proposing, applying, abandoning and closing', () => {
  const ready = () =>
    after(writeAll(session('running', 3, 2)), { type: 'initial_writes_done' }, looksGood(ann), looksGood(bob));
  const proposal: Proposal = {
    summary: 'Shorter.',
    changes: [],
    made_at: 9,
    record_id: '00000000-0000-4000-8000-0000000000ff',
    round_ids: [ann, bob],
  };

  it('starts proposing once ready with nothing queued, and refuses before', () => {
    expect(written(decideTraining(ready(), { type: 'start_proposing' })).head.status).toBe('proposing');
    const notReady = after(writeAll(session('running', 3, 2)), { type: 'initial_writes_done' }, looksGood(ann));
    expect(decideTraining(notReady, { type: 'start_proposing' })).toEqual({
      kind: 'refuse',
      code: 'conflict',
      message: 'The session is not ready to propose.',
    });
    // A note queued after the Looks good: a rewrite is still owed.
    const owing = after(ready(), note(cat));
    expect(decideTraining(owing, { type: 'start_proposing' })).toMatchObject({ kind: 'refuse' });
  });

  it('takes the drafted proposal while proposing, and drops it once a person moved the session', () => {
    const proposing = after(ready(), { type: 'start_proposing' });
    const next = written(
      decideTraining(proposing, { type: 'proposal_drafted', proposal, step: step('propose_update') }),
    );
    expect(next.head.status).toBe('proposed');
    expect(next.doc.proposal).toEqual(proposal);
    expect(next.doc.steps.at(-1)!.action).toBe('propose_update');
    expect(
      decideTraining(after(proposing, { type: 'close' }), {
        type: 'proposal_drafted',
        proposal,
        step: step('propose_update'),
      }),
    ).toEqual({ kind: 'unchanged' });
  });

  it('applies or abandons only a proposed session', () => {
    const proposed = after(
      ready(),
      { type: 'start_proposing' },
      { type: 'proposal_drafted', proposal, step: step('propose_update') },
    );
    expect(
      written(decideTraining(proposed, { type: 'apply_proposal', expected_revision: proposed.revision })).head.status,
    ).toBe('completed');
    expect(
      written(decideTraining(proposed, { type: 'abandon_proposal', expected_revision: proposed.revision })).head.status,
    ).toBe('abandoned');
    expect(decideTraining(session('reviewing'), { type: 'apply_proposal', expected_revision: 3 })).toEqual({
      kind: 'refuse',
      code: 'conflict',
      message: 'The session is reviewing; it cannot apply a proposal.',
    });
    expect(decideTraining(session('completed'), { type: 'abandon_proposal', expected_revision: 3 })).toMatchObject({
      message: 'The session is completed; it cannot abandon a proposal.',
    });
  });

  it('closes a live session early, clearing note_waiting, and refuses to close an ended one', () => {
    for (const status of ['running', 'reviewing', 'proposing', 'proposed'] as const) {
      const live = session(status);
      live.head.note_waiting = true;
      expect(written(decideTraining(live, { type: 'close' })).head).toMatchObject({
        status: 'abandoned',
        note_waiting: false,
      });
    }
    for (const status of ['completed', 'abandoned'] as const) {
      expect(decideTraining(session(status), { type: 'close' })).toEqual({
        kind: 'refuse',
        code: 'conflict',
        message: `The session is ${status}; it cannot be closed.`,
      });
    }
  });

  it('never changes the snapshot it decides from', () => {
    const s = rewritten(writeAll(session()));
    const before = structuredClone(s);
    decideTraining(s, looksGood(ann));
    decideTraining(s, { type: 'discard_changes', expected_revision: s.revision });
    decideTraining(s, { type: 'write_failed', record_id: bob, error: 'x' });
    decideTraining(s, { type: 'close' });
    expect(s).toEqual(before);
  });
});
