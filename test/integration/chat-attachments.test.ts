/**
 * Chat attachments through the real app and worker: upload (multipart, 201 once the text is read,
 * 413, 415, 422 for a file that cannot be read), the conversation's list, and the page read
 * (readChatAttachmentPages) at every bound of the interface spec's Chat attachment pages and
 * Limits, its byte-size stop and tenant isolation. The PDFs are built with pdf-lib and their lines
 * asserted exactly.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { attachmentBytesMaxDefault, pageReadBytesMax } from '../../domain/assistant/attachments.js';
import { createChatAttachmentActivities } from '../../activities/assistant/attachments.js';
import { createDocumentExtractor } from '../../integrations/documents/extractor.js';
import { insertConversation } from '../support/assistant.js';
import {
  buildPdf,
  buildXlsx,
  buildZip,
  multipartBody,
  reportPdf,
  tableTexts,
  workbookEntries,
} from '../support/documents.js';
import { useTestStack, withKey, withToken } from '../support/test-stack.js';

const { stack, paid, free } = useTestStack();
const fixtures = join(import.meta.dirname, '..', 'fixtures', 'attachments');
let conversation: string;
let otherConversation: string;

beforeAll(async () => {
  conversation = await insertConversation(stack.sql, paid.workspaceId);
  otherConversation = await insertConversation(stack.sql, free.workspaceId);
});
afterEach(() => {
  stack.integrations.chatAttachments.maxUploadBytes = attachmentBytesMaxDefault;
});

const upload = (
  file: { filename: string; data: Buffer; contentType?: string; field?: string },
  options: { conversationId?: string; apiKey?: string } = {},
) => {
  const body = multipartBody({ contentType: 'application/octet-stream', ...file });
  return stack.app.inject({
    method: 'POST',
    url: `/assistant/conversations/${options.conversationId ?? conversation}/attachments/`,
    headers: { ...withKey(options.apiKey ?? paid.apiKey), ...body.headers },
    payload: body.payload,
  });
};
const readPages = (id: string, query = '', apiKey = paid.apiKey) =>
  stack.app.inject({ method: 'GET', url: `/chat-attachments/${id}/pages/${query}`, headers: withKey(apiKey) });
const uploaded = async (file: Parameters<typeof upload>[0]) => {
  const res = await upload(file);
  expect(res.statusCode, res.body).toBe(201);
  return res.json<{ id: string; page_count: number }>();
};

describe('a PDF with tables', () => {
  let attachment: { id: string; page_count: number };
  let created: ReturnType<typeof JSON.parse>;

  beforeAll(async () => {
    const pdf = await buildPdf([
      // Two columns.
      {
        texts: tableTexts({
          columns: [50, 250],
          rows: [
            ['Name', 'Amount'],
            ['Ada Lovelace', '12.50'],
            ['Grace Hopper', '7.25'],
          ],
          top: 100,
        }),
      },
      // Three columns, a heading above, and a cell over two lines (top-aligned with its row).
      {
        texts: [
          { text: 'Price list', x: 50, top: 60, size: 14 },
          ...tableTexts({
            columns: [50, 160, 400],
            rows: [
              ['Item', 'Description', 'Price'],
              ['Widget', 'Small blue widget\nwith a long cable', '4.00'],
              ['Gadget', 'Red gadget', '9.50'],
            ],
            top: 100,
          }),
        ],
      },
      { blank: true },
      // A scanned page: an image, no text.
      { image: 'gray' },
    ]);
    const res = await upload({ filename: 'tables.pdf', data: pdf, contentType: 'application/pdf' });
    expect(res.statusCode, res.body).toBe(201);
    created = res.json();
    attachment = created;
  });

  it('answers 201 with the attachment once its text is read', () => {
    expect(created).toEqual({
      id: expect.any(String),
      conversation_id: conversation,
      filename: 'tables.pdf',
      kind: 'pdf',
      byte_size: expect.any(Number),
      page_count: 4,
      status: 'ready',
      error: null,
      created_at: expect.any(String),
    });
  });

  it('reads every page laid out as printed: columns side by side, a continuation line, "" for a blank or scanned page', async () => {
    const res = await readPages(attachment.id);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      attachment_id: attachment.id,
      filename: 'tables.pdf',
      offset: 0,
      pages: [
        ['Name   Amount', 'Ada Lovelace   12.50', 'Grace Hopper   7.25'].join('\n'),
        [
          'Price list',
          'Item   Description   Price',
          'Widget   Small blue widget   4.00',
          '   with a long cable',
          'Gadget   Red gadget   9.50',
        ].join('\n'),
        '',
        '',
      ],
      page_count: 4,
      next_offset: null,
    });
  });

  it('ran the workflow chat-attachment/<id>, stored each page once and dropped the upload', async () => {
    const described = await stack.client.workflow.getHandle(`chat-attachment/${attachment.id}`).describe();
    expect(described.status.name).toBe('COMPLETED');
    const [row] = await stack.sql<{ content: Buffer | null; pages: number; status: string; ready_at: Date | null }[]>`
      select content, status, ready_at, (select count(*)::int from chat_attachment_pages where attachment_id = a.id) as pages
      from chat_attachments a where id = ${attachment.id}`;
    expect(row).toMatchObject({ content: null, pages: 4, status: 'ready', ready_at: expect.any(Date) });
    // A retried extraction finds the attachment ready: nothing is read or written again.
    const activities = createChatAttachmentActivities({
      sql: stack.sql,
      extractor: createDocumentExtractor({ extractSeconds: 1, extractHeapMb: 1, extractRssGrowthMb: 1 }),
    });
    expect(await activities.extractChatAttachment({ attachmentId: attachment.id })).toEqual({
      status: 'ready',
      pageCount: 4,
    });
    const [again] = await stack.sql<
      { n: number }[]
    >`select count(*)::int as n from chat_attachment_pages where attachment_id = ${attachment.id}`;
    expect(again!.n).toBe(4);
  });

  it('pages at every bound of offset and limit', async () => {
    const pages = (q: string) => readPages(attachment.id, q).then((r) => ({ status: r.statusCode, body: r.json() }));
    expect(await pages('?limit=1')).toMatchObject({
      status: 200,
      body: { offset: 0, pages: [expect.stringContaining('Name')], page_count: 4, next_offset: 1 },
    });
    expect(await pages('?offset=0&limit=50')).toMatchObject({
      status: 200,
      body: { offset: 0, page_count: 4, next_offset: null },
    });
    expect((await pages('?limit=50')).body.pages).toHaveLength(4);
    expect(await pages('?offset=1&limit=2')).toMatchObject({
      status: 200,
      body: { offset: 1, pages: [expect.stringContaining('Price list'), ''], next_offset: 3 },
    });
    expect(await pages('?offset=3&limit=1')).toMatchObject({
      status: 200,
      body: { offset: 3, pages: [''], next_offset: null },
    });
    expect(await pages('?offset=4')).toMatchObject({
      status: 200,
      body: { offset: 4, pages: [], page_count: 4, next_offset: null },
    });
    expect(await pages('?offset=1000000')).toMatchObject({
      status: 200,
      body: { offset: 1000000, pages: [], next_offset: null },
    });
    for (const [q, field] of [
      ['?limit=0', 'limit'],
      ['?limit=51', 'limit'],
      ['?offset=-1', 'offset'],
      ['?limit=abc', 'limit'],
      ['?offset=1.5', 'offset'],
    ] as const) {
      const res = await pages(q);
      expect(res.status, q).toBe(422);
      expect(res.body.issues[0].loc, q).toEqual(['query', field]);
      expect(Object.keys(res.body).sort()).toEqual(['detail', 'issues']);
    }
  });

  it("answers 422 for a malformed id and 404 for an unknown one or another workspace's", async () => {
    const malformed = await readPages('not-a-uuid');
    expect(malformed.statusCode).toBe(422);
    expect(malformed.json().issues[0].loc).toEqual(['path', 'attachment_id']);
    const unknown = await readPages(crypto.randomUUID());
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json()).toEqual({ detail: 'Attachment not found.' });
    const intruder = await readPages(attachment.id, '', free.apiKey);
    expect(intruder.statusCode).toBe(404);
    expect(intruder.json()).toEqual({ detail: 'Attachment not found.' });
  });
});

describe('spreadsheets', () => {
  it('reads a workbook as rows, each sheet after a `Sheet:` line, in workbook order', async () => {
    const xlsx = await buildXlsx([
      {
        name: 'Leads',
        rows: [
          ['Name', 'Company', 'Score'],
          ['Ada', 'Analytical Engines', 91],
          ['Grace', '', 88, null, ''],
          [new Date(Date.UTC(2026, 0, 15)), true, { formula: '1+1', result: 2 }],
        ],
      },
      { name: 'Notes', rows: [['Call back\nnext week'], []] },
    ]);
    const attachment = await uploaded({ filename: 'leads.xlsx', data: xlsx });
    const res = await readPages(attachment.id);
    expect(res.json()).toMatchObject({
      filename: 'leads.xlsx',
      pages: [
        'Sheet: Leads',
        'Name   Company   Score',
        'Ada   Analytical Engines   91',
        'Grace      88',
        '2026-01-15   TRUE   2',
        'Sheet: Notes',
        'Call back next week',
      ],
      page_count: 7,
      next_offset: null,
    });
  });

  it('reads a CSV as rows', async () => {
    const attachment = await uploaded({
      filename: 'contacts.csv',
      data: Buffer.from('name,email,,\n"Lovelace, Ada",ada@example.com,,\n\nGrace,,x\n'),
      contentType: 'text/csv',
    });
    expect((await readPages(attachment.id)).json()).toMatchObject({
      pages: ['name   email', 'Lovelace, Ada   ada@example.com', 'Grace      x'],
      page_count: 3,
    });
  });

  it('stops a read at its byte size before offset + limit, always returning a page, and cuts a page past the size', async () => {
    const row = (c: string) => c.repeat(100 * 1024);
    // Five rows of 100 KiB, then one of 300 KiB (stored cut at 256 KiB).
    const csv = Buffer.from(
      [row('a'), row('b'), row('c'), row('d'), row('e'), 'f'.repeat(300 * 1024)].join('\n') + '\n',
    );
    const attachment = await uploaded({ filename: 'wide.csv', data: csv });
    expect(attachment.page_count).toBe(6);
    const first = (await readPages(attachment.id, '?limit=50')).json();
    expect(first.pages.map((p: string) => p[0])).toEqual(['a', 'b']);
    expect(first.next_offset).toBe(2);
    const second = (await readPages(attachment.id, `?offset=${first.next_offset}&limit=3`)).json();
    expect(second.pages.map((p: string) => p[0])).toEqual(['c', 'd']);
    expect(second.next_offset).toBe(4);
    const third = (await readPages(attachment.id, '?offset=4')).json();
    expect(third.pages.map((p: string) => p[0])).toEqual(['e']);
    expect(third.next_offset).toBe(5);
    const last = (await readPages(attachment.id, '?offset=5')).json();
    expect(last.pages).toHaveLength(1);
    expect(Buffer.byteLength(last.pages[0])).toBeLessThanOrEqual(pageReadBytesMax);
    expect(last.pages[0]).toMatch(/^f+\n\[page cut at 256 KiB of text\]$/);
    expect(last.next_offset).toBeNull();
  });
});

describe('refusals', () => {
  const failedRow = async (filename: string) => {
    const [row] = await stack.sql<{ id: string; status: string; error: string | null; content: Buffer | null }[]>`
      select id, status, error, content from chat_attachments where filename = ${filename} order by created_at desc limit 1`;
    return row!;
  };

  it('answers 422 for a password-protected PDF, records it failed with the reason, and its pages are 422 too', async () => {
    const res = await upload({ filename: 'locked.pdf', data: readFileSync(join(fixtures, 'password-protected.pdf')) });
    expect(res.statusCode).toBe(422);
    const body = res.json();
    expect(body.detail).toMatch(/password-protected/);
    expect(body.issues).toEqual([
      {
        loc: ['body', 'file'],
        msg: expect.stringMatching(/^The PDF is password-protected/),
        type: 'unreadable_file',
        input: 'locked.pdf',
      },
    ]);
    const row = await failedRow('locked.pdf');
    expect(row).toMatchObject({ status: 'failed', error: expect.stringMatching(/password-protected/), content: null });
    const pages = await readPages(row.id);
    expect(pages.statusCode).toBe(422);
    expect(pages.json().detail).toMatch(/could not be read: The PDF is password-protected/);
    const list = (
      await stack.app.inject({
        method: 'GET',
        url: `/assistant/conversations/${conversation}/attachments/`,
        headers: withKey(paid.apiKey),
      })
    ).json();
    expect(list.attachments.find((a: { id: string }) => a.id === row.id)).toMatchObject({
      status: 'failed',
      page_count: null,
      error: expect.stringMatching(/password/),
    });
  });

  it('reads a PDF encrypted only against changes', async () => {
    const attachment = await uploaded({
      filename: 'restricted.pdf',
      data: readFileSync(join(fixtures, 'owner-encrypted.pdf')),
    });
    expect((await readPages(attachment.id)).json().pages).toEqual(['Budget   1200']);
  });

  it('answers 422 for a truncated PDF', async () => {
    const pdf = await reportPdf(2);
    const res = await upload({ filename: 'cut.pdf', data: pdf.subarray(0, Math.floor(pdf.length / 2)) });
    expect(res.statusCode).toBe(422);
    expect(res.json().detail).toMatch(/damaged or truncated/);
    expect(await failedRow('cut.pdf')).toMatchObject({ status: 'failed' });
  });

  it('answers 422 for a zip bomb workbook, refused from its central directory', async () => {
    const bomb = buildZip([
      ...workbookEntries(),
      { name: 'xl/worksheets/sheet2.xml', data: Buffer.alloc(64 * 1024 * 1024) },
    ]);
    const res = await upload({ filename: 'bomb.xlsx', data: bomb });
    expect(res.statusCode).toBe(422);
    expect(res.json().detail).toMatch(/unpacks \d+ times its size, more than 200; it is not read \(a zip bomb\)/);
    expect(await failedRow('bomb.xlsx')).toMatchObject({ status: 'failed', error: expect.stringMatching(/zip bomb/) });
  });

  it('answers 415 for anything but a PDF, an XLSX or a CSV, judged by content and name', async () => {
    for (const file of [
      { filename: 'notes.txt', data: Buffer.from('hello'), contentType: 'text/plain' },
      { filename: 'fake.pdf', data: Buffer.from('not a pdf'), contentType: 'application/pdf' },
      {
        filename: 'archive.zip',
        data: buildZip([{ name: 'a.txt', data: Buffer.from('a') }]),
        contentType: 'application/zip',
      },
      { filename: 'image.csv', data: Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0x00]), contentType: 'text/csv' },
    ]) {
      const res = await upload(file);
      expect(res.statusCode, file.filename).toBe(415);
      expect(Object.keys(res.json())).toEqual(['detail']);
    }
    const json = await stack.app.inject({
      method: 'POST',
      url: `/assistant/conversations/${conversation}/attachments/`,
      headers: withKey(paid.apiKey),
      payload: { file: 'x' },
    });
    expect(json.statusCode).toBe(415);
    expect(json.json().detail).toMatch(/multipart\/form-data/);
  });

  it('answers 422, never a 500, for a multipart body the parser cannot read', async () => {
    const url = `/assistant/conversations/${conversation}/attachments/`;
    for (const [headers, payload, reason] of [
      [{ 'content-type': 'multipart/form-data' }, 'x', 'Boundary not found'],
      [
        { 'content-type': 'multipart/form-data; boundary=abc' },
        '--abc\r\nContent-Disposition: form-data; name="file"; filename="a.csv"\r\n\r\nhello',
        'Unexpected end',
      ],
    ] as const) {
      const res = await stack.app.inject({
        method: 'POST',
        url,
        headers: { ...withKey(paid.apiKey), ...headers },
        payload,
      });
      expect(res.statusCode).toBe(422);
      expect(res.json().issues).toEqual([
        { loc: ['body'], msg: expect.stringContaining(reason), type: 'multipart_invalid', input: {} },
      ]);
    }
  });

  it('answers 422 when the form has no field `file`', async () => {
    const res = await upload({ filename: 'a.csv', data: Buffer.from('a\n'), field: 'document' });
    expect(res.statusCode).toBe(422);
    expect(res.json().issues[0].loc).toEqual(['body', 'file']);
  });
});

describe('the size limit', () => {
  it('takes a file at the limit and answers 413 past it, naming the limit', async () => {
    stack.integrations.chatAttachments.maxUploadBytes = 1000;
    const at = Buffer.from('x'.repeat(998) + '\n\n');
    expect(at.length).toBe(1000);
    expect((await upload({ filename: 'at.csv', data: at })).statusCode).toBe(201);
    const past = await upload({ filename: 'past.csv', data: Buffer.concat([at, Buffer.from('y')]) });
    expect(past.statusCode).toBe(413);
    expect(past.json()).toEqual({ detail: 'An attachment is at most 1000 bytes; this file is larger.' });
    const [row] = await stack.sql`select 1 from chat_attachments where filename = 'past.csv'`;
    expect(row).toBeUndefined();
  });

  it('answers 413 past the default 20 MiB', async () => {
    const res = await upload({ filename: 'big.csv', data: Buffer.alloc(attachmentBytesMaxDefault + 1, 0x61) });
    expect(res.statusCode).toBe(413);
    expect(res.json().detail).toBe(
      `An attachment is at most 20 MiB (${attachmentBytesMaxDefault} bytes); this file is larger.`,
    );
  });
});

describe('conversations', () => {
  it("lists a conversation's attachments oldest first", async () => {
    const fresh = await insertConversation(stack.sql, paid.workspaceId);
    const first = await upload({ filename: 'one.csv', data: Buffer.from('1\n') }, { conversationId: fresh });
    const second = await upload({ filename: 'two.csv', data: Buffer.from('2\n') }, { conversationId: fresh });
    const res = await stack.app.inject({
      method: 'GET',
      url: `/assistant/conversations/${fresh}/attachments/`,
      headers: withKey(paid.apiKey),
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().attachments.map((a: { id: string; filename: string }) => [a.id, a.filename])).toEqual([
      [first.json().id, 'one.csv'],
      [second.json().id, 'two.csv'],
    ]);
  });

  it("keeps a member to their own conversations' files, as the conversation routes do, and lets an admin see every member's", async () => {
    const member = await stack.addMember(paid.workspaceId, 'member');
    const [memberRow] = await stack.sql<
      { id: string }[]
    >`select id from members where workspace_id = ${paid.workspaceId} and idp_user_id = ${member.userId}`;
    const own = await insertConversation(stack.sql, paid.workspaceId, { memberId: memberRow!.id });
    const asMember = (method: 'GET' | 'POST', url: string, form?: ReturnType<typeof multipartBody>) =>
      stack.app.inject({
        method,
        url,
        headers: { ...withToken(member.accessToken), ...(form?.headers ?? {}) },
        ...(form ? { payload: form.payload } : {}),
      });
    const form = () => multipartBody({ filename: 'mine.csv', contentType: 'text/csv', data: Buffer.from('mine\n') });
    // The member's own conversation: upload, list, read.
    const mine = await asMember('POST', `/assistant/conversations/${own}/attachments/`, form());
    expect(mine.statusCode, mine.body).toBe(201);
    expect((await asMember('GET', `/assistant/conversations/${own}/attachments/`)).json().attachments).toHaveLength(1);
    expect((await asMember('GET', `/chat-attachments/${mine.json().id}/pages/`)).json().pages).toEqual(['mine']);
    // The admin's conversation and its files: 404 to the member, as the conversation itself is.
    const adminsFile = await uploaded({ filename: 'admins.csv', data: Buffer.from('secret\n') });
    expect((await asMember('POST', `/assistant/conversations/${conversation}/attachments/`, form())).statusCode).toBe(
      404,
    );
    expect((await asMember('GET', `/assistant/conversations/${conversation}/attachments/`)).statusCode).toBe(404);
    expect((await asMember('GET', `/chat-attachments/${adminsFile.id}/pages/`)).json()).toEqual({
      detail: 'Attachment not found.',
    });
    // The admin sees the member's.
    expect((await readPages(mine.json().id)).json().pages).toEqual(['mine']);
    expect(
      (
        await stack.app.inject({
          method: 'GET',
          url: `/assistant/conversations/${own}/attachments/`,
          headers: withKey(paid.apiKey),
        })
      ).statusCode,
    ).toBe(200);
  });

  it("answers 404 for another workspace's conversation or an unknown one, and writes nothing", async () => {
    for (const conversationId of [otherConversation, crypto.randomUUID()]) {
      const res = await upload({ filename: 'stolen.csv', data: Buffer.from('a\n') }, { conversationId });
      expect(res.statusCode).toBe(404);
      expect(res.json()).toEqual({ detail: 'Conversation not found.' });
      const list = await stack.app.inject({
        method: 'GET',
        url: `/assistant/conversations/${conversationId}/attachments/`,
        headers: withKey(paid.apiKey),
      });
      expect(list.statusCode).toBe(404);
    }
    const [row] = await stack.sql`select 1 from chat_attachments where filename = 'stolen.csv'`;
    expect(row).toBeUndefined();
  });
});

describe('the OpenAPI document', () => {
  it('documents the upload as multipart with a binary `file`, and the page read with every field of the interface spec required', async () => {
    const doc = (await stack.app.inject({ method: 'GET', url: '/openapi.json' })).json();
    const uploadOp = doc.paths['/assistant/conversations/{conversation_id}/attachments/'].post;
    expect(uploadOp.operationId).toBe('uploadChatAttachment');
    expect(uploadOp.tags).toEqual(['assistant']);
    expect(Object.keys(uploadOp.requestBody.content)).toEqual(['multipart/form-data']);
    expect(uploadOp.requestBody.content['multipart/form-data'].schema.properties.file).toMatchObject({
      type: 'string',
      format: 'binary',
    });
    expect(Object.keys(uploadOp.responses).sort()).toEqual([
      '201',
      '400',
      '401',
      '403',
      '404',
      '413',
      '415',
      '422',
      '429',
      '500',
      '503',
    ]);
    expect(uploadOp.description).toContain('Sheet: <name>');
    const readOp = doc.paths['/chat-attachments/{attachment_id}/pages/'].get;
    expect(readOp.operationId).toBe('readChatAttachmentPages');
    expect(readOp.description).toContain('256 KiB');
    expect(
      readOp.parameters
        .filter((p: { in: string }) => p.in === 'query')
        .map((p: { name: string; schema: object }) => [p.name, p.schema]),
    ).toEqual([
      ['offset', expect.objectContaining({ minimum: 0, default: 0 })],
      ['limit', expect.objectContaining({ minimum: 1, maximum: 50, default: 50 })],
    ]);
    const schema = doc.components.schemas.ChatAttachmentPagesResponse;
    expect([...schema.required].sort()).toEqual([
      'attachment_id',
      'filename',
      'next_offset',
      'offset',
      'page_count',
      'pages',
    ]);
    expect(doc.paths['/assistant/conversations/{conversation_id}/attachments/'].get.operationId).toBe(
      'listChatAttachments',
    );
  });
});
