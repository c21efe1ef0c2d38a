/**
 * decideAdvance, branch by branch, with no database: each case walks the decision from the locked
 * contact to its final move, answering the reads it asks for from a table of facts (a read the
 * case did not expect fails it) and applying its `continue` writes with afterWrite. The path of
 * reads and writes is the order of the statements the move sends.
 */
import { describe, expect, it } from 'vitest';
import {
  afterWrite,
  decideAdvance,
  insufficientCreditsRetryMs,
  isFact,
  isWrite,
  writtenSend,
  type AdvanceContact,
  type AdvanceDecision,
  type AdvanceMove,
  type AdvanceSequence,
  type AdvanceSender,
  type AdvanceSnapshot,
} from '../../domain/sequences/advance.js';
import { SequenceGraphSchema, waitUntil, type SequenceGraph } from '../../domain/sequences/sequences.js';

const NOW = new Date('2026-03-02T10:00:00.000Z'); // a Monday, inside business hours in UTC
const ENROLLED = new Date('2026-03-01T08:00:00.000Z');
const EMAIL_COLUMN = '00000000-0000-4000-8000-0000000000e1';
const NAME_COLUMN = '00000000-0000-4000-8000-0000000000e2';
const TEMPLATE = '00000000-0000-4000-8000-0000000000f1';

const contactBase: AdvanceContact = {
  id: 'contact-1',
  workspace_id: 'ws-1',
  sequence_id: 'seq-1',
  row_id: 'row-1',
  contact_key: 'seq-1:row-1',
  email: 'ada@example.com',
  profile_url: 'https://www.linkedin.com/in/ada',
  first_name: 'Ada',
  last_name: 'Lovelace',
  company_name: 'Engines',
  fields: {},
  sender_profile_id: 'sender-1',
  status: 'active',
  version: 1,
  current_step_id: 'first',
  done_steps: [],
  wait_reason: null,
  wait_until: null,
  wait_step_id: null,
  stop_reason: null,
  browser_step_id: null,
  enrolled_at: ENROLLED,
};

const sequence: AdvanceSequence = {
  status: 'active',
  email_mode: 'automatic',
  pnet_mode: 'automatic',
  audience_mapping: { email_column_id: EMAIL_COLUMN },
  outbound_agent_id: null,
};

const sender: AdvanceSender = {
  name: 'Grace Hopper',
  timezone: 'UTC',
  from_email: 'grace@outreach.example',
  from_name: null,
  account_id: 'account-1',
  account_run_mode: 'automatic',
};

const text = (t: string) => ({ kind: 'text' as const, text: t });
const graphOf = (first: Record<string, unknown>, ...rest: Record<string, unknown>[]): SequenceGraph =>
  SequenceGraphSchema.parse({
    start: 'first',
    steps: [{ id: 'first', ...first }, ...rest, { id: 'done', type: 'end' }, { id: 'other', type: 'end' }],
  });
const emailStep = (extra: Record<string, unknown> = {}) =>
  graphOf({
    type: 'email',
    next: 'done',
    subject_segments: [text('Hello')],
    body_segments: [text('Hi '), { kind: 'builtin', builtin: 'first_name' }],
    ...extra,
  });
const pnetStep = (action: string, extra: Record<string, unknown> = {}) =>
  graphOf({ type: 'pnet', action, next: 'done', body_segments: [text('Hi there')], ...extra });

type Facts = Omit<AdvanceSnapshot, 'contact' | 'claimedSendId'>;
const factKey = {
  sequence: 'sequence',
  stop_reason: 'stopReason',
  graph: 'graph',
  failed_step: 'failedStep',
  branch: 'branchHolds',
  live_cells: 'liveCells',
  sender: 'sender',
  send: 'send',
  browser_step: 'browserStep',
  template: 'template',
  outreach_block: 'outreachBlock',
} as const satisfies Record<string, keyof Facts>;

/** The gate every live contact passes: an active sequence and no stop reason. */
const open: Facts = { sequence, stopReason: null };

