import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { StepRow } from '../../store/pnet/steps.js';
import { wakeSequenceContacts } from '../../services/sequences/stops.js';
import {
  approvalsPageMax,
  bodyMax,
  contactPageMax,
  enrolRowsMax,
  graphStepsMax,
  nextBusinessMoment,
  sendersMax,
  subjectMax,
  validateGraph,
  waitDaysMax,
  waitUntil,
  type SequenceGraph,
} from '../../domain/sequences/sequences.js';
import { stepPrices } from '../../domain/pnet/limits.js';
import { zonedInstant } from '../../domain/shared/zoned-time.js';
import { connectedAccount } from '../support/pnet.js';
import { sequencesApi, startSmtpServer, type Audience, type SequencesApi } from '../support/sequences.js';
import { useTestStack, withKey } from '../support/test-stack.js';

let smtp: Awaited<ReturnType<typeof startSmtpServer>>;
beforeAll(async () => {
  smtp = await startSmtpServer();
  process.env.SMTP_URL = smtp.url;
  process.env.SMTP_FROM = 'outreach@mail.example';
  process.env.SEQUENCE_FEED_POLL_SECONDS = '1';
});
afterAll(() => smtp?.close());

const { stack, paid } = useTestStack();
let api: SequencesApi;
beforeAll(() => {
  api = sequencesApi(stack, paid);
});

const email = (id: string, next: string, extra: object = {}) => ({
  id,
  type: 'email',
  subject_segments: [{ kind: 'text', text: `Subject ${id}` }],
  body_segments: [
    { kind: 'text', text: 'Hi ' },
    { kind: 'builtin', builtin: 'first_name' },
  ],
  next,
  ...extra,
});
const end = { id: 'done', type: 'end' };

/**
 * A launched automatic sequence of the one pnet `step`, sent from `senderProfileId`, and the
 * enrolment of a new audience row with `profile`.
 */
async function enrolInOnePnetStep(
  on: { api: SequencesApi; audience: Audience },
  senderProfileId: string,
  step: { id: string; action: string },
  profile: string,
) {
  const seq = await on.api.sequence({
    audience_table_id: on.audience.tableId,
    audience_mapping: on.audience.mapping,
    pnet_mode: 'automatic',
    senders: [{ sender_profile_id: senderProfileId }],
    graph: { start: step.id, steps: [{ id: step.id, type: 'pnet', action: step.action, next: 'done' }, end] },
  });
  await on.api.launch(seq.id);
  const [r] = await on.api.enrol(seq.id, [await on.audience.addRow({ profile })]);
  return { seq, r };
}
const oneEmail = { start: 'hello', steps: [email('hello', 'done'), end] };
const mailsTo = (address: string) => smtp.received.filter((m) => JSON.stringify(m.to).includes(address));

describe('the step graph (pure)', () => {
  const g = (steps: object[], start = 'a') => ({ start, steps }) as SequenceGraph;
  it('accepts a graph whose loop passes a wait, and refuses one that loops without waiting', () => {
    const loop = [
      { id: 'a', type: 'branch', condition: 'connected', if_true: 'done', if_false: 'w' },
      { id: 'w', type: 'wait', days: 1, hours: 0, minutes: 0, business_hours: true, next: 'a' },
      { id: 'done', type: 'end' },
    ];
    expect(validateGraph(g(loop))).toEqual([]);
    const spin = [
      { id: 'a', type: 'branch', condition: 'connected', if_true: 'done', if_false: 'b' },
      { id: 'b', type: 'wait', days: 0, hours: 0, minutes: 0, business_hours: false, next: 'a' },
      { id: 'done', type: 'end' },
    ];
    expect(validateGraph(g(spin)).map((i) => i.type)).toEqual(['loop_without_wait']);
  });

  it('names unknown targets, a missing start, duplicate ids and unreachable steps', () => {
    expect(validateGraph(g([{ id: 'a', type: 'end' }], 'zz')).map((i) => i.type)).toEqual(['unknown_step']);
    expect(
      validateGraph(
        g([{ id: 'a', type: 'wait', days: 1, hours: 0, minutes: 0, business_hours: true, next: 'nowhere' }]),
      ).map((i) => i.input),
    ).toEqual(['nowhere']);
    expect(
      validateGraph(
        g([
          { id: 'a', type: 'end' },
          { id: 'a', type: 'end' },
        ]),
      ).map((i) => i.type),
    ).toEqual(['duplicate_step']);
    expect(
      validateGraph(
        g([
          { id: 'a', type: 'end' },
          { id: 'orphan', type: 'end' },
        ]),
      ),
    ).toEqual([
      {
        loc: ['body', 'graph.steps.1'],
        msg: 'Step "orphan" cannot be reached from the start',
        type: 'unreachable_step',
        input: 'orphan',
      },
    ]);
  });

  it("ends waits in the sender's business hours, by local calendar days across daylight-saving changes", () => {
    const ny = 'America/New_York';
    const wait = { days: 1, hours: 0, minutes: 0, business_hours: true };
    // Tuesday 10:15 + 1 day = Wednesday 10:15, inside business hours.
    expect(waitUntil(zonedInstant({ year: 2027, month: 6, day: 1 }, 10, 15, ny), wait, ny)).toEqual(
      zonedInstant({ year: 2027, month: 6, day: 2 }, 10, 15, ny),
    );
    // Saturday 2027-11-06 11:00 EDT + 2 days = Monday 11:00 EST (25 + 24 hours later).
    expect(waitUntil(zonedInstant({ year: 2027, month: 11, day: 6 }, 11, 0, ny), { ...wait, days: 2 }, ny)).toEqual(
      zonedInstant({ year: 2027, month: 11, day: 8 }, 11, 0, ny),
    );
    // After 17:00 moves to the next morning; Friday evening to Monday.
    expect(nextBusinessMoment(zonedInstant({ year: 2027, month: 6, day: 1 }, 17, 0, ny), ny)).toEqual(
      zonedInstant({ year: 2027, month: 6, day: 2 }, 9, 0, ny),
    );
    expect(nextBusinessMoment(zonedInstant({ year: 2027, month: 6, day: 4 }, 18, 0, ny), ny)).toEqual(
      zonedInstant({ year: 2027, month: 6, day: 7 }, 9, 0, ny),
    );
    // Without business hours the wait is plain.
    expect(
      waitUntil(new Date('2027-06-05T12:00:00Z'), { days: 0, hours: 5, minutes: 30, business_hours: false }, 'UTC'),
    ).toEqual(new Date('2027-06-05T17:30:00Z'));
  });
});

