/**
 * Training sessions through the real API, worker and `training-session/<id>` workflow. The worker
 * writes through a local chat-completions server whose answers for one named contact can be held
 * back, so "a note given while another contact is being written" is produced on purpose, never by
 * timing. Sessions are waited for by reading them, as a review screen would.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { openAiChatModel } from '../../integrations/chat-model.js';
import { getBalance } from '../../store/platform/credits.js';
import { grantWorkspaceCredits } from '../../worker/provisioning.js';
import { draftProposal, newDoc } from '../../domain/agents/training-sessions.js';
import { serveHttp, type LocalHttp } from '../../sim/local-http.js';
import { tablesClient } from '../support/tables.js';
import { useTestStack, withKey } from '../support/test-stack.js';

/** Writer calls for a person named here wait until released. */
const gate = { holding: null as string | null, waiting: [] as (() => void)[] };
let model: LocalHttp;

beforeAll(async () => {
  model = await serveHttp(async (req, res, raw) => {
    res.setHeader('content-type', 'application/json');
    const body = JSON.parse(raw) as { model: string; messages: { role: string; content: string }[] };
    const [system, user] = [body.messages[0]!.content, body.messages.at(-1)!.content];
    let content: string;
    if (system.includes('You improve the prompts')) {
      // The slot the agent does not have is ignored.
      content = JSON.stringify({
        summary: 'Name the company in the opener.',
        changes: [
          {
            slot_key: 'opener',
            proposed: 'Open warmly and name their company.',
            rationale: 'A reviewer asked for the company by name.',
          },
          { slot_key: 'no_such_slot', proposed: 'x', rationale: '' },
        ],
      });
    } else if (system.includes('You judge')) {
      content = JSON.stringify({
        grounded: true,
        language_ok: true,
        on_topic: true,
        safe: true,
        quality_score: 90,
        reasons: [],
      });
    } else {
      if (gate.holding && user.includes(`Person: ${gate.holding}`))
        await new Promise<void>((resolve) => gate.waiting.push(resolve));
      const person = /Person: (.*)/.exec(user)?.[1] ?? 'there';
      const title = /\[role\] (.*?) \(source/.exec(user)?.[1];
      const lessons = /Lessons from people[^\n]*\n((?:- .*\n?)*)/.exec(system)?.[1]?.trim() ?? '';
      content = JSON.stringify({
        angle: 'role',
        subject: `For ${person}`,
        body: `Hi ${person.split(' ')[0]}, as ${title ?? 'a leader'} you know the problem.${lessons ? ` (${lessons.replace(/\n/g, ' ')})` : ''}`,
        reasoning: 'Role first.',
        facts_used: title ? [title] : [],
        confidence_score: 80,
      });
    }
    res.end(
      JSON.stringify({
        id: 'chatcmpl-local',
        object: 'chat.completion',
        created: 1_700_000_000,
        model: body.model,
        choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop', logprobs: null }],
        usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
      }),
    );
  });
});
afterAll(async () => {
  for (const release of gate.waiting.splice(0)) release();
  await model?.close();
});

const { stack, paid } = useTestStack({
  chatModel: () =>
    openAiChatModel({ apiKey: 'local', model: 'local-model', baseUrl: `${model.url}/v1`, timeoutSeconds: 20 }),
});

type Contact = {
  record_id: string;
  label: string;
  state: string;
  verdict: string | null;
  notes: { note: string; state: string }[];
  messages: Message[];
  notice: string | null;
};
type Message = {
  id: string;
  title: string;
  subject: string | null;
  body: string;
  proposed_body: string | null;
  proposed_subject: string | null;
  previous_body: string | null;
  note: string | null;
  model_key: string;
};
type Session = {
  id: string;
  status: string;
  revision: number;
  note_waiting: boolean;
  base_version: number;
  applied_version: number | null;
  reviewed_ids: string[];
  contacts: Contact[];
  steps: { action: string; detail: string; outcome: string }[];
  progress: {
    fixed: number;
    in_a_row: number;
    reviewed: number;
    ready_after: number;
    ready: boolean;
    lessons: string[];
  };
  proposal: {
    summary: string;
    changes: { slot_key: string; current: string; proposed: string; rationale: string }[];
    made_at: number;
    record_id: string;
    round_ids: string[];
  } | null;
};

/** A sequence whose audience table has one row per person, with an agent of two slots attached. */
async function trainingSetup(people: string[], ws = paid) {
  const api = tablesClient(stack, withKey(ws.apiKey));
  const table = await api.table({ name: 'Prospects' });
  const name = await api.column(table.id, { kind: 'input', name: 'Name' });
  const title = await api.column(table.id, { kind: 'input', name: 'Title' });
  const company = await api.column(table.id, { kind: 'input', name: 'Company' });
  const rows: string[] = [];
  for (const [i, person] of people.entries()) {
    const res = await api.post(`/tables/${table.id}/rows/`, {
      cells: { [name.id]: person, [title.id]: `Head of Sales ${i}`, [company.id]: `Company ${i}` },
    });
    rows.push(res.json().id);
  }
  const [sequence] = await stack.sql<{ id: string }[]>`
    insert into sequences (workspace_id, name, audience_table_id) values (${ws.workspaceId}, 'Outbound', ${table.id}) returning id`;
  const agent = (
    await stack.app.inject({
      method: 'POST',
      url: '/outbound-agents/',
      headers: withKey(ws.apiKey),
      payload: {
        name: 'Trainee',
        slots: [
          { slot_key: 'opener', prompt: 'Open warmly.' },
          { slot_key: 'follow_up_1', prompt: 'Nudge.' },
        ],
      },
    })
  ).json<{ id: string }>();
  await stack.app.inject({
    method: 'PUT',
    url: `/sequences/${sequence!.id}/agent/`,
    headers: withKey(ws.apiKey),
    payload: { agent_id: agent.id },
  });
  const base = `/sequences/${sequence!.id}/agent/training/`;
  const call = (method: 'GET' | 'POST', url: string, payload?: object) =>
    stack.app.inject({ method, url: `${base}${url}`, headers: withKey(ws.apiKey), ...(payload ? { payload } : {}) });
  return { sequenceId: sequence!.id, agentId: agent.id, rows, base, call };
}

type Setup = Awaited<ReturnType<typeof trainingSetup>>;

async function start(setup: Setup, body: object): Promise<Session> {
  const res = await setup.call('POST', '', body);
  expect(res.statusCode).toBe(201);
  return res.json();
}

const until = (setup: Setup, sessionId: string, done: (s: Session) => boolean, what: string): Promise<Session> =>
  vi.waitFor(
    async () => {
      const session = (await setup.call('GET', `${sessionId}/`)).json<Session>();
      if (!done(session)) throw new Error(`gave up waiting for ${what}`);
      return session;
    },
    { timeout: 30_000, interval: 100 },
  );

const contact = (s: Session, recordId: string) => s.contacts.find((c) => c.record_id === recordId)!;
const verdict = (setup: Setup, sessionId: string, body: object) => setup.call('POST', `${sessionId}/verdicts/`, body);

describe('starting a training session', () => {
  it('caps ready_after at the samples there are, bounds sample_size at 1 to 20, and refuses a sequence with no agent or a second live session (409)', async () => {
    const setup = await trainingSetup(['Ann Lee']);
    const tooMany = await setup.call('POST', '', { sample_size: 21 });
    expect(tooMany.statusCode).toBe(422);
    expect(tooMany.json().issues[0].loc).toEqual(['body', 'sample_size']);
    expect((await setup.call('POST', '', { sample_size: 0 })).statusCode).toBe(422);
    const session = await start(setup, { sample_size: 20, ready_after: 3 });
    expect(session).toMatchObject({
      status: 'running',
      revision: 1,
      base_version: 1,
      applied_version: null,
      note_waiting: false,
    });
    expect(session.progress).toMatchObject({ ready_after: 1, in_a_row: 0, ready: false });
    expect(session.contacts.map((c) => [c.label, c.state])).toEqual([['Ann Lee', 'waiting_write']]);
    expect((await setup.call('POST', '', {})).statusCode).toBe(409);
    await stack.app.inject({
      method: 'PUT',
      url: `/sequences/${setup.sequenceId}/agent/`,
      headers: withKey(paid.apiKey),
      payload: { agent_id: null },
    });
    const [other] = await stack.sql<
      { id: string }[]
    >`insert into sequences (workspace_id, name) values (${paid.workspaceId}, 'No agent') returning id`;
    const noAgent = await stack.app.inject({
      method: 'POST',
      url: `/sequences/${other!.id}/agent/training/`,
      headers: withKey(paid.apiKey),
      payload: {},
    });
    expect(noAgent.statusCode).toBe(409);
    expect(noAgent.json().detail).toMatch(/no outbound agent/);
  });
});

describe('a training run', () => {
  it('writes every sample, learns from a note, gets ready, proposes a prompt update, and applying it makes a new agent version', async () => {
    // A workspace of its own, so its balance moves only with this session's writes.
    const ws = await stack.createWorkspace('paid');
    await grantWorkspaceCredits(stack.sql, { workspaceId: ws.workspaceId, amount: 100, causeKey: 'test-grant' });
    const setup = await trainingSetup(['Ann Lee', 'Bo Chen', 'Cy Diaz'], ws);
    const before = await getBalance(stack.sql, ws.workspaceId);
    const started = await start(setup, { sample_size: 3, ready_after: 2 });
    let session = await until(setup, started.id, (s) => s.status === 'reviewing', 'reviewing');
    expect(session.contacts).toHaveLength(3);
    expect(session.contacts.every((c) => c.state === 'awaiting_verdict' && c.messages.length === 2)).toBe(true);
    const [ann, bo, cy] = setup.rows as [string, string, string];
    expect(contact(session, ann).messages.map((m) => [m.title, m.subject, m.model_key])).toEqual([
      ['opener', 'For Ann Lee', 'local-model'],
      ['follow_up_1', 'For Ann Lee', 'local-model'],
    ]);
    // Six model-written messages, each charged its price once.
    expect((await getBalance(stack.sql, ws.workspaceId)).spent - before.spent).toBe(12);

    expect(
      (await verdict(setup, session.id, { record_id: ann, verdict: 'note', note: 'x'.repeat(2001) })).statusCode,
    ).toBe(422);
    expect((await verdict(setup, session.id, { record_id: ann, verdict: 'note' })).statusCode).toBe(422);
    const noted = await verdict(setup, session.id, {
      record_id: ann,
      verdict: 'note',
      note: 'Mention their company by name.',
    });
    expect(noted.statusCode).toBe(200);
    expect(contact(noted.json(), ann)).toMatchObject({
      verdict: 'note',
      notes: [{ note: 'Mention their company by name.', state: 'pending' }],
    });
    session = await until(setup, session.id, (s) => contact(s, ann).state === 'awaiting_verdict', 'the rewrite');
    const rewritten = contact(session, ann);
    expect(rewritten.notes).toEqual([{ note: 'Mention their company by name.', state: 'learned' }]);
    expect(rewritten.messages[0]!.proposed_body).toContain('Mention their company by name.');
    expect(rewritten.messages[0]!.body).not.toContain('Mention their company');
    expect(session.progress).toMatchObject({
      lessons: ['Mention their company by name.'],
      in_a_row: 0,
      reviewed: 1,
      ready: false,
    });

    // Looks good keeps the rewrite: it replaces the thread as written.
    session = (
      await verdict(setup, session.id, { record_id: ann, verdict: 'looks_good', expected_revision: session.revision })
    ).json();
    expect(contact(session, ann).messages[0]).toMatchObject({
      proposed_body: null,
      previous_body: rewritten.messages[0]!.body,
    });
    expect(contact(session, ann).messages[0]!.body).toContain('Mention their company by name.');
    expect(session.progress).toMatchObject({ fixed: 1, in_a_row: 1, ready: false });
    session = (await verdict(setup, session.id, { record_id: bo, verdict: 'looks_good' })).json();
    expect(session.progress).toMatchObject({ in_a_row: 2, ready: true, reviewed: 3 });
    expect(session.reviewed_ids.sort()).toEqual([ann, bo].sort());

    session = await until(setup, session.id, (s) => s.status === 'proposed', 'a proposal');
    // Drafted by the model from the lessons: only the slot it changed, with the current prompt beside it.
    expect(session.proposal).toMatchObject({
      summary: 'Name the company in the opener.',
      changes: [
        {
          slot_key: 'opener',
          current: 'Open warmly.',
          proposed: 'Open warmly and name their company.',
          rationale: 'A reviewer asked for the company by name.',
        },
      ],
      round_ids: expect.arrayContaining([ann, bo]),
    });
    expect(session.steps.map((s) => s.action)).toEqual([
      'write_messages',
      'write_messages',
      'write_messages',
      'rewrite_messages',
      'propose_update',
    ]);
    // A proposed session takes no more verdicts.
    expect((await verdict(setup, session.id, { record_id: cy, verdict: 'looks_good' })).statusCode).toBe(409);

    const stale = await setup.call('POST', `${session.id}/apply/`, { expected_revision: session.revision - 1 });
    expect(stale.statusCode).toBe(409);
    const applied = await setup.call('POST', `${session.id}/apply/`, { expected_revision: session.revision });
    expect(applied.statusCode).toBe(200);
    expect(applied.json()).toMatchObject({ status: 'completed', applied_version: 2, revision: session.revision + 1 });
    const agent = (
      await stack.app.inject({ method: 'GET', url: `/outbound-agents/${setup.agentId}/`, headers: withKey(ws.apiKey) })
    ).json();
    expect(agent.version).toBe(2);
    expect(agent.slots.map((slot: { prompt: string }) => slot.prompt)).toEqual([
      'Open warmly and name their company.',
      'Nudge.',
    ]);
    const versions = (
      await stack.app.inject({
        method: 'GET',
        url: `/outbound-agents/${setup.agentId}/versions/`,
        headers: withKey(ws.apiKey),
      })
    ).json().versions;
    expect(versions[0].origin).toBe(`training:${session.id}`);
    // A finished session changes no more.
    expect((await setup.call('POST', `${session.id}/close/`, {})).statusCode).toBe(409);
    const listed = (await setup.call('GET', '')).json().sessions;
    expect(listed.map((s: Session) => [s.id, s.status])).toEqual([[session.id, 'completed']]);
  });

  it('abandoning the proposal leaves the agent as it was', async () => {
    const setup = await trainingSetup(['Dee Fox']);
    const started = await start(setup, { sample_size: 1, ready_after: 1 });
    let session = await until(setup, started.id, (s) => s.status === 'reviewing', 'reviewing');
    await verdict(setup, session.id, { record_id: setup.rows[0], verdict: 'looks_good' });
    session = await until(setup, session.id, (s) => s.status === 'proposed', 'a proposal');
    expect(session.proposal).toMatchObject({ changes: [], summary: expect.stringContaining('no change') });
    const abandoned = await setup.call('POST', `${session.id}/abandon/`, { expected_revision: session.revision });
    expect(abandoned.json()).toMatchObject({ status: 'abandoned', applied_version: null });
    const agent = (
      await stack.app.inject({
        method: 'GET',
        url: `/outbound-agents/${setup.agentId}/`,
        headers: withKey(paid.apiKey),
      })
    ).json();
    expect(agent.version).toBe(1);
  });

  it('closing a run ends it as abandoned from any live status, and it takes no verdict after', async () => {
    const setup = await trainingSetup(['Eve Gold', 'Fay Hill']);
    const started = await start(setup, { sample_size: 2, ready_after: 2 });
    const session = await until(setup, started.id, (s) => s.status === 'reviewing', 'reviewing');
    const closed = await setup.call('POST', `${session.id}/close/`, {});
    expect(closed.json()).toMatchObject({ status: 'abandoned' });
    const late = await verdict(setup, session.id, { record_id: setup.rows[0], verdict: 'looks_good' });
    expect(late.statusCode).toBe(409);
  });

  it('a note given while another contact is being written sets note_waiting, and its rewrite runs as soon as that write lands', async () => {
    const setup = await trainingSetup(['Gil Ives', 'Hal Jones', 'Ida King']);
    const [gil, hal] = setup.rows as [string, string, string];
    gate.holding = 'Hal Jones';
    const started = await start(setup, { sample_size: 3, ready_after: 3 });
    let session = await until(
      setup,
      started.id,
      (s) => contact(s, gil).state === 'awaiting_verdict' && contact(s, hal).state === 'writing',
      'Hal being written',
    );
    const noted = (
      await verdict(setup, session.id, { record_id: gil, verdict: 'note', note: 'Shorter, please.' })
    ).json<Session>();
    expect(noted.note_waiting).toBe(true);
    expect(contact(noted, gil)).toMatchObject({
      state: 'rewrite_queued',
      notes: [{ note: 'Shorter, please.', state: 'pending' }],
    });
    gate.holding = null;
    for (const release of gate.waiting.splice(0)) release();
    session = await until(setup, session.id, (s) => s.status === 'reviewing', 'reviewing');
    expect(session.note_waiting).toBe(false);
    expect(contact(session, gil).notes).toEqual([{ note: 'Shorter, please.', state: 'learned' }]);
    // Worked out as soon as Hal's write landed: before Ida's first write.
    expect(session.steps.map((s) => `${s.action} ${s.detail}`)).toEqual([
      'write_messages Gil Ives',
      'write_messages Hal Jones',
      'rewrite_messages Gil Ives',
      'write_messages Ida King',
    ]);
  });
});

describe('discardTrainingChanges: discard-changes', () => {
  it('drops the rewrite and its lesson, keeps the thread as written and its notes as discarded, and the contact waits again', async () => {
    const setup = await trainingSetup(['Jo Lane', 'Kim Moss']);
    const [jo, kim] = setup.rows as [string, string];
    const started = await start(setup, { sample_size: 2, ready_after: 2 });
    let session = await until(setup, started.id, (s) => s.status === 'reviewing', 'reviewing');
    const asWritten = contact(session, jo).messages.map((m) => [m.subject, m.body]);
    await verdict(setup, session.id, { record_id: kim, verdict: 'looks_good' });
    await verdict(setup, session.id, { record_id: jo, verdict: 'note', note: 'Drop the jargon.' });
    session = await until(setup, session.id, (s) => contact(s, jo).state === 'awaiting_verdict', 'the rewrite');
    expect(contact(session, jo).messages[0]!.proposed_body).toContain('Drop the jargon.');
    expect(session.progress.lessons).toEqual(['Drop the jargon.']);

    const discard = (body: object) => setup.call('POST', `${session.id}/discard-changes/`, body);
    // 1 is a valid expected_revision (the session is past it, so it is stale: 409, not 422).
    expect((await discard({ expected_revision: 1 })).statusCode).toBe(409);
    // Bounds: expected_revision is required and at least 1.
    expect((await discard({})).statusCode).toBe(422);
    const zero = await discard({ expected_revision: 0 });
    expect(zero.statusCode).toBe(422);
    expect(zero.json().issues[0]).toMatchObject({ loc: ['body', 'expected_revision'] });
    // A stale revision: 409, and nothing changed.
    const stale = await discard({ expected_revision: session.revision - 1 });
    expect(stale.statusCode).toBe(409);
    expect(Object.keys(stale.json())).toEqual(['detail']);
    expect((await setup.call('GET', `${session.id}/`)).json()).toEqual(session);

    const res = await discard({ expected_revision: session.revision });
    expect(res.statusCode).toBe(200);
    const after = res.json<Session>();
    expect(after.revision).toBe(session.revision + 1);
    expect(after.status).toBe('reviewing');
    const joAfter = contact(after, jo);
    expect(joAfter).toMatchObject({
      verdict: null,
      state: 'awaiting_verdict',
      notes: [{ note: 'Drop the jargon.', state: 'discarded' }],
    });
    expect(joAfter.messages.map((m) => [m.subject, m.body])).toEqual(asWritten);
    expect(
      joAfter.messages.every(
        (m) => m.proposed_body === null && m.proposed_subject === null && m.previous_body === null,
      ),
    ).toBe(true);
    expect(after.progress.lessons).toEqual([]);
    // Kim's verdict and the run's history are untouched.
    expect(contact(after, kim)).toMatchObject({ verdict: 'looks_good', state: 'reviewed' });
    expect(after.reviewed_ids.sort()).toEqual([jo, kim].sort());

    // Nothing is left to discard now: 409, nothing changed.
    const again = await discard({ expected_revision: after.revision });
    expect(again.statusCode).toBe(409);
    expect(again.json().detail).toMatch(/no rewrite to discard/);
    // The contact waits for a verdict again and takes one.
    const good = (await verdict(setup, session.id, { record_id: jo, verdict: 'looks_good' })).json<Session>();
    expect(contact(good, jo)).toMatchObject({ verdict: 'looks_good', state: 'reviewed' });
    expect(good.progress.fixed).toBe(0);
    expect(contact(good, jo).messages.map((m) => [m.subject, m.body])).toEqual(asWritten);
  });

  it('answers 404 for a session of another sequence or workspace', async () => {
    const setup = await trainingSetup(['Lu Nash']);
    const started = await start(setup, { sample_size: 1, ready_after: 1 });
    const other = await trainingSetup(['Mo Orr']);
    expect((await other.call('POST', `${started.id}/discard-changes/`, { expected_revision: 1 })).statusCode).toBe(404);
    expect((await other.call('GET', `${started.id}/`)).statusCode).toBe(404);
  });
});

describe('the local proposal drafter (no model)', () => {
  it('adds the active lessons to every slot prompt, replacing lessons an earlier training added', () => {
    const doc = newDoc([], 1);
    doc.lesson_log.push({ lesson: 'Be brief.', record_id: crypto.randomUUID(), round: 1, state: 'active' });
    doc.lesson_log.push({ lesson: 'Dropped.', record_id: crypto.randomUUID(), round: 1, state: 'discarded' });
    const proposal = draftProposal(
      { head: { status: 'proposing', note_waiting: false, error: '' }, doc },
      [{ slot_key: 'opener', kind: 'email', prompt: 'Say hi.\n\nLessons from training:\n- Old lesson.' }],
      7,
      crypto.randomUUID(),
    );
    expect(proposal.changes).toEqual([
      {
        slot_key: 'opener',
        current: 'Say hi.\n\nLessons from training:\n- Old lesson.',
        proposed: 'Say hi.\n\nLessons from training:\n- Be brief.',
        rationale: expect.stringContaining('"Be brief."'),
      },
    ]);
    expect(proposal.made_at).toBe(7);
  });
});