/** Walks the decision to its final move; `path` lists the reads and writes in order. */
function walk(
  contact: Partial<AdvanceContact> | null,
  facts: Facts,
  opts: { now?: Date; claimedSendId?: string } = {},
) {
  let snap: AdvanceSnapshot = {
    contact: contact && { ...contactBase, ...contact },
    claimedSendId: opts.claimedSendId ?? null,
  };
  const path: string[] = [];
  const writes: AdvanceDecision[] = [];
  for (let turn = 0; turn < 40; turn++) {
    const d = decideAdvance(snap, opts.now ?? NOW);
    if (isFact(d)) {
      path.push(
        d.fact === 'branch'
          ? `read branch:${d.condition}`
          : d.fact === 'template'
            ? `read template:${d.templateId}`
            : `read ${d.fact}`,
      );
      const key = factKey[d.fact];
      if (!Object.hasOwn(facts, key)) throw new Error(`unexpected read of ${d.fact} after ${path.join(', ')}`);
      snap = { ...snap, [key]: facts[key] };
      continue;
    }
    if (isWrite(d)) {
      path.push(`write ${d.kind}`);
      writes.push(d);
      snap = afterWrite(snap, d);
      continue;
    }
    return { move: d, path, writes, snap };
  }
  throw new Error('the decision never ended');
}

const move = (
  contact: Partial<AdvanceContact> | null,
  facts: Facts,
  opts?: { now?: Date; claimedSendId?: string },
): AdvanceMove => walk(contact, facts, opts).move;

/** The reads of a contact's step through its send, in statement order, before what the step reads next. */
const readsThroughSend = ['read sequence', 'read stop_reason', 'read graph', 'read sender', 'read send'];

describe('decideAdvance: before the graph', () => {
  it('answers missing for a contact that is not there, reading nothing', () => {
    expect(walk(null, {})).toMatchObject({ move: { kind: 'missing' }, path: [] });
  });

  it('settles a send a dead worker left claimed before anything else, even for a stopped contact', () => {
    expect(walk({ status: 'stopped' }, {}, { claimedSendId: 'send-9' })).toMatchObject({
      move: { kind: 'settle_claimed_send', sendId: 'send-9' },
      path: [],
    });
  });

  it('leaves a completed contact alone and reads nothing', () => {
    expect(walk({ status: 'completed' }, {})).toMatchObject({ move: { kind: 'completed' }, path: [] });
  });

  it('answers a stopped contact with its reason (its waiting pnet steps are cancelled), reading nothing more', () => {
    expect(walk({ status: 'stopped', stop_reason: 'replied' }, {})).toMatchObject({
      move: { kind: 'stopped', reason: 'replied' },
      path: [],
    });
  });

  it('reads the sequence, then the stop reason, and stops on a reply before anything else', () => {
    const r = walk({ status: 'paused' }, { sequence: { ...sequence, status: 'paused' }, stopReason: 'replied' });
    expect(r.path).toEqual(['read sequence', 'read stop_reason']);
    expect(r.move).toEqual({ kind: 'stop', reason: 'replied' });
  });

  it('stops every contact of an archived sequence as `archived`', () => {
    expect(move({}, { sequence: { ...sequence, status: 'archived' }, stopReason: null })).toEqual({
      kind: 'stop',
      reason: 'archived',
    });
  });

  it('holds a paused contact, writing its wait only when the row says otherwise', () => {
    expect(move({ status: 'paused' }, open)).toEqual({
      kind: 'wait',
      wait: { reason: 'paused', until: null, write: true },
    });
    expect(move({ status: 'paused', wait_reason: 'paused' }, open)).toEqual({
      kind: 'wait',
      wait: { reason: 'paused', until: null, write: false },
    });
    // The same reason with an end left over from another wait is written again.
    expect(move({ status: 'paused', wait_reason: 'paused', wait_until: NOW }, open)).toMatchObject({
      wait: { reason: 'paused', until: null, write: true },
    });
  });

  it('holds every contact of a paused or draft sequence, before reading its graph', () => {
    const paused = walk({}, { sequence: { ...sequence, status: 'paused' }, stopReason: null });
    expect(paused.move).toEqual({ kind: 'wait', wait: { reason: 'sequence_paused', until: null, write: true } });
    expect(paused.path).toEqual(['read sequence', 'read stop_reason']);
    expect(move({}, { sequence: { ...sequence, status: 'draft' }, stopReason: null })).toMatchObject({
      wait: { reason: 'sequence_draft' },
    });
  });

  it('puts a new contact on the start step, then goes on from there in the same move', () => {
    const r = walk({ current_step_id: null }, { ...open, graph: graphOf({ type: 'end' }) });
    expect(r.path).toEqual(['read sequence', 'read stop_reason', 'read graph', 'write start_at']);
    expect(r.writes).toEqual([{ kind: 'start_at', stepId: 'first' }]);
    expect(r.move).toEqual({ kind: 'complete' });
  });

  it('fails a contact whose step is not in its version', () => {
    expect(move({ current_step_id: 'gone', version: 3 }, { ...open, graph: graphOf({ type: 'end' }) })).toEqual({
      kind: 'fail_missing_step',
      error: 'Step "gone" is not in version 3',
      wait: { reason: 'failed_step', until: null, write: true },
    });
  });
});