describe('sequences', () => {
  let audience: Audience;
  beforeAll(async () => {
    audience = await api.audience();
  });

  it('creates a draft sequence with every field and reads it back', async () => {
    const sender = await api.sender();
    const seq = await api.sequence({
      name: 'Q3 outreach',
      audience_table_id: audience.tableId,
      audience_mapping: { email_column_id: audience.columns.email },
      senders: [{ sender_profile_id: sender, from_email: 'me@sender.example' }],
      graph: oneEmail,
    });
    expect(seq).toEqual({
      id: expect.any(String),
      name: 'Q3 outreach',
      status: 'draft',
      audience_table_id: audience.tableId,
      audience_mapping: {
        email_column_id: audience.columns.email,
        profile_url_column_id: null,
        first_name_column_id: null,
        last_name_column_id: null,
        company_name_column_id: null,
      },
      feed_new_rows: false,
      email_mode: 'manual',
      pnet_mode: 'manual',
      senders: [{ sender_profile_id: sender, from_email: 'me@sender.example', from_name: null }],
      version: 1,
      graph: expect.objectContaining({ start: 'hello' }),
      revision: 1,
      contact_counts: { active: 0, paused: 0, failed: 0, stopped: 0, completed: 0 },
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    expect((await api.get(`/sequences/${seq.id}/`)).json()).toEqual(seq);
    expect((await api.get('/sequences/')).json().sequences[0].id).toBe(seq.id);
    expect((await api.get('/sequences/00000000-0000-4000-8000-000000000000/')).statusCode).toBe(404);
  });

  it('answers a graph that does not hold together with 422 issues', async () => {
    const res = await api.post('/sequences/', {
      name: 'Broken',
      graph: { start: 'hello', steps: [email('hello', 'missing'), end] },
    });
    expect(res.statusCode).toBe(422);
    expect(res.json().issues.map((i: { type: string }) => i.type)).toEqual(['unknown_step']);
    const unreachable = await api.post('/sequences/', {
      name: 'Broken',
      graph: { start: 'done', steps: [end, email('hello', 'done')] },
    });
    expect(unreachable.json().issues[0]).toMatchObject({ type: 'unreachable_step', input: 'hello' });
  });

  it('refuses an audience table, column or sender of another workspace', async () => {
    const other = await stack.createWorkspace('paid');
    const foreign = sequencesApi(stack, other);
    const foreignAudience = await foreign.audience();
    expect((await api.post('/sequences/', { name: 'X', audience_table_id: foreignAudience.tableId })).statusCode).toBe(
      404,
    );
    expect(
      (
        await api.post('/sequences/', {
          name: 'X',
          audience_table_id: audience.tableId,
          audience_mapping: { email_column_id: foreignAudience.columns.email },
        })
      ).statusCode,
    ).toBe(409);
    expect(
      (await api.post('/sequences/', { name: 'X', senders: [{ sender_profile_id: await foreign.sender() }] }))
        .statusCode,
    ).toBe(404);
  });

  it('bounds names, steps, senders, waits and revisions', async () => {
    const post = (body: object) => api.post('/sequences/', { name: 'Bounds', ...body });
    expect((await post({ name: 'n'.repeat(255) })).statusCode).toBe(201);
    expect((await post({ name: 'n'.repeat(256) })).statusCode).toBe(422);
    // A sender's address: at most 254 characters, one plain pattern (no label ending in a hyphen).
    const sender = await api.sender();
    const address = (length: number) => `${'a'.repeat(length - '@sender.example'.length)}@sender.example`;
    expect((await post({ senders: [{ sender_profile_id: sender, from_email: address(254) }] })).statusCode).toBe(201);
    expect((await post({ senders: [{ sender_profile_id: sender, from_email: address(255) }] })).statusCode).toBe(422);
    expect((await post({ senders: [{ sender_profile_id: sender, from_email: 'me@h-.example' }] })).statusCode).toBe(
      422,
    );
    const chain = (n: number) => ({
      start: 's0',
      steps: [
        ...Array.from({ length: n - 1 }, (_, i) => ({
          id: `s${i}`,
          type: 'wait',
          hours: 1,
          next: i === n - 2 ? 'done' : `s${i + 1}`,
        })),
        end,
      ],
    });
    expect((await post({ graph: chain(graphStepsMax) })).statusCode).toBe(201);
    const tooLong = await post({ graph: chain(graphStepsMax + 1) });
    expect(tooLong.statusCode).toBe(422);
    expect(tooLong.json().issues[0].loc).toEqual(['body', 'graph.steps']);
    const waitOf = (w: object) => ({ start: 'w', steps: [{ id: 'w', type: 'wait', next: 'done', ...w }, end] });
    expect((await post({ graph: waitOf({ days: waitDaysMax }) })).statusCode).toBe(201);
    expect((await post({ graph: waitOf({ days: waitDaysMax + 1 }) })).statusCode).toBe(422);
    expect((await post({ graph: waitOf({ hours: 23, minutes: 59 }) })).statusCode).toBe(201);
    expect((await post({ graph: waitOf({ hours: 24 }) })).statusCode).toBe(422);
    expect((await post({ graph: waitOf({ minutes: 60 }) })).statusCode).toBe(422);
    expect((await post({ graph: waitOf({ days: -1 }) })).statusCode).toBe(422);
    expect(
      (await post({ graph: { start: 'a'.repeat(64), steps: [{ id: 'a'.repeat(64), type: 'end' }] } })).statusCode,
    ).toBe(201);
    expect(
      (await post({ graph: { start: 'a'.repeat(65), steps: [{ id: 'a'.repeat(65), type: 'end' }] } })).statusCode,
    ).toBe(422);
    expect((await post({ graph: { start: 'Bad-Id', steps: [{ id: 'Bad-Id', type: 'end' }] } })).statusCode).toBe(422);
    expect((await post({ graph: { start: 'a', steps: [] } })).statusCode).toBe(422);

    const senders = [];
    for (let i = 0; i < sendersMax; i++) senders.push({ sender_profile_id: await api.sender() });
    expect((await post({ senders })).statusCode).toBe(201);
    const tooMany = await post({ senders: [...senders, { sender_profile_id: await api.sender() }] });
    expect(tooMany.statusCode).toBe(422);
    expect(tooMany.json().issues[0].loc).toEqual(['body', 'senders']);
    expect((await post({ senders: [senders[0], senders[0]] })).statusCode).toBe(409);

    const seq = await api.sequence({});
    expect((await api.patch(`/sequences/${seq.id}/`, { expected_revision: 0, name: 'x' })).statusCode).toBe(422);
    expect((await api.patch(`/sequences/${seq.id}/`, { name: 'x' })).statusCode).toBe(422);
    const stale = await api.patch(`/sequences/${seq.id}/`, { expected_revision: 2, name: 'x' });
    expect(stale.statusCode).toBe(409);
    expect((await api.get(`/sequences/${seq.id}/`)).json().name).toBe('Outreach');
  });

  it('bounds enrolment at 1 to 1000 rows and the list pages at their limits', async () => {
    const seq = await api.sequence({ audience_table_id: audience.tableId, audience_mapping: audience.mapping });
    expect((await api.post(`/sequences/${seq.id}/contacts/`, { row_ids: [] })).statusCode).toBe(422);
    const ids = Array.from({ length: enrolRowsMax }, () => crypto.randomUUID());
    const full = await api.post(`/sequences/${seq.id}/contacts/`, { row_ids: ids });
    expect(full.statusCode).toBe(200);
    expect(full.json().results).toHaveLength(enrolRowsMax);
    expect(full.json().results.every((r: { reason: string }) => r.reason === 'row_not_found')).toBe(true);
    expect(
      (await api.post(`/sequences/${seq.id}/contacts/`, { row_ids: [...ids, crypto.randomUUID()] })).statusCode,
    ).toBe(422);
    expect((await api.get(`/sequences/${seq.id}/contacts/?limit=${contactPageMax}`)).statusCode).toBe(200);
    expect((await api.get(`/sequences/${seq.id}/contacts/?limit=${contactPageMax + 1}`)).statusCode).toBe(422);
    expect((await api.get(`/sequences/${seq.id}/contacts/?limit=0`)).statusCode).toBe(422);
    expect((await api.get(`/sequences/approvals/?limit=${approvalsPageMax}`)).statusCode).toBe(200);
    expect((await api.get(`/sequences/approvals/?limit=${approvalsPageMax + 1}`)).statusCode).toBe(422);
  });

  it('bounds the recontact cooldown at 0 to 365 days', async () => {
    expect((await api.get('/sequences/settings/')).json()).toEqual({ recontact_cooldown_days: 30 });
    expect((await api.patch('/sequences/settings/', { recontact_cooldown_days: 365 })).json()).toEqual({
      recontact_cooldown_days: 365,
    });
    expect((await api.patch('/sequences/settings/', { recontact_cooldown_days: 366 })).statusCode).toBe(422);
    expect((await api.patch('/sequences/settings/', { recontact_cooldown_days: -1 })).statusCode).toBe(422);
    expect((await api.patch('/sequences/settings/', { recontact_cooldown_days: 0 })).json()).toEqual({
      recontact_cooldown_days: 0,
    });
    expect((await api.patch('/sequences/settings/', { recontact_cooldown_days: 30 })).statusCode).toBe(200);
  });

  it('answers each row of a bulk enrolment on its own, and spreads contacts across senders who keep them', async () => {
    const [s1, s2] = [await api.sender(), await api.sender()];
    const seq = await api.sequence({
      audience_table_id: audience.tableId,
      audience_mapping: audience.mapping,
      senders: [{ sender_profile_id: s1 }, { sender_profile_id: s2 }],
      graph: oneEmail,
    });
    const other = await api.sequence({
      audience_table_id: audience.tableId,
      audience_mapping: audience.mapping,
      graph: oneEmail,
    });
    const good = await Promise.all(
      ['a1', 'a2', 'a3', 'a4'].map((n) =>
        audience.addRow({ email: `${n}-${seq.id.slice(0, 6)}@example.com`, first: n }),
      ),
    );
    const noAddress = await audience.addRow({ first: 'Nobody' });
    const dnc = await audience.addRow({ email: `dnc-${seq.id.slice(0, 6)}@example.com` });
    await stack.sql`insert into do_not_contact_entries (workspace_id, kind, value) values (${paid.workspaceId}, 'email', ${`dnc-${seq.id.slice(0, 6)}@example.com`})`;
    const elsewhere = await audience.addRow({ email: `busy-${seq.id.slice(0, 6)}@example.com` });
    expect((await api.enrol(other.id, [elsewhere]))[0]!.status).toBe('enrolled');
    const profileOnly = await audience.addRow({ profile: `https://www.pnet.example/in/only-${seq.id.slice(0, 6)}/` });
    const missing = crypto.randomUUID();

    const results = await api.enrol(seq.id, [...good, noAddress, dnc, elsewhere, profileOnly, missing, good[0]!]);
    expect(results.map((r) => [r.status, r.reason])).toEqual([
      ['enrolled', null],
      ['enrolled', null],
      ['enrolled', null],
      ['enrolled', null],
      ['refused', 'no_address'],
      ['refused', 'do_not_contact'],
      ['refused', 'active_elsewhere'],
      ['enrolled', null],
      ['refused', 'row_not_found'],
      // The same row twice in one request: the same answer both times.
      ['enrolled', null],
    ]);
    expect(results[9]!.contact!.id).toBe(results[0]!.contact!.id);
    const senders = results
      .slice(0, 4)
      .map((r) => (r.contact as unknown as { sender_profile_id: string }).sender_profile_id);
    expect(senders.filter((s) => s === s1)).toHaveLength(2);
    expect(senders.filter((s) => s === s2)).toHaveLength(2);
    const again = await api.enrol(seq.id, [good[0]!]);
    expect(again[0]).toMatchObject({
      status: 'already_enrolled',
      contact: { sender_profile_id: senders[0], contact_key: `${seq.id}:${good[0]}` },
    });
    expect((await api.get(`/sequences/${seq.id}/`)).json().contact_counts.active).toBe(5);
    const page = (await api.get(`/sequences/${seq.id}/contacts/?limit=2`)).json();
    expect(page.contacts).toHaveLength(2);
    const rest = (await api.get(`/sequences/${seq.id}/contacts/?limit=10&after=${page.next_after}`)).json();
    expect(rest.contacts).toHaveLength(3);
    expect(rest.next_after).toBeNull();
    // Draft: they wait for the launch.
    const first = await api.waitFor(
      seq.id,
      results[0]!.contact!.id,
      (c) => (c.wait as { reason: string } | null)?.reason === 'sequence_draft',
    );
    expect(first.current_step_id).toBeNull();
  });

  it('enrols one person once per sequence, whichever rows carry them', async () => {
    const seq = await api.sequence({
      audience_table_id: audience.tableId,
      audience_mapping: audience.mapping,
      graph: oneEmail,
    });
    const tag = seq.id.slice(0, 6);
    const first = await audience.addRow({ email: `Same-${tag}@Example.com` });
    const twin = await audience.addRow({ email: ` same-${tag}@example.com ` });
    const profileTwin = await audience.addRow({ profile: `https://www.pnet.example/in/same-${tag}/?ref=x` });
    const profileFirst = await audience.addRow({ profile: `https://pnet.example/in/Same-${tag}` });
    const results = await api.enrol(seq.id, [first, twin, profileFirst, profileTwin]);
    expect(results.map((r) => [r.status, r.reason])).toEqual([
      ['enrolled', null],
      ['refused', 'duplicate_person'],
      ['enrolled', null],
      ['refused', 'duplicate_person'],
    ]);
    const later = await api.enrol(seq.id, [twin]);
    expect(later[0]).toMatchObject({ status: 'refused', reason: 'already_in_sequence' });
  });

  it('refuses a person reached by another sequence inside the cooldown', async () => {
    const seq = await api.sequence({
      audience_table_id: audience.tableId,
      audience_mapping: audience.mapping,
      graph: oneEmail,
    });
    const other = await api.sequence({
      audience_table_id: audience.tableId,
      audience_mapping: audience.mapping,
      graph: oneEmail,
    });
    const address = `cool-${seq.id.slice(0, 6)}@example.com`;
    const row = await audience.addRow({ email: address });
    const [done] = await api.enrol(other.id, [row]);
    await stack.sql`update sequence_contacts set status = 'completed', last_reached_at = now() - interval '10 days' where id = ${done!.contact!.id}`;
    expect((await api.enrol(seq.id, [row]))[0]).toMatchObject({ status: 'refused', reason: 'recontact_cooldown' });
    await api.patch('/sequences/settings/', { recontact_cooldown_days: 7 });
    try {
      expect((await api.enrol(seq.id, [row]))[0]).toMatchObject({ status: 'enrolled' });
    } finally {
      await api.patch('/sequences/settings/', { recontact_cooldown_days: 30 });
    }
  });

  it('makes a new version when a sequence with contacts is edited; its contacts stay on theirs', async () => {
    const seq = await api.sequence({
      audience_table_id: audience.tableId,
      audience_mapping: audience.mapping,
      graph: oneEmail,
    });
    const edited = (
      await api.patch(`/sequences/${seq.id}/`, { expected_revision: 1, graph: { start: 'done', steps: [end] } })
    ).json();
    expect(edited).toMatchObject({ version: 1, revision: 2, graph: { start: 'done' } });
    const [enrolled] = await api.enrol(seq.id, [
      await audience.addRow({ email: `v-${seq.id.slice(0, 6)}@example.com` }),
    ]);
    const v2 = (await api.patch(`/sequences/${seq.id}/`, { expected_revision: 2, graph: oneEmail })).json();
    expect(v2).toMatchObject({ version: 2, revision: 3, graph: { start: 'hello' } });
    expect((await api.contact(seq.id, enrolled!.contact!.id)).version).toBe(1);
    const versions = (await api.get(`/sequences/${seq.id}/versions/`)).json().versions;
    expect(versions.map((v: { version: number; contacts: number }) => [v.version, v.contacts])).toEqual([
      [1, 1],
      [2, 0],
    ]);
    const migrated = await api.post(`/sequences/${seq.id}/contacts/migrate/`, {
      contact_ids: [enrolled!.contact!.id],
      to_version: 2,
      at_step_id: 'nowhere',
    });
    expect(migrated.json().results[0]).toMatchObject({ migrated: false, reason: 'step_not_found' });
    const ok = await api.post(`/sequences/${seq.id}/contacts/migrate/`, {
      contact_ids: [enrolled!.contact!.id],
      to_version: 2,
      at_step_id: 'hello',
    });
    expect(ok.json().results[0]).toMatchObject({ migrated: true, contact: { version: 2, current_step_id: 'hello' } });

    // The largest request: every id answered in order, unknown and repeated ones included; one more is 422.
    const unknown = Array.from({ length: enrolRowsMax - 2 }, () => crypto.randomUUID());
    const largest = [enrolled!.contact!.id, ...unknown, enrolled!.contact!.id];
    const answered = (
      await api.post(`/sequences/${seq.id}/contacts/migrate/`, { contact_ids: largest, to_version: 2 })
    ).json().results as { contact_id: string; reason: string | null }[];
    expect(answered.map((r) => r.contact_id)).toEqual(largest);
    expect(answered[0]!.reason).toBe('already_on_version');
    expect(answered.slice(1, -1).every((r) => r.reason === 'not_found')).toBe(true);
    const tooMany = await api.post(`/sequences/${seq.id}/contacts/migrate/`, {
      contact_ids: [...largest, crypto.randomUUID()],
      to_version: 2,
    });
    expect(tooMany.statusCode).toBe(422);
  });

  it('migrates the largest request of many contacts at once: one refused or unknown id never holds back the others', async () => {
    const seq = await api.sequence({
      audience_table_id: audience.tableId,
      audience_mapping: audience.mapping,
      graph: { start: 'done', steps: [end] },
    });
    const tag = seq.id.slice(0, 6);
    const enrolled = await api.enrol(
      seq.id,
      await Promise.all(
        ['a', 'b', 'c', 'stopped', 'moved'].map((n) => audience.addRow({ email: `m-${n}-${tag}@example.com` })),
      ),
    );
    const [a, b, c, stopped, moved] = enrolled.map((r) => r.contact!.id);
    expect((await api.patch(`/sequences/${seq.id}/`, { expected_revision: 1, graph: oneEmail })).json()).toMatchObject({
      version: 2,
    });
    await stack.sql`update sequence_contacts set status = 'stopped' where id = ${stopped!}`;
    await stack.sql`update sequence_contacts set version = 2 where id = ${moved!}`;

    const named = [a!, b!, c!, stopped!, moved!, a!];
    const unknown = Array.from({ length: enrolRowsMax - named.length }, () => crypto.randomUUID());
    // Unknown ids between the real ones, so the answers' order is the request's, not the table's.
    const ids = [named[0]!, ...unknown.slice(0, 500), ...named.slice(1), ...unknown.slice(500)];
    expect(ids).toHaveLength(enrolRowsMax);
    const res = await api.post(`/sequences/${seq.id}/contacts/migrate/`, { contact_ids: ids, to_version: 2 });
    expect(res.statusCode).toBe(200);
    const results = res.json().results as {
      contact_id: string;
      migrated: boolean;
      reason: string | null;
      contact: { version: number } | null;
    }[];
    expect(results.map((r) => r.contact_id)).toEqual(ids);
    const answerOf = (id: string) => results.filter((r) => r.contact_id === id).map((r) => [r.migrated, r.reason]);
    expect(answerOf(a!)).toEqual([
      [true, null],
      [false, 'already_on_version'],
    ]);
    expect(answerOf(b!)).toEqual([[true, null]]);
    expect(answerOf(c!)).toEqual([[true, null]]);
    expect(answerOf(stopped!)).toEqual([[false, 'contact_stopped']]);
    expect(answerOf(moved!)).toEqual([[false, 'already_on_version']]);
    expect(results.filter((r) => r.reason === 'not_found')).toHaveLength(unknown.length);
    expect(results.filter((r) => r.contact_id === a || r.contact_id === b).every((r) => r.contact?.version === 2)).toBe(
      true,
    );
    for (const id of [a!, b!, c!]) expect((await api.contact(seq.id, id)).version).toBe(2);
    expect((await api.contact(seq.id, stopped!)).version).toBe(1);
  });

  it('lets the audience table feed the sequence: rows added later are enrolled as they arrive, earlier ones are not', async () => {
    const feedAudience = await api.audience();
    const before = await feedAudience.addRow({ email: `before-${Date.now()}@example.com` });
    const seq = await api.sequence({
      audience_table_id: feedAudience.tableId,
      audience_mapping: feedAudience.mapping,
      feed_new_rows: true,
      graph: oneEmail,
    });
    const later = await feedAudience.addRow({ email: `later-${Date.now()}@example.com` });
    await stack.sql`insert into do_not_contact_entries (workspace_id, kind, value) values (${paid.workspaceId}, 'domain', 'dnc-feed.example')`;
    const blocked = await feedAudience.addRow({ email: `blocked-${Date.now()}@dnc-feed.example` });
    const deadline = Date.now() + 20_000;
    let contacts: { row_id: string }[] = [];
    while (Date.now() < deadline) {
      contacts = (await api.get(`/sequences/${seq.id}/contacts/`)).json().contacts;
      if (contacts.length > 0) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(contacts.map((c) => c.row_id)).toEqual([later]);
    expect(contacts.map((c) => c.row_id)).not.toContain(before);
    expect(contacts.map((c) => c.row_id)).not.toContain(blocked);
    // Switched off: new rows stay out.
    const current = (await api.get(`/sequences/${seq.id}/`)).json();
    await api.patch(`/sequences/${seq.id}/`, { expected_revision: current.revision, feed_new_rows: false });
    await feedAudience.addRow({ email: `after-${Date.now()}@example.com` });
    await new Promise((r) => setTimeout(r, 2500));
    expect((await api.get(`/sequences/${seq.id}/contacts/`)).json().contacts).toHaveLength(1);
  });

  it('enrols a row added to a feeding table at once, not at the next poll of its feed', async () => {
    const feedAudience = await api.audience();
    stack.integrations.sequenceFeedPollSeconds = 600;
    try {
      const seq = await api.sequence({
        audience_table_id: feedAudience.tableId,
        audience_mapping: feedAudience.mapping,
        feed_new_rows: true,
        graph: oneEmail,
      });
      await new Promise((r) => setTimeout(r, 1500)); // the feed has looked once and sleeps its 10 minutes
      const added = await feedAudience.addRow({ email: `woken-${Date.now()}@example.com` });
      const deadline = Date.now() + 15_000;
      let contacts: { row_id: string }[] = [];
      while (Date.now() < deadline && contacts.length === 0) {
        await new Promise((r) => setTimeout(r, 200));
        contacts = (await api.get(`/sequences/${seq.id}/contacts/`)).json().contacts;
      }
      expect(contacts.map((c) => c.row_id)).toEqual([added]);
    } finally {
      stack.integrations.sequenceFeedPollSeconds = 1;
    }
  });

  it('refuses a graph naming an email template of another workspace', async () => {
    const other = await stack.createWorkspace('paid');
    const foreign = (
      await stack.app.inject({
        method: 'POST',
        url: '/sequences/templates/',
        headers: withKey(other.apiKey),
        payload: { name: 'Theirs' },
      })
    ).json();
    const res = await api.post('/sequences/', {
      name: 'X',
      graph: { start: 'hello', steps: [email('hello', 'done', { template_id: foreign.id }), end] },
    });
    expect(res.statusCode).toBe(422);
    expect(res.json().issues[0]).toMatchObject({
      loc: ['body', 'graph.steps.0.template_id'],
      type: 'unknown_template',
    });
  });

  it('refuses to launch an agent-written step without an outbound agent, and a pnet step without a sender', async () => {
    const agentStep = await api.sequence({
      graph: { start: 'hello', steps: [email('hello', 'done', { writer: 'agent' }), end] },
    });
    const res = await api.post(`/sequences/${agentStep.id}/launch/`, { expected_revision: 1 });
    expect(res.statusCode).toBe(422);
    expect(res.json().issues[0]).toMatchObject({
      type: 'no_outbound_agent',
      msg: expect.stringContaining('no outbound agent on this sequence'),
    });
    const pnet = await api.sequence({
      graph: { start: 'view', steps: [{ id: 'view', type: 'pnet', action: 'profile_view', next: 'done' }, end] },
    });
    expect((await api.post(`/sequences/${pnet.id}/launch/`, { expected_revision: 1 })).json().issues[0].type).toBe(
      'no_sender',
    );
    expect((await api.get(`/sequences/${pnet.id}/`)).json().status).toBe('draft');
    // A status it cannot leave, or a stale revision: 409.
    expect((await api.post(`/sequences/${pnet.id}/pause/`, { expected_revision: 1 })).statusCode).toBe(409);
  });
});

describe('manual mode: the approval queue', () => {
  let audience: Audience;
  beforeAll(async () => {
    audience = await api.audience();
  });

  async function launchedWith(
    graph: object,
    rows: { email?: string; first?: string; company?: string }[],
    body: object = {},
  ) {
    const sender = await api.sender(`Grace Hopper ${Math.random().toString(36).slice(2, 6)}`);
    const seq = await api.sequence({
      audience_table_id: audience.tableId,
      audience_mapping: audience.mapping,
      senders: [{ sender_profile_id: sender, from_email: 'grace@sender.example' }],
      graph,
      ...body,
    });
    await api.launch(seq.id);
    const results = await api.enrol(seq.id, await Promise.all(rows.map((r) => audience.addRow(r))));
    return { seq, contacts: results.map((r) => r.contact!.id) };
  }
  const approvalsOf = async (seqId: string) =>
    (await api.get(`/sequences/approvals/?sequence_id=${seqId}`)).json().approvals;
  const waitForApproval = (seqId: string, count = 1) =>
    vi.waitFor(
      async () => {
        const list = await approvalsOf(seqId);
        if (list.length < count) expect.fail('no approval appeared');
        return list;
      },
      { timeout: 20_000, interval: 200 },
    );

  it('holds every email for a person; an edited approval sends the edit', async () => {
    const address = `manual-${Date.now()}@example.com`;
    const { seq, contacts } = await launchedWith(
      { start: 'hello', steps: [email('hello', 'second'), email('second', 'done'), end] },
      [{ email: address, first: 'Ada' }],
    );
    const [waiting] = await waitForApproval(seq.id);
    expect(waiting).toMatchObject({
      contact_id: contacts[0],
      step_id: 'hello',
      channel: 'email',
      status: 'awaiting_approval',
      reason: 'manual_mode',
      subject: 'Subject hello',
      body: 'Hi Ada',
      to_email: address,
      from_email: 'grace@sender.example',
    });
    expect((await api.contact(seq.id, contacts[0]!)).wait).toEqual({ reason: 'approval', until: null });
    expect(mailsTo(address)).toHaveLength(0);

    const approved = await api.post(`/sequences/approvals/${waiting.id}/approve/`, {
      subject: 'A better subject',
      body: 'Hi Ada, edited by a person',
    });
    expect(approved.json()).toMatchObject({ status: 'approved', edited: true, subject: 'A better subject' });
    expect((await api.post(`/sequences/approvals/${waiting.id}/approve/`, {})).statusCode).toBe(409);
    const [second] = (await waitForApproval(seq.id)).filter((a: { step_id: string }) => a.step_id === 'second');
    expect(mailsTo(address).map((m) => [m.subject, m.text?.trim()])).toEqual([
      ['A better subject', 'Hi Ada, edited by a person'],
    ]);
    // Rejected: the contact goes on without that message.
    expect((await api.post(`/sequences/approvals/${second.id}/reject/`, { reason: 'Too pushy' })).json()).toMatchObject(
      { status: 'rejected', reason: 'Too pushy' },
    );
    const done = await api.waitFor(seq.id, contacts[0]!, (c) => c.status === 'completed');
    expect(done.done_steps).toEqual(['hello']);
    expect(mailsTo(address)).toHaveLength(1);
  });

  it('bounds an edit at its subject and body limits and a rejection reason at 500 characters', async () => {
    const id = '00000000-0000-4000-8000-000000000000';
    expect(
      (
        await api.post(`/sequences/approvals/${id}/approve/`, {
          subject: 's'.repeat(subjectMax),
          body: 'b'.repeat(bodyMax),
        })
      ).statusCode,
    ).toBe(404);
    expect(
      (await api.post(`/sequences/approvals/${id}/approve/`, { subject: 's'.repeat(subjectMax + 1) })).statusCode,
    ).toBe(422);
    expect((await api.post(`/sequences/approvals/${id}/approve/`, { body: 'b'.repeat(bodyMax + 1) })).statusCode).toBe(
      422,
    );
    expect((await api.post(`/sequences/approvals/${id}/approve/`, { body: '' })).statusCode).toBe(422);
    expect((await api.post(`/sequences/approvals/${id}/reject/`, { reason: 'r'.repeat(500) })).statusCode).toBe(404);
    expect((await api.post(`/sequences/approvals/${id}/reject/`, { reason: 'r'.repeat(501) })).statusCode).toBe(422);
  });

  it('holds an automatic message whose required value is missing, and a rejection can stop the contact', async () => {
    const graph = {
      start: 'hello',
      steps: [
        email('hello', 'done', {
          body_segments: [
            { kind: 'text', text: 'About ' },
            { kind: 'builtin', builtin: 'company_name', required: true },
          ],
        }),
        end,
      ],
    };
    const address = `required-${Date.now()}@example.com`;
    const { seq, contacts } = await launchedWith(graph, [{ email: address, first: 'Ada' }], {
      email_mode: 'automatic',
    });
    const [held] = await waitForApproval(seq.id);
    expect(held).toMatchObject({ reason: 'missing_values: builtin:company_name', body: 'About ' });
    // An empty message cannot be approved as it is.
    await stack.sql`update sequence_sends set body = '' where id = ${held.id}`;
    const empty = await api.post(`/sequences/approvals/${held.id}/approve/`, {});
    expect(empty.statusCode).toBe(409);
    expect(empty.json().detail).toMatch(/empty/);
    await api.post(`/sequences/approvals/${held.id}/reject/`, { stop_contact: true });
    const stopped = await api.waitFor(seq.id, contacts[0]!, (c) => c.status === 'stopped');
    expect(stopped.stop_reason).toBe('stopped');
    expect(mailsTo(address)).toHaveLength(0);
  });

  it('has the outbound agent write an agent-written step for each contact; a message it is not confident of waits for a person, then goes out as approved', async () => {
    const agent = await api.post('/outbound-agents/', {
      name: 'Writer',
      instructions: 'We sell analytical engines.',
      slots: [{ slot_key: 'hello', kind: 'email', prompt: 'Open with their company.' }],
    });
    expect(agent.statusCode).toBe(201);
    const address = `agent-${Date.now()}@example.com`;
    const seq = await api.sequence({
      audience_table_id: audience.tableId,
      audience_mapping: audience.mapping,
      email_mode: 'automatic',
      senders: [{ sender_profile_id: await api.sender(), from_email: 'writer@sender.example' }],
      graph: { start: 'hello', steps: [email('hello', 'done', { writer: 'agent' }), end] },
    });
    expect((await api.put(`/sequences/${seq.id}/agent/`, { agent_id: agent.json().id })).statusCode).toBe(200);
    await api.launch(seq.id);
    const [r] = await api.enrol(seq.id, [
      await audience.addRow({ email: address, first: 'Ada', company: 'Engines Ltd' }),
    ]);
    const contactId = r!.contact!.id;
    // This stack has no chat model: the local template writer writes, deterministically. Its
    // research is the row alone, one substantive fact (the company) where two are needed, so the
    // message is held for a person (insufficient_data) even in automatic mode.
    const settled = await api.waitFor(
      seq.id,
      contactId,
      (c) => c.status === 'completed' || (c.wait as { reason: string } | null)?.reason === 'approval',
    );
    expect(settled).toMatchObject({ status: 'active', wait: { reason: 'approval', until: null } });
    const [written] = await stack.sql<
      { body: string; status: string; model_key: string; insufficient_data: boolean }[]
    >`
      select m.body, m.status, m.model_key, m.insufficient_data from outbound_messages m join outbound_conversations c on c.id = m.conversation_id
      where c.contact_key = ${settled.contact_key as string} and m.slot_key = 'hello'`;
    expect(written).toMatchObject({
      status: 'needs_review',
      model_key: 'local-template-writer',
      insufficient_data: true,
    });
    expect(written!.body).toContain('Engines Ltd');
    const [send] = await stack.sql<
      { id: string; body: string; status: string; reason: string | null }[]
    >`select id, body, status, reason from sequence_sends where contact_id = ${contactId}`;
    expect(send).toMatchObject({
      body: written!.body,
      status: 'awaiting_approval',
      reason: 'agent_review: insufficient_data',
    });
    expect(mailsTo(address)).toHaveLength(0);
    // Approved as written, it goes out as the agent wrote it.
    expect((await api.post(`/sequences/approvals/${send!.id}/approve/`, {})).json()).toMatchObject({
      status: 'approved',
      edited: false,
    });
    await api.waitFor(seq.id, contactId, (c) => c.status === 'completed');
    expect(mailsTo(address).map((m) => m.text?.trim())).toEqual([written!.body.trim()]);
  });

  it('holds a pnet message for a person in manual mode and queues the approved text as the browser step', async () => {
    const browser = await connectedAccount(stack, paid);
    const sender = browser.profileId;
    const seq = await api.sequence({
      audience_table_id: audience.tableId,
      audience_mapping: audience.mapping,
      senders: [{ sender_profile_id: sender }],
      graph: {
        start: 'note',
        steps: [
          {
            id: 'note',
            type: 'pnet',
            action: 'send_message',
            body_segments: [
              { kind: 'text', text: 'Hi ' },
              { kind: 'builtin', builtin: 'first_name' },
            ],
            next: 'done',
          },
          end,
        ],
      },
    });
    await api.launch(seq.id);
    const [r] = await api.enrol(seq.id, [
      await audience.addRow({ profile: 'https://www.pnet.example/in/ada/', first: 'Ada' }),
    ]);
    const [waiting] = await waitForApproval(seq.id);
    expect(waiting).toMatchObject({
      channel: 'pnet',
      kind: 'send_message',
      body: 'Hi Ada',
      reason: 'manual_mode',
      subject: null,
    });
    expect(await stack.sql`select 1 from browser_steps where contact_key = ${`${seq.id}:${r!.row_id}`}`).toHaveLength(
      0,
    );
    await api.post(`/sequences/approvals/${waiting.id}/approve/`, { body: 'Hi Ada, a note from a person' });
    await api.waitFor(seq.id, r!.contact!.id, (c) => (c.wait as { reason: string } | null)?.reason === 'pnet_step');
    const [step] = await stack.sql<
      StepRow[]
    >`select * from browser_steps where contact_key = ${`${seq.id}:${r!.row_id}`}`;
    // Approved here by a person: it is queued, not put on the Tasks page a second time.
    expect(step).toMatchObject({
      kind: 'send_message',
      status: 'queued',
      params: { kind: 'send_message', body: 'Hi Ada, a note from a person' },
    });
    // Queued with its price set aside, and the approved message marked sent as that step.
    expect(
      await stack.sql`select amount, status, cause_key from credit_holds where id = ${step!.credit_hold_id}`,
    ).toEqual([{ amount: stepPrices.send_message, status: 'held', cause_key: `pnet-step:${step!.id}:0` }]);
    expect(
      await stack.sql`select status, browser_step_id from sequence_sends where contact_id = ${r!.contact!.id}`,
    ).toEqual([{ status: 'sent', browser_step_id: step!.id }]);
  });

  it('sends a connection note the network cannot take back to a person instead of dropping it', async () => {
    const browser = await connectedAccount(stack, paid);
    const seq = await api.sequence({
      audience_table_id: audience.tableId,
      audience_mapping: audience.mapping,
      pnet_mode: 'automatic',
      senders: [{ sender_profile_id: browser.profileId }],
      graph: {
        start: 'invite',
        steps: [
          {
            id: 'invite',
            type: 'pnet',
            action: 'connection_request',
            body_segments: [{ kind: 'text', text: 'x'.repeat(301) }],
            next: 'done',
          },
          end,
        ],
      },
    });
    await api.launch(seq.id);
    const [r] = await api.enrol(seq.id, [await audience.addRow({ profile: 'https://www.pnet.example/in/long-note/' })]);
    const [held] = await waitForApproval(seq.id);
    expect(held).toMatchObject({ kind: 'connection_request', reason: expect.stringMatching(/^invalid_message: note/) });
    await api.post(`/sequences/approvals/${held.id}/approve/`, { body: 'Short and sweet' });
    await api.waitFor(seq.id, r!.contact!.id, (c) => (c.wait as { reason: string } | null)?.reason === 'pnet_step');
    const [step] = await stack.sql<
      StepRow[]
    >`select * from browser_steps where contact_key = ${`${seq.id}:${r!.row_id}`}`;
    expect(step!.params).toMatchObject({ kind: 'connection_request', note: 'Short and sweet' });
  });

  it('keeps a contact waiting for credits, with nothing queued or held, when the workspace cannot pay for its pnet step', async () => {
    const broke = await stack.createWorkspace('paid');
    const brokeApi = sequencesApi(stack, broke);
    const brokeAudience = await brokeApi.audience();
    const browser = await connectedAccount(stack, broke);
    const { seq, r } = await enrolInOnePnetStep(
      { api: brokeApi, audience: brokeAudience },
      browser.profileId,
      { id: 'view', action: 'profile_view' },
      'https://www.pnet.example/in/no-credits/',
    );
    const waiting = await brokeApi.waitFor(
      seq.id,
      r!.contact!.id,
      (c) => (c.wait as { reason: string } | null)?.reason === 'insufficient_credits',
    );
    expect(waiting.status).toBe('active');
    // It looks again in an hour.
    const until = Date.parse((waiting.wait as { until: string }).until);
    expect(until - Date.now()).toBeGreaterThan(55 * 60_000);
    expect(until - Date.now()).toBeLessThanOrEqual(3_600_000);
    expect(await stack.sql`select 1 from browser_steps where workspace_id = ${broke.workspaceId}`).toHaveLength(0);
    expect(await stack.sql`select 1 from credit_holds where workspace_id = ${broke.workspaceId}`).toHaveLength(0);
    expect(await stack.sql`select 1 from credit_ledger where workspace_id = ${broke.workspaceId}`).toHaveLength(0);
  });

  it('sends automatic email on schedule without a person', async () => {
    const address = `auto-${Date.now()}@example.com`;
    const { seq, contacts } = await launchedWith(oneEmail, [{ email: address, first: 'Bo' }], {
      email_mode: 'automatic',
    });
    await api.waitFor(seq.id, contacts[0]!, (c) => c.status === 'completed');
    expect(mailsTo(address).map((m) => m.text?.trim())).toEqual(['Hi Bo']);
    expect(await approvalsOf(seq.id)).toEqual([]);
  });
});

describe('stops, pauses and pnet steps', () => {
  let audience: Audience;
  beforeAll(async () => {
    audience = await api.audience();
  });

  it('stops a waiting contact at once when the inbox wakes it after a reply (reply wins)', async () => {
    const address = `reply-${Date.now()}@example.com`;
    const sender = await api.sender();
    const seq = await api.sequence({
      audience_table_id: audience.tableId,
      audience_mapping: audience.mapping,
      email_mode: 'automatic',
      senders: [{ sender_profile_id: sender }],
      graph: { start: 'w', steps: [{ id: 'w', type: 'wait', days: 3, next: 'hello' }, email('hello', 'done'), end] },
    });
    await api.launch(seq.id);
    const [r] = await api.enrol(seq.id, [await audience.addRow({ email: address })]);
    await api.waitFor(seq.id, r!.contact!.id, (c) => (c.wait as { reason: string } | null)?.reason === 'timer');
    const [thread] = await stack.sql<
      { id: string }[]
    >`insert into inbox_threads (workspace_id, channel, contact_email) values (${paid.workspaceId}, 'email', ${address}) returning id`;
    await stack.sql`insert into inbox_messages (workspace_id, thread_id, direction, kind, from_email, occurred_at) values (${paid.workspaceId}, ${thread!.id}, 'inbound', 'reply', ${address}, now())`;
    expect(
      await wakeSequenceContacts(
        { sql: stack.sql, temporal: { client: stack.client, taskQueue: stack.taskQueue } },
        paid.workspaceId,
        { emails: [address.toUpperCase()] },
      ),
    ).toBe(1);
    const stopped = await api.waitFor(seq.id, r!.contact!.id, (c) => c.status === 'stopped');
    expect(stopped).toMatchObject({ stop_reason: 'replied', wait: null });
    expect(mailsTo(address)).toHaveLength(0);
  });

  it('queues a pnet step with the contact key, holds it while paused, stops the contact at a failed step, and goes on after a retry', async () => {
    const browser = await connectedAccount(stack, paid);
    const { profileId, accountId } = browser;
    const seq = await api.sequence({
      audience_table_id: audience.tableId,
      audience_mapping: audience.mapping,
      pnet_mode: 'automatic',
      senders: [{ sender_profile_id: profileId }],
      graph: {
        start: 'view',
        steps: [
          { id: 'view', type: 'pnet', action: 'profile_view', next: 'follow' },
          { id: 'follow', type: 'pnet', action: 'follow_contact', next: 'done' },
          end,
        ],
      },
    });
    await stack.sql`update pnet_accounts set run_mode = 'automatic' where id = ${accountId}`;
    await api.launch(seq.id);
    const [r] = await api.enrol(seq.id, [await audience.addRow({ profile: 'https://www.pnet.example/in/jane-doe/' })]);
    const contactId = r!.contact!.id;
    const waiting = await api.waitFor(
      seq.id,
      contactId,
      (c) => (c.wait as { reason: string } | null)?.reason === 'pnet_step',
    );
    const [step] = await stack.sql<
      StepRow[]
    >`select * from browser_steps where contact_key = ${waiting.contact_key as string}`;
    expect(step).toMatchObject({
      kind: 'profile_view',
      status: 'queued',
      sequence_id: seq.id,
      held: false,
      params: { kind: 'profile_view', profile_url: 'https://www.pnet.example/in/jane-doe/', read_relationship: true },
    });

    // Pausing the sequence holds the step out of every browser's line; resuming frees it.
    const current = (await api.get(`/sequences/${seq.id}/`)).json();
    await api.post(`/sequences/${seq.id}/pause/`, { expected_revision: current.revision });
    expect((await stack.sql`select held from browser_steps where id = ${step!.id}`)[0]!.held).toBe(true);
    await api.post(`/sequences/${seq.id}/resume/`, { expected_revision: current.revision + 1 });
    expect((await stack.sql`select held from browser_steps where id = ${step!.id}`)[0]!.held).toBe(false);

    // The browser claims it and reports a failure: the contact stops at that step.
    const claimed = (await browser.claim()).json().step;
    expect(claimed).toMatchObject({ id: step!.id });
    expect(
      (
        await browser.report(step!.id, {
          status: 'failed',
          claimed_at: claimed.claimed_at,
          error_code: 'navigation_failed',
          error_message: 'page did not load',
        })
      ).statusCode,
    ).toBe(200);
    const failed = await api.waitFor(seq.id, contactId, (c) => c.status === 'failed');
    expect(failed).toMatchObject({
      current_step_id: 'view',
      error: expect.stringContaining('navigation_failed'),
      wait: { reason: 'failed_step', until: null },
    });

    // A person retries the contact: the same step goes back in line, and its success moves the contact on.
    const retried = await api.post(`/sequences/${seq.id}/contacts/${contactId}/retry/`);
    expect(retried.statusCode).toBe(200);
    expect((await stack.sql`select status from browser_steps where id = ${step!.id}`)[0]!.status).toMatch(
      /queued|resuming/,
    );
    expect((await api.post(`/sequences/${seq.id}/contacts/${contactId}/retry/`)).statusCode).toBe(409);
    await stack.sql`update pnet_accounts set next_metered_at = null where id = ${accountId}`;
    const claim2 = (await browser.claim({ verify_first: true })).json().step;
    expect(claim2).toMatchObject({ id: step!.id });
    expect(
      (
        await browser.report(step!.id, {
          status: 'succeeded',
          claimed_at: claim2.claimed_at,
          outcome: { kind: 'profile_view', page_loaded: true },
        })
      ).statusCode,
    ).toBe(200);
    const next = await api.waitFor(
      seq.id,
      contactId,
      (c) => c.current_step_id === 'follow' && (c.wait as { reason: string } | null)?.reason === 'pnet_step',
    );
    expect(next.done_steps).toEqual(['view']);

    // Stopping the contact cancels its waiting step.
    const stop = await api.post(`/sequences/${seq.id}/contacts/${contactId}/stop/`);
    expect(stop.json()).toMatchObject({ status: 'stopped', stop_reason: 'stopped', wait: null });
    expect((await api.post(`/sequences/${seq.id}/contacts/${contactId}/stop/`)).statusCode).toBe(409);
    await api.waitFor(seq.id, contactId, (c) => c.status === 'stopped');
    const followStatus = async () =>
      (
        await stack.sql`select status from browser_steps where contact_key = ${waiting.contact_key as string} and kind = 'follow_contact'`
      )[0]!.status;
    for (let i = 0; i < 100 && (await followStatus()) !== 'cancelled'; i++)
      await new Promise((r) => setTimeout(r, 100));
    expect(await followStatus()).toBe('cancelled');
  });

  it('pauses and resumes one contact, refusing transitions it cannot make', async () => {
    const seq = await api.sequence({
      audience_table_id: audience.tableId,
      audience_mapping: audience.mapping,
      graph: { start: 'w', steps: [{ id: 'w', type: 'wait', days: 2, next: 'done' }, end] },
    });
    await api.launch(seq.id);
    const [r] = await api.enrol(seq.id, [await audience.addRow({ email: `pause-${Date.now()}@example.com` })]);
    const id = r!.contact!.id;
    expect((await api.post(`/sequences/${seq.id}/contacts/${id}/resume/`)).statusCode).toBe(409);
    expect((await api.post(`/sequences/${seq.id}/contacts/${id}/pause/`)).json().status).toBe('paused');
    await api.waitFor(seq.id, id, (c) => (c.wait as { reason: string } | null)?.reason === 'paused');
    expect(await stack.sql`select 1 from pnet_step_holds where contact_key = ${`${seq.id}:${r!.row_id}`}`).toHaveLength(
      1,
    );
    expect((await api.post(`/sequences/${seq.id}/contacts/${id}/resume/`)).json().status).toBe('active');
    await api.waitFor(seq.id, id, (c) => (c.wait as { reason: string } | null)?.reason === 'timer');
    expect((await api.post(`/sequences/${seq.id}/contacts/${id}/retry/`)).statusCode).toBe(409);
    const other = await stack.createWorkspace('paid');
    expect(
      (
        await stack.app.inject({
          method: 'POST',
          url: `/sequences/${seq.id}/contacts/${id}/pause/`,
          headers: withKey(other.apiKey),
        })
      ).statusCode,
    ).toBe(404);
  });

  it('archiving stops every contact still in the sequence and cancels their waiting pnet steps', async () => {
    const browser = await connectedAccount(stack, paid);
    const { seq, r } = await enrolInOnePnetStep(
      { api, audience },
      browser.profileId,
      { id: 'follow', action: 'follow_contact' },
      `https://www.pnet.example/in/archived-${Date.now()}/`,
    );
    await api.waitFor(seq.id, r!.contact!.id, (c) => (c.wait as { reason: string } | null)?.reason === 'pnet_step');
    const current = (await api.get(`/sequences/${seq.id}/`)).json();
    expect(
      (await api.post(`/sequences/${seq.id}/archive/`, { expected_revision: current.revision })).json().status,
    ).toBe('archived');
    const stopped = await api.waitFor(seq.id, r!.contact!.id, (c) => c.status === 'stopped');
    expect(stopped.stop_reason).toBe('archived');
    const stepStatus = async () =>
      (await stack.sql`select status from browser_steps where contact_key = ${`${seq.id}:${r!.row_id}`}`)[0]!.status;
    for (let i = 0; i < 100 && (await stepStatus()) !== 'cancelled'; i++)
      await new Promise((res) => setTimeout(res, 100));
    expect(await stepStatus()).toBe('cancelled');
    expect((await api.post(`/sequences/${seq.id}/contacts/`, { row_ids: [r!.row_id] })).statusCode).toBe(409);
  });
});
