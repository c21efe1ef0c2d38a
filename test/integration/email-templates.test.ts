import { beforeAll, describe, expect, it } from 'vitest';
import {
  renderMessage,
  renderSegments,
  segmentOptionsMax,
  segmentsMax,
  segmentTextMax,
  templatesMax,
  type RenderContext,
} from '../../domain/inbox/email-templates.js';
import { tablesClient, type TablesClient } from '../support/tables.js';
import { useTestStack, withKey } from '../support/test-stack.js';

const columnId = '5b3c1e34-3a8f-4a55-9d2b-8f8f2b1f0a11';
const ctx = (over: Partial<RenderContext> = {}): RenderContext => ({
  contactKey: 'seq-1:row-1',
  contact: { first_name: 'Ada', last_name: 'Lovelace', email: 'ada@example.com', company_name: 'Engines Ltd' },
  sender: { name: 'Grace Hopper', email: 'grace@sender.example' },
  columns: { [columnId]: 'Analytical engines' },
  ...over,
});

describe('rendering segments (pure)', () => {
  it('writes text, builtins and column values in order', () => {
    const result = renderSegments(
      [
        { kind: 'text', text: 'Hi ' },
        { kind: 'builtin', builtin: 'first_name' },
        { kind: 'text', text: ', I saw ' },
        { kind: 'column', column_id: columnId },
        { kind: 'text', text: ' at ' },
        { kind: 'builtin', builtin: 'company_name' },
        { kind: 'text', text: '. — ' },
        { kind: 'builtin', builtin: 'sender_first_name' },
      ],
      ctx(),
    );
    expect(result).toEqual({ ok: true, text: 'Hi Ada, I saw Analytical engines at Engines Ltd. — Grace' });
  });

  it('picks one of the options per contact, the same one every time for that contact', () => {
    const segments = [{ kind: 'text' as const, options: ['Hello', 'Hi', 'Hey', 'Greetings', 'Good day'] }];
    const first = renderSegments(segments, ctx()).text;
    for (let i = 0; i < 5; i++) expect(renderSegments(segments, ctx()).text).toBe(first);
    const picked = new Set(
      Array.from({ length: 40 }, (_, i) => renderSegments(segments, ctx({ contactKey: `seq-1:row-${i}` })).text),
    );
    expect(picked.size).toBeGreaterThan(2);
    for (const p of picked) expect(segments[0]!.options).toContain(p);
  });

  it('uses an option as the fallback of an empty builtin or column', () => {
    const result = renderSegments(
      [{ kind: 'builtin', builtin: 'first_name', options: ['there'] }],
      ctx({ contact: { first_name: '  ' } }),
    );
    expect(result).toEqual({ ok: true, text: 'there' });
    expect(
      renderSegments([{ kind: 'column', column_id: columnId, options: ['your work'] }], ctx({ columns: {} })).text,
    ).toBe('your work');
  });

  it('holds the message when a required segment has no value, instead of leaving a gap', () => {
    const template = {
      subject_segments: [
        { kind: 'text' as const, text: 'For ' },
        { kind: 'builtin' as const, builtin: 'company_name' as const, required: true },
      ],
      body_segments: [
        { kind: 'text' as const, text: 'Hi ' },
        { kind: 'column' as const, column_id: columnId, required: true },
      ],
    };
    const missing = renderMessage(template, ctx({ contact: { first_name: 'Ada' }, columns: {} }));
    expect(missing.missing).toEqual(['builtin:company_name', `column:${columnId}`]);
    expect(renderMessage(template, ctx()).missing).toEqual([]);
    // An empty optional segment is simply empty.
    expect(
      renderSegments(
        [
          { kind: 'text', text: 'Hi' },
          { kind: 'builtin', builtin: 'last_name' },
        ],
        ctx({ contact: {} }),
      ),
    ).toEqual({ ok: true, text: 'Hi' });
  });

  it('splits the sender name into first and last', () => {
    const text = renderSegments(
      [
        { kind: 'builtin', builtin: 'sender_last_name' },
        { kind: 'text', text: '|' },
        { kind: 'builtin', builtin: 'sender_full_name' },
        { kind: 'text', text: '|' },
        { kind: 'builtin', builtin: 'full_name' },
      ],
      ctx({ sender: { name: 'Grace Brewster Hopper' } }),
    ).text;
    expect(text).toBe('Brewster Hopper|Grace Brewster Hopper|Ada Lovelace');
  });
});

const { stack, paid } = useTestStack();
let client: TablesClient;
beforeAll(() => {
  client = tablesClient(stack, withKey(paid.apiKey));
});