describe('decideAdvance: a failed contact', () => {
  const graph = pnetStep('profile_view');

  it('keeps waiting with no browser step to follow, reading none', () => {
    const r = walk({ status: 'failed', wait_reason: 'failed_step' }, { ...open, graph });
    expect(r.path).toEqual(['read sequence', 'read stop_reason', 'read graph']);
    expect(r.move).toEqual({ kind: 'wait', wait: { reason: 'failed_step', until: null, write: false } });
  });

  it('keeps waiting while its browser step is failed, cancelled or gone', () => {
    for (const failedStep of [{ status: 'failed' }, { status: 'cancelled' }, null]) {
      const r = walk({ status: 'failed', browser_step_id: 'bs-1' }, { ...open, graph, failedStep });
      expect(r.path.at(-1)).toBe('read failed_step');
      expect(r.move).toMatchObject({ kind: 'wait', wait: { reason: 'failed_step' } });
    }
  });

  it('resumes and follows its browser step once a person retried it', () => {
    const r = walk(
      { status: 'failed', browser_step_id: 'bs-1' },
      {
        ...open,
        graph,
        failedStep: { status: 'queued' },
        sender,
        send: null,
        browserStep: { status: 'queued', error_code: null },
      },
    );
    expect(r.path).toEqual([
      'read sequence',
      'read stop_reason',
      'read graph',
      'read failed_step',
      'write resume',
      'read sender',
      'read send',
      'read browser_step',
    ]);
    expect(r.snap.contact?.status).toBe('active');
    expect(r.move).toEqual({ kind: 'follow_step', wait: { reason: 'pnet_step', until: null, write: true } });
  });
});

describe('decideAdvance: end, branch and wait steps', () => {
  it('completes the contact on an end step', () => {
    expect(move({ current_step_id: 'done' }, { ...open, graph: graphOf({ type: 'end' }) })).toEqual({
      kind: 'complete',
    });
  });

  it('branches on a condition it reads (connected, replied, opened), never marking the branch done', () => {
    for (const condition of ['connected', 'replied', 'opened'] as const) {
      const graph = graphOf({ type: 'branch', condition, if_true: 'done', if_false: 'other' });
      const yes = walk({}, { ...open, graph, branchHolds: true });
      expect(yes.path.at(-1)).toBe(`read branch:${condition}`);
      expect(yes.move).toEqual({ kind: 'move_on', from: 'first', to: 'done', appendDone: false, reached: false });
      expect(move({}, { ...open, graph, branchHolds: false })).toMatchObject({ kind: 'move_on', to: 'other' });
    }
  });

  it('takes email_found as true at once when the contact has an email', () => {
    const r = walk(
      {},
      { ...open, graph: graphOf({ type: 'branch', condition: 'email_found', if_true: 'done', if_false: 'other' }) },
    );
    expect(r.path).toEqual(['read sequence', 'read stop_reason', 'read graph']);
    expect(r.move).toMatchObject({ kind: 'move_on', to: 'done' });
  });

  it('reads the row again for email_found, records an email an enrichment found, and goes the true way', () => {
    const graph = graphOf({ type: 'branch', condition: 'email_found', if_true: 'done', if_false: 'other' });
    const r = walk({ email: null }, { ...open, graph, liveCells: { [EMAIL_COLUMN]: '  found@example.com ' } });
    expect(r.path).toEqual([
      'read sequence',
      'read stop_reason',
      'read graph',
      'read live_cells',
      'write record_email',
    ]);
    expect(r.writes).toEqual([{ kind: 'record_email', email: 'found@example.com' }]);
    expect(r.move).toMatchObject({ kind: 'move_on', to: 'done' });
    expect(move({ email: null }, { ...open, graph, liveCells: { [EMAIL_COLUMN]: '  ' } })).toMatchObject({
      kind: 'move_on',
      to: 'other',
    });
  });

  it("starts a wait step's timer from `now` in the sender's zone, then waits for it", () => {
    const step = { type: 'wait', days: 1, hours: 2, minutes: 0, business_hours: true, next: 'done' };
    const graph = graphOf(step);
    const tokyo = { ...sender, timezone: 'Asia/Tokyo' };
    const until = waitUntil(NOW, { days: 1, hours: 2, minutes: 0, business_hours: true }, 'Asia/Tokyo');
    const r = walk({}, { ...open, graph, sender: tokyo });
    expect(r.path).toEqual(['read sequence', 'read stop_reason', 'read graph', 'read sender', 'write start_timer']);
    expect(r.writes).toEqual([{ kind: 'start_timer', stepId: 'first', until }]);
    expect(r.move).toEqual({ kind: 'wait', wait: { reason: 'timer', until, write: true } });
    expect(until.getTime()).toBeGreaterThan(NOW.getTime());
  });

  it('moves straight on when the new timer has already ended (a zero wait)', () => {
    const graph = graphOf({ type: 'wait', days: 0, hours: 0, minutes: 0, business_hours: false, next: 'done' });
    const r = walk({}, { ...open, graph, sender });
    expect(r.path.slice(-2)).toEqual(['read sender', 'write start_timer']);
    expect(r.move).toEqual({ kind: 'move_on', from: 'first', to: 'done', appendDone: false, reached: false });
  });

  it('keeps a started timer (no sender read), and moves on once it passed', () => {
    const graph = graphOf({ type: 'wait', days: 2, next: 'done' });
    const until = new Date(NOW.getTime() + 60_000);
    const waiting = walk({ wait_step_id: 'first', wait_until: until, wait_reason: 'timer' }, { ...open, graph });
    expect(waiting.path).toEqual(['read sequence', 'read stop_reason', 'read graph']);
    expect(waiting.move).toEqual({ kind: 'wait', wait: { reason: 'timer', until, write: false } });
    expect(move({ wait_step_id: 'first', wait_until: until }, { ...open, graph }, { now: until })).toMatchObject({
      kind: 'move_on',
      to: 'done',
    });
  });

  it('restarts the timer of a wait step it did not start (a timer of another step)', () => {
    const graph = graphOf({ type: 'wait', days: 0, hours: 1, business_hours: false, next: 'done' });
    const r = walk({ wait_step_id: 'elsewhere', wait_until: new Date(0) }, { ...open, graph, sender });
    expect(r.writes).toEqual([{ kind: 'start_timer', stepId: 'first', until: new Date(NOW.getTime() + 3_600_000) }]);
    expect(r.move).toMatchObject({ kind: 'wait', wait: { reason: 'timer' } });
  });
});