describe('saved email templates (interface spec: Saved email template; listEmailTemplates)', () => {
  it('creates, reads, edits and deletes a template with every field of the interface spec', async () => {
    const created = await client.post('/sequences/templates/', {
      name: 'First touch',
      subject_segments: [{ kind: 'text', text: 'Quick question' }],
      body_segments: [
        { kind: 'text', text: 'Hi ' },
        { kind: 'builtin', builtin: 'first_name', options: ['there'] },
      ],
    });
    expect(created.statusCode).toBe(201);
    const template = created.json();
    expect(template).toEqual({
      id: expect.any(String),
      name: 'First touch',
      scope: 'sequence_step',
      subject_segments: [
        { kind: 'text', text: 'Quick question', builtin: null, column_id: null, options: [], required: false },
      ],
      body_segments: [
        { kind: 'text', text: 'Hi ', builtin: null, column_id: null, options: [], required: false },
        { kind: 'builtin', text: '', builtin: 'first_name', column_id: null, options: ['there'], required: false },
      ],
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    expect((await client.get(`/sequences/templates/${template.id}/`)).json()).toEqual(template);

    const edited = await client.patch(`/sequences/templates/${template.id}/`, { name: 'First touch v2' });
    expect(edited.statusCode).toBe(200);
    expect(edited.json()).toMatchObject({ name: 'First touch v2', body_segments: template.body_segments });

    expect((await client.del(`/sequences/templates/${template.id}/`)).statusCode).toBe(204);
    expect((await client.get(`/sequences/templates/${template.id}/`)).statusCode).toBe(404);
    expect((await client.del(`/sequences/templates/${template.id}/`)).statusCode).toBe(404);
  });

  it("lists the workspace's templates newest first, and only its own", async () => {
    const other = await stack.createWorkspace('paid');
    const names = ['Older', 'Middle', 'Newest'];
    for (const name of names) expect((await client.post('/sequences/templates/', { name })).statusCode).toBe(201);
    await stack.app.inject({
      method: 'POST',
      url: '/sequences/templates/',
      headers: withKey(other.apiKey),
      payload: { name: 'Not yours' },
    });
    const list = await client.get('/sequences/templates/');
    expect(list.statusCode).toBe(200);
    const listed = list.json().templates.map((t: { name: string }) => t.name);
    expect(listed.slice(0, 3)).toEqual(['Newest', 'Middle', 'Older']);
    expect(listed).not.toContain('Not yours');
  });

  it('refuses a column segment naming a column of another workspace, and a segment without the field its kind reads', async () => {
    const other = await stack.createWorkspace('paid');
    const otherTables = tablesClient(stack, withKey(other.apiKey));
    const foreign = await otherTables.column((await otherTables.table()).id, { kind: 'input', name: 'Secret' });
    const res = await client.post('/sequences/templates/', {
      name: 'Bad',
      body_segments: [{ kind: 'column', column_id: foreign.id }],
    });
    expect(res.statusCode).toBe(404);
    expect(res.json().detail).toContain(foreign.id);
    const noBuiltin = await client.post('/sequences/templates/', { name: 'Bad', body_segments: [{ kind: 'builtin' }] });
    expect(noBuiltin.statusCode).toBe(422);
    expect(noBuiltin.json().issues[0].loc).toEqual(['body', 'body_segments.0.builtin']);
    expect(
      (await client.post('/sequences/templates/', { name: 'Bad', body_segments: [{ kind: 'column' }] })).statusCode,
    ).toBe(422);
    const mine = await client.column((await client.table()).id, { kind: 'input', name: 'Mine' });
    expect(
      (
        await client.post('/sequences/templates/', {
          name: 'Good',
          body_segments: [{ kind: 'column', column_id: mine.id }],
        })
      ).statusCode,
    ).toBe(201);
  });

  it('bounds the name, segments, text and options at their limits', async () => {
    const post = (body: object) => client.post('/sequences/templates/', { name: 'Bounds', ...body });
    expect((await post({ name: 'n'.repeat(255) })).statusCode).toBe(201);
    expect((await post({ name: 'n'.repeat(256) })).statusCode).toBe(422);
    expect((await post({ name: '' })).statusCode).toBe(422);
    const text = { kind: 'text', text: 'x' };
    expect((await post({ body_segments: Array(segmentsMax).fill(text) })).statusCode).toBe(201);
    const tooMany = await post({ body_segments: Array(segmentsMax + 1).fill(text) });
    expect(tooMany.statusCode).toBe(422);
    expect(tooMany.json().issues[0].loc).toEqual(['body', 'body_segments']);
    expect((await post({ subject_segments: [{ kind: 'text', text: 't'.repeat(segmentTextMax) }] })).statusCode).toBe(
      201,
    );
    expect(
      (await post({ subject_segments: [{ kind: 'text', text: 't'.repeat(segmentTextMax + 1) }] })).statusCode,
    ).toBe(422);
    expect(
      (await post({ body_segments: [{ kind: 'text', options: Array(segmentOptionsMax).fill('o') }] })).statusCode,
    ).toBe(201);
    expect(
      (await post({ body_segments: [{ kind: 'text', options: Array(segmentOptionsMax + 1).fill('o') }] })).statusCode,
    ).toBe(422);
    expect((await post({ body_segments: [{ kind: 'builtin', builtin: 'favourite_colour' }] })).statusCode).toBe(422);
    expect((await post({ body_segments: [{ kind: 'emoji' }] })).statusCode).toBe(422);
  });

  it(`keeps at most ${templatesMax} templates per workspace`, async () => {
    const ws = await stack.createWorkspace('paid');
    await stack.sql`insert into email_templates (workspace_id, name) select ${ws.workspaceId}, 'T' || g from generate_series(1, ${templatesMax - 1}) g`;
    const post = () =>
      stack.app.inject({
        method: 'POST',
        url: '/sequences/templates/',
        headers: withKey(ws.apiKey),
        payload: { name: 'Last one' },
      });
    expect((await post()).statusCode).toBe(201);
    const over = await post();
    expect(over.statusCode).toBe(409);
    expect(over.json().detail).toContain(String(templatesMax));
    const list = await stack.app.inject({ method: 'GET', url: '/sequences/templates/', headers: withKey(ws.apiKey) });
    expect(list.json().templates).toHaveLength(templatesMax);
    expect(list.json().templates[0].name).toBe('Last one');
  });
});