describe('decideAdvance: an action step', () => {
  it('passes over a step the contact already had on any version, reading nothing more', () => {
    const r = walk({ done_steps: ['first'] }, { ...open, graph: emailStep() });
    expect(r.path).toEqual(['read sequence', 'read stop_reason', 'read graph']);
    expect(r.move).toEqual({ kind: 'move_on', from: 'first', to: 'done', appendDone: false, reached: false });
  });

  it('passes over an email step for a contact without an email, and a pnet step without a profile or an account', () => {
    expect(move({ email: null }, { ...open, graph: emailStep(), sender, send: null })).toMatchObject({
      kind: 'move_on',
      appendDone: false,
    });
    expect(move({ profile_url: null }, { ...open, graph: pnetStep('profile_view'), sender, send: null })).toMatchObject(
      { kind: 'move_on', appendDone: false },
    );
    expect(
      move({}, { ...open, graph: pnetStep('profile_view'), sender: { ...sender, account_id: null }, send: null }),
    ).toMatchObject({ kind: 'move_on' });
  });

  it('renders a template email in the statement order of before: sender, send, row, then the insert', () => {
    const r = walk({}, { ...open, graph: emailStep(), sender, send: null, liveCells: {} });
    expect(r.path).toEqual([...readsThroughSend, 'read live_cells']);
    expect(r.move).toEqual({
      kind: 'insert_send',
      stepId: 'first',
      channel: 'email',
      sendKind: 'email',
      status: 'approved',
      reason: null,
      subject: 'Hello',
      body: 'Hi Ada',
    });
  });

  it('holds the message for a person in a manual channel', () => {
    expect(
      move(
        {},
        {
          ...open,
          sequence: { ...sequence, email_mode: 'manual' },
          graph: emailStep(),
          sender,
          send: null,
          liveCells: {},
        },
      ),
    ).toMatchObject({
      status: 'awaiting_approval',
      reason: 'manual_mode',
    });
  });

  it('holds a message whose required value is missing, whatever the mode', () => {
    const graph = emailStep({
      body_segments: [text('About '), { kind: 'column', column_id: NAME_COLUMN, required: true }],
    });
    const m = move({}, { ...open, graph, sender, send: null, liveCells: {} });
    expect(m).toMatchObject({ kind: 'insert_send', status: 'awaiting_approval' });
    expect((m as { reason: string }).reason).toMatch(/^missing_values: /);
    expect(move({}, { ...open, graph, sender, send: null, liveCells: { [NAME_COLUMN]: 'engines' } })).toMatchObject({
      status: 'approved',
      body: 'About engines',
    });
  });

  it('reads a saved template, and holds the step as template_deleted when it is gone', () => {
    const graph = emailStep({ template_id: TEMPLATE });
    const saved = { subject_segments: [text('Saved subject')], body_segments: [text('Saved body')] };
    const r = walk({}, { ...open, graph, sender, send: null, liveCells: {}, template: saved });
    expect(r.path.at(-1)).toBe(`read template:${TEMPLATE}`);
    expect(r.move).toMatchObject({
      kind: 'insert_send',
      subject: 'Saved subject',
      body: 'Saved body',
      status: 'approved',
    });
    expect(move({}, { ...open, graph, sender, send: null, liveCells: {}, template: null })).toMatchObject({
      kind: 'insert_send',
      status: 'awaiting_approval',
      reason: 'template_deleted',
      subject: null,
      body: '',
    });
  });

  it('keeps a subject only for emails and InMails; a pnet message carries the pnet action as its kind', () => {
    const withSubject = { subject_segments: [text('Subject')] };
    expect(
      move({}, { ...open, graph: pnetStep('send_message', withSubject), sender, send: null, liveCells: {} }),
    ).toMatchObject({
      channel: 'pnet',
      sendKind: 'send_message',
      subject: null,
      body: 'Hi there',
    });
    expect(
      move({}, { ...open, graph: pnetStep('inmail', withSubject), sender, send: null, liveCells: {} }),
    ).toMatchObject({ sendKind: 'inmail', subject: 'Subject' });
  });

  it('asks the outbound agent for an agent-written step, with the live row as its fields', () => {
    const graph = pnetStep('connection_request', { writer: 'agent' });
    const r = walk(
      {},
      {
        ...open,
        sequence: { ...sequence, outbound_agent_id: 'agent-1' },
        graph,
        sender,
        send: null,
        liveCells: { a: 'x', n: 3, gone: null },
      },
    );
    expect(r.move).toEqual({
      kind: 'write_message',
      stepId: 'first',
      version: 1,
      input: {
        workspaceId: 'ws-1',
        agentId: 'agent-1',
        sequenceId: 'seq-1',
        contactKey: 'seq-1:row-1',
        slotKey: 'first',
        kind: 'connection_note',
        contact: {
          name: 'Ada Lovelace',
          email: 'ada@example.com',
          profileUrl: 'https://www.linkedin.com/in/ada',
          fields: { a: 'x', n: '3', company_name: 'Engines' },
        },
      },
    });
    const bare = { first_name: null, last_name: null, email: null, company_name: null };
    /** The facts of an agent-written `graph` in a sequence with an outbound agent, nothing sent, no live cells. */
    const agentWritten = (graph: Facts['graph']): Facts => ({
      ...open,
      sequence: { ...sequence, outbound_agent_id: 'agent-1' },
      graph,
      sender,
      send: null,
      liveCells: {},
    });
    const email = move({ ...bare }, agentWritten(emailStep({ writer: 'agent' })));
    // No email: an email step is passed over before any agent is asked.
    expect(email).toMatchObject({ kind: 'move_on' });
    const message = move(bare, agentWritten(pnetStep('send_message', { writer: 'agent' })));
    expect(message).toMatchObject({
      kind: 'write_message',
      input: { kind: 'pnet_message', contact: { profileUrl: 'https://www.linkedin.com/in/ada', fields: {} } },
    });
    expect((message as { input: { contact: object } }).input.contact).not.toHaveProperty('name');
    expect(move({}, agentWritten(emailStep({ writer: 'agent' })))).toMatchObject({
      input: { kind: 'email' },
    });
  });

  it('holds an agent-written step for a person when the sequence has no outbound agent', () => {
    expect(
      move({}, { ...open, graph: emailStep({ writer: 'agent' }), sender, send: null, liveCells: {} }),
    ).toMatchObject({
      kind: 'insert_send',
      status: 'awaiting_approval',
      reason: 'no_outbound_agent',
      subject: null,
      body: '',
    });
  });

  it('follows the send of the step: waits for approval, moves on after a rejection, waits when stopped', () => {
    const send = (status: string) => ({ id: 'send-1', status, subject: 'S', body: 'B', decided_at: null });
    const facts = (status: string) => ({ ...open, graph: emailStep(), sender, send: send(status) });
    expect(move({}, facts('awaiting_approval'))).toEqual({
      kind: 'wait',
      wait: { reason: 'approval', until: null, write: true },
    });
    expect(move({ wait_reason: 'approval' }, facts('awaiting_approval'))).toMatchObject({ wait: { write: false } });
    expect(move({}, facts('rejected'))).toEqual({
      kind: 'move_on',
      from: 'first',
      to: 'done',
      appendDone: false,
      reached: false,
    });
    expect(move({}, facts('stopped'))).toEqual({ kind: 'wait', wait: { reason: 'stopped', until: null, write: true } });
  });

  it('records a sent message as a reach and marks the step done, next to the steps done before', () => {
    const sent = { id: 'send-1', status: 'sent', subject: 'S', body: 'B', decided_at: null };
    expect(move({}, { ...open, graph: emailStep(), sender, send: sent })).toEqual({
      kind: 'move_on',
      from: 'first',
      to: 'done',
      appendDone: true,
      reached: true,
    });
    expect(move({ done_steps: ['intro'] }, { ...open, graph: emailStep(), sender, send: sent })).toMatchObject({
      appendDone: true,
    });
  });

  it('sends an approved (or claimed) email through the mailer, which checks for a reply in its claim', () => {
    for (const status of ['approved', 'sending']) {
      const r = walk(
        {},
        {
          ...open,
          graph: emailStep(),
          sender,
          send: { id: 'send-1', status, subject: 'S', body: 'B', decided_at: null },
        },
      );
      expect(r.move).toEqual({ kind: 'send_email', sendId: 'send-1' });
      expect(r.path).not.toContain('read outreach_block');
    }
  });
});

describe('decideAdvance: a pnet step', () => {
  const facts = (extra: Partial<Facts> = {}): Facts => ({
    ...open,
    graph: pnetStep('send_message'),
    sender,
    send: null,
    ...extra,
  });
  const approved = (body: string, decided: boolean) => ({
    id: 'send-1',
    status: 'approved',
    subject: null,
    body,
    decided_at: decided ? ENROLLED : null,
  });

  it('waits on a browser step still to run (on the Tasks page, queued, resuming or claimed)', () => {
    for (const status of ['awaiting_approval', 'queued', 'resuming', 'claimed']) {
      const r = walk({ browser_step_id: 'bs-1' }, facts({ browserStep: { status, error_code: null } }));
      expect(r.path.at(-1)).toBe('read browser_step');
      expect(r.move).toEqual({ kind: 'follow_step', wait: { reason: 'pnet_step', until: null, write: true } });
    }
    expect(
      move(
        { browser_step_id: 'bs-1', wait_reason: 'pnet_step' },
        facts({ browserStep: { status: 'queued', error_code: null } }),
      ),
    ).toMatchObject({ wait: { write: false } });
  });

  it('moves on after its browser step: a success is a reach and done, a skip is done, a rejection neither', () => {
    const after = (status: string) =>
      move({ browser_step_id: 'bs-1' }, facts({ browserStep: { status, error_code: null } }));
    expect(after('succeeded')).toEqual({ kind: 'move_on', from: 'first', to: 'done', appendDone: true, reached: true });
    expect(after('skipped')).toEqual({ kind: 'move_on', from: 'first', to: 'done', appendDone: true, reached: false });
    expect(after('rejected')).toEqual({
      kind: 'move_on',
      from: 'first',
      to: 'done',
      appendDone: false,
      reached: false,
    });
  });

  it('fails the contact at a failed, cancelled or vanished browser step, saying which', () => {
    const fail = (browserStep: Facts['browserStep']) => move({ browser_step_id: 'bs-1' }, facts({ browserStep }));
    expect(fail({ status: 'failed', error_code: 'timed_out' })).toEqual({
      kind: 'fail_step',
      error: 'The send_message step failed (timed_out)',
      wait: { reason: 'failed_step', until: null, write: true },
    });
    expect(fail({ status: 'cancelled', error_code: null })).toMatchObject({ error: 'The send_message step cancelled' });
    expect(fail(null)).toMatchObject({ error: 'The send_message step vanished' });
  });

  it('re-checks the person right before queueing, and stops the contact on a block', () => {
    const r = walk({}, facts({ graph: pnetStep('profile_view'), outreachBlock: 'active_elsewhere' }));
    expect(r.path).toEqual([...readsThroughSend, 'read outreach_block']);
    expect(r.move).toEqual({ kind: 'stop', reason: 'active_elsewhere' });
  });

  it('queues an action without a message at once, with its params and the retry time for short credits', () => {
    expect(move({}, facts({ graph: pnetStep('profile_view'), outreachBlock: null }))).toEqual({
      kind: 'queue_pnet_step',
      stepId: 'first',
      action: 'profile_view',
      params: { kind: 'profile_view', profile_url: 'https://www.linkedin.com/in/ada', read_relationship: true },
      awaiting: false,
      retryAt: new Date(NOW.getTime() + insufficientCreditsRetryMs),
    });
  });

  it("queues an approved message as the step's text; the sender's manual mode puts it on the Tasks page unless a person approved it here", () => {
    const manual = { ...sender, account_run_mode: 'manual' as const };
    const auto = move({}, facts({ sender: manual, send: approved('Hello Ada', false), outreachBlock: null }));
    expect(auto).toMatchObject({
      kind: 'queue_pnet_step',
      awaiting: true,
      params: { kind: 'send_message', body: 'Hello Ada' },
    });
    expect(move({}, facts({ sender: manual, send: approved('Hello Ada', true), outreachBlock: null }))).toMatchObject({
      awaiting: false,
    });
    expect(move({}, facts({ send: approved('Hello Ada', false), outreachBlock: null }))).toMatchObject({
      awaiting: false,
    });
    expect(
      move(
        {},
        facts({
          graph: pnetStep('inmail'),
          send: { ...approved('Body', true), subject: 'Subject' },
          outreachBlock: null,
        }),
      ),
    ).toMatchObject({
      params: { kind: 'inmail', subject: 'Subject', body: 'Body' },
    });
    expect(
      move({}, facts({ graph: pnetStep('connection_request'), send: approved('', true), outreachBlock: null })),
    ).toMatchObject({
      params: { kind: 'connection_request', note: null },
    });
  });

  it('sends a message the network cannot take back to a person, and passes over params no edit can fix', () => {
    const long = approved('x'.repeat(301), true);
    const back = move({}, facts({ graph: pnetStep('connection_request'), send: long, outreachBlock: null }));
    expect(back).toMatchObject({
      kind: 'return_for_edit',
      sendId: 'send-1',
      wait: { reason: 'approval', until: null, write: true },
    });
    expect((back as { reason: string }).reason).toMatch(/^invalid_message: note: /);
    expect(
      move({ profile_url: 'not a url' }, facts({ graph: pnetStep('follow_contact'), outreachBlock: null })),
    ).toEqual({
      kind: 'move_on',
      from: 'first',
      to: 'done',
      appendDone: false,
      reached: false,
    });
  });
});

describe('afterWrite and writtenSend', () => {
  const snap: AdvanceSnapshot = {
    contact: { ...contactBase, status: 'failed', current_step_id: null },
    claimedSendId: null,
  };

  it('gives the row as each continuing write leaves it, and nothing else', () => {
    expect(afterWrite(snap, { kind: 'start_at', stepId: 's' }).contact).toEqual({
      ...snap.contact,
      current_step_id: 's',
    });
    expect(afterWrite(snap, { kind: 'resume' }).contact).toEqual({ ...snap.contact, status: 'active' });
    expect(afterWrite(snap, { kind: 'start_timer', stepId: 'w', until: NOW }).contact).toEqual({
      ...snap.contact,
      wait_step_id: 'w',
      wait_until: NOW,
    });
    expect(afterWrite(snap, { kind: 'record_email', email: 'e@x' }).contact).toEqual({ ...snap.contact, email: 'e@x' });
    expect(snap.contact?.current_step_id).toBeNull(); // the snapshot given is not changed
  });

  it('holds what the agent wrote when it doubts it or the channel is manual, and approves it otherwise', () => {
    const step = emailStep().steps[0] as Extract<SequenceGraph['steps'][number], { type: 'email' }>;
    const written = { subject: 'S', body: 'B', needsReview: false, reason: null };
    expect(writtenSend(step, sequence, written)).toMatchObject({
      status: 'approved',
      reason: null,
      subject: 'S',
      body: 'B',
      channel: 'email',
    });
    expect(writtenSend(step, { ...sequence, email_mode: 'manual' }, written)).toMatchObject({
      status: 'awaiting_approval',
      reason: 'manual_mode',
    });
    expect(writtenSend(step, sequence, { ...written, needsReview: true, reason: 'unsure' })).toMatchObject({
      reason: 'agent_review: unsure',
    });
    expect(writtenSend(step, { ...sequence, email_mode: 'manual' }, { ...written, needsReview: true })).toMatchObject({
      reason: 'agent_review: needs review',
    });
  });
});
