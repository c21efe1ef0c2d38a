/**
 * Business-context documents (interface spec: AI business context documents, Reference document
 * status, Limits) through the real app and worker: uploads of every kind processed to ready with
 * their steps, a damaged PDF failed with what to do, every bound at and past it, the tri-state
 * patch, the prompt's budget oldest first, re-reads (an edited summary kept unless asked; two at
 * once run one), a document written from a local company site, and the summaries in the assistant's
 * system prompt.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { defaultBusinessDocumentLimits, localSummaryHeading } from '../../domain/documents/documents.js';
import { openAiChatModel } from '../../integrations/chat-model.js';
import { webPageReader } from '../../integrations/web/web-page.js';
import { serveChatModel, type ChatModelServer, type ChatModelServerRequest } from '../../sim/chat-model-server.js';
import { serveHttp, type LocalHttp } from '../../sim/local-http.js';
import { documentStepsQuery, documentWorkflowId } from '../../workflows/documents/document.contract.js';
import { createDocumentActivities } from '../../activities/documents/documents.js';
import { createDocumentExtractor } from '../../integrations/documents/extractor.js';
import { insertDocument } from '../../store/documents/documents.js';
import { buildPdf, buildZip, multipartBody } from '../support/documents.js';
import { useTestStack, withKey } from '../support/test-stack.js';

const { stack, paid } = useTestStack();
let site: LocalHttp;
let model: ChatModelServer;
let modelAnswer: (request: ChatModelServerRequest) => string = () => '- Acme sells widgets.';

beforeAll(async () => {
  site = await serveHttp((req, res) => {
    const pages: Record<string, string> = {
      '/': '<html><head><title>Acme</title><meta name="description" content="Acme makes invoice automation for accounting teams."></head><body><main><h1>Acme</h1><p>Acme reads supplier invoices and posts them to your ledger in seconds.</p><p>Built for finance teams at mid-sized companies across Europe.</p></main></body></html>',
      '/about':
        '<html><head><title>About</title></head><body><p>Acme was founded in 2019 to end manual invoice entry for good.</p></body></html>',
      '/pricing':
        '<html><head><title>Pricing</title></head><body><p>The Starter plan costs 99 euros per month with unlimited users.</p></body></html>',
    };
    const page = pages[req.url ?? ''];
    if (!page) return void res.writeHead(404, { 'content-type': 'text/html' }).end('<p>Not found</p>');
    res.writeHead(200, { 'content-type': 'text/html' }).end(page);
  });
  model = await serveChatModel((request) => ({ content: modelAnswer(request) }));
  stack.integrations.businessDocuments.pageReader = webPageReader({ allowPrivateNetworks: true });
  stack.integrations.businessDocuments.siteOrigin = () => site.url;
});
afterAll(async () => {
  await site?.close();
  await model?.close();
});
afterEach(() => {
  Object.assign(stack.integrations.businessDocuments, {
    maxDocuments: defaultBusinessDocumentLimits.maxDocuments,
    contextChars: defaultBusinessDocumentLimits.contextChars,
    maxUploadBytes: defaultBusinessDocumentLimits.maxUploadBytes,
  });
  stack.integrations.chatModel = null;
});

type Doc = {
  id: string;
  status: string;
  error: string | null;
  title: string;
  filename: string;
  content_type: string;
  size_bytes: number;
  summary: string | null;
  summary_edited: boolean;
  summary_generated_at: string | null;
  included_in_context: boolean;
  in_prompt_budget: boolean;
  steps: { name: string; detail: string | null; duration_ms: number }[];
  created_at: string;
  source: string;
};

const base = '/business-context/documents/';
const text = (s: string) => Buffer.from(s, 'utf8');
const prose =
  'Acme sells invoice automation software to accounting teams. The software reads supplier invoices and posts them to the ledger. ' +
  'Customers save ten hours a week on invoice entry. Pricing starts at 99 euros per month.';

function upload(file: { filename: string; data: Buffer; contentType?: string }, apiKey = paid.apiKey) {
  const body = multipartBody({ contentType: 'application/octet-stream', ...file });
  return stack.app.inject({
    method: 'POST',
    url: base,
    headers: { ...withKey(apiKey), ...body.headers },
    payload: body.payload,
  });
}
const get = (url: string, apiKey = paid.apiKey) => stack.app.inject({ method: 'GET', url, headers: withKey(apiKey) });
const send = (method: 'POST' | 'PATCH' | 'DELETE', url: string, payload?: object, apiKey = paid.apiKey) =>
  stack.app.inject({ method, url, headers: withKey(apiKey), ...(payload ? { payload } : {}) });

async function settled(id: string, apiKey = paid.apiKey): Promise<Doc> {
  for (let i = 0; i < 300; i += 1) {
    const doc = (await get(`${base}${id}/`, apiKey)).json<Doc>();
    if (doc.status === 'ready' || doc.status === 'failed') return doc;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`document ${id} did not settle`);
}

async function uploaded(
  file: { filename: string; data: Buffer; contentType?: string },
  apiKey = paid.apiKey,
): Promise<Doc> {
  const res = await upload(file, apiKey);
  expect(res.statusCode, res.body).toBe(202);
  const doc = res.json<Doc>();
  expect(doc.status).toBe('pending');
  return settled(doc.id, apiKey);
}

/** A minimal Word document: the three parts mammoth needs. */
function buildDocx(paragraphs: string[]): Buffer {
  const xml = (s: string) => Buffer.from(`<?xml version="1.0" encoding="UTF-8" standalone="yes"?>${s}`, 'utf8');
  return buildZip([
    {
      name: '[Content_Types].xml',
      data: xml(
        '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>' +
          '<Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>',
      ),
    },
    {
      name: '_rels/.rels',
      data: xml(
        '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>',
      ),
    },
    {
      name: 'word/document.xml',
      data: xml(
        `<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>${paragraphs.map((p) => `<w:p><w:r><w:t>${p}</w:t></w:r></w:p>`).join('')}</w:body></w:document>`,
      ),
    },
  ]);
}

const storedText = async (id: string) =>
  (
    await stack.sql<
      { text: string }[]
    >`select text from business_document_chunks where document_id = ${id} order by chunk_index`
  )
    .map((r) => r.text)
    .join('');

/** A workspace of its own, so counts and budgets are the test's alone. */
const ownWorkspace = () => stack.createWorkspace('paid');

describe('uploads of every kind', () => {
  it('PDF, DOCX, Markdown, plain text and HTML are read, chunked and summarised locally, with their steps', async () => {
    const pdf = await buildPdf([
      {
        texts: [
          { text: 'Acme sells invoice automation software to accounting teams.', x: 50, top: 100 },
          { text: 'Pricing starts at 99 euros per month for every team.', x: 50, top: 130 },
        ],
      },
    ]);
    const files = [
      {
        filename: 'brochure.pdf',
        data: pdf,
        expect: 'Acme sells invoice automation software',
        type: 'application/pdf',
      },
      {
        filename: 'Offer.docx',
        data: buildDocx([
          'Acme sells invoice automation software to accounting teams.',
          'Pricing starts at 99 euros per month.',
        ]),
        expect: 'Pricing starts at 99 euros',
        type: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
      },
      { filename: 'notes.md', data: text(`# Acme\n\n${prose}`), expect: '# Acme', type: 'text/markdown' },
      { filename: 'plain.txt', data: text(prose), expect: 'Customers save ten hours', type: 'text/plain' },
      {
        filename: 'page.html',
        data: text(
          `<html><head><title>Acme page</title><script>var x = 1;</script></head><body><p>${prose}</p></body></html>`,
        ),
        expect: 'Acme page',
        type: 'text/html',
      },
    ];
    const ws = await ownWorkspace();
    for (const file of files) {
      const doc = await uploaded(file, ws.apiKey);
      expect(doc.status, `${file.filename}: ${doc.error}`).toBe('ready');
      expect(doc.content_type).toBe(file.type);
      expect(doc.size_bytes).toBe(file.data.length);
      expect(doc.title).toBe(file.filename.replace(/\.[a-z]+$/, ''));
      expect(doc.steps.map((s) => s.name)).toEqual(['extract', 'chunk', 'summarise']);
      expect(doc.steps[2]!.detail).toMatch(/local extractive/);
      expect(doc.summary!.split('\n')[0]).toBe(localSummaryHeading);
      expect(doc.summary_edited).toBe(false);
      expect(doc.summary_generated_at).not.toBeNull();
      expect(await storedText(doc.id)).toContain(file.expect);
      if (file.filename === 'page.html') expect(await storedText(doc.id)).not.toContain('var x');
      const [row] = await stack.sql<
        { content: Buffer | null; summary_source: string }[]
      >`select content, summary_source from business_documents where id = ${doc.id}`;
      expect(row!.content).toBeNull();
      expect(row!.summary_source).toBe('local-extractive');
    }
    // The workflow's query shows the same steps (for the Temporal UI).
    const docs = (await get(base, ws.apiKey)).json().documents as Doc[];
    const steps = await stack.client.workflow.getHandle(documentWorkflowId(docs[0]!.id)).query(documentStepsQuery);
    expect(steps.map((s) => s.name)).toEqual(['extract', 'chunk', 'summarise']);
  });

  it('the upload answers 202 pending with no steps, committed before its workflow starts', async () => {
    const res = await upload({ filename: 'p.txt', data: text(prose) });
    expect(res.statusCode).toBe(202);
    const doc = res.json<Doc>();
    expect(doc).toMatchObject({ status: 'pending', steps: [], summary: null, source: 'upload', error: null });
    // The row was committed before the workflow started.
    const started = (await stack.client.workflow.getHandle(documentWorkflowId(doc.id)).describe()).startTime;
    expect(started.getTime()).toBeGreaterThanOrEqual(Date.parse(doc.created_at));
    await settled(doc.id);
  });

  it('with a chat model configured, the model writes the summary', async () => {
    stack.integrations.chatModel = openAiChatModel({ apiKey: 'local', model: 'local-model', baseUrl: model.url });
    modelAnswer = () => '- Acme sells invoice automation to accounting teams.\n- 99 euros a month.';
    const doc = await uploaded({ filename: 'm.txt', data: text(prose) });
    expect(doc.summary).toBe('- Acme sells invoice automation to accounting teams.\n- 99 euros a month.');
    expect(doc.steps[2]!.detail).toMatch(/chat model local-model/);
    const [row] = await stack.sql<
      { summary_source: string }[]
    >`select summary_source from business_documents where id = ${doc.id}`;
    expect(row!.summary_source).toBe('model:local-model');
  });

  it('a damaged PDF fails with an error a person can act on', async () => {
    const pdf = await buildPdf([{ texts: [{ text: 'Hello', x: 50, top: 100 }] }]);
    const damaged = Buffer.concat([pdf.subarray(0, 40), Buffer.alloc(200, 0x41)]);
    const doc = await uploaded({ filename: 'broken.pdf', data: damaged });
    expect(doc.status).toBe('failed');
    expect(doc.error).toMatch(/PDF could not be read/);
    expect(doc.error).toMatch(/[Uu]pload/);
    expect(doc.steps.at(-1)).toMatchObject({ name: 'failed', detail: doc.error });
    // Failed is absorbing: a later read finds it unchanged.
    expect((await get(`${base}${doc.id}/`)).json()).toMatchObject({ status: 'failed', error: doc.error });
  });

  it('an empty text file fails saying there is no text', async () => {
    const doc = await uploaded({ filename: 'empty.txt', data: text('   \n') });
    expect(doc.status).toBe('failed');
    expect(doc.error).toMatch(/no text/);
  });
});

describe('bounds', () => {
  it('415 for a kind not read, 413 past the size limit, 409 naming max_documents at it', async () => {
    const ws = await ownWorkspace();
    expect(
      (await upload({ filename: 'a.csv', data: text('a,b\n1,2\n'), contentType: 'text/csv' }, ws.apiKey)).statusCode,
    ).toBe(415);
    stack.integrations.businessDocuments.maxUploadBytes = 100;
    expect((await upload({ filename: 'a.txt', data: Buffer.alloc(100, 0x61) }, ws.apiKey)).statusCode).toBe(202);
    const big = await upload({ filename: 'b.txt', data: Buffer.alloc(101, 0x61) }, ws.apiKey);
    expect(big.statusCode).toBe(413);
    expect(big.json().detail).toMatch(/100 bytes/);
    stack.integrations.businessDocuments.maxUploadBytes = defaultBusinessDocumentLimits.maxUploadBytes;
    stack.integrations.businessDocuments.maxDocuments = 2;
    expect((await upload({ filename: 'c.txt', data: text(prose) }, ws.apiKey)).statusCode).toBe(202);
    const full = await upload({ filename: 'd.txt', data: text(prose) }, ws.apiKey);
    expect(full.statusCode).toBe(409);
    expect(full.json().detail).toMatch(/at most 2 .*max_documents/);
    const list = (await get(base, ws.apiKey)).json();
    expect(list.max_documents).toBe(2);
    expect(list.documents).toHaveLength(2);
  });

  it('summary 2000 and 2001, title 0, 1, 255 and 256', async () => {
    const doc = await uploaded({ filename: 'b.txt', data: text(prose) });
    const url = `${base}${doc.id}/`;
    expect((await send('PATCH', url, { summary: 'x'.repeat(2000) })).statusCode).toBe(200);
    expect((await send('PATCH', url, { summary: 'x'.repeat(2001) })).statusCode).toBe(422);
    expect((await send('PATCH', url, { title: '' })).statusCode).toBe(422);
    // Postgres cannot store a NUL: the schema refuses it (and says so in the document) instead of the database.
    const nul = await send('PATCH', url, { title: 'a\u0000b' });
    expect(nul.statusCode).toBe(422);
    expect(nul.json().issues[0].loc).toEqual(['body', 'title']);
    expect((await send('PATCH', url, { summary: 'a\u0000b' })).json().issues[0].loc).toEqual(['body', 'summary']);
    expect((await send('PATCH', url, { title: 'x' })).json().title).toBe('x');
    expect((await send('PATCH', url, { title: 'y'.repeat(255) })).json().title).toBe('y'.repeat(255));
    expect((await send('PATCH', url, { title: 'z'.repeat(256) })).statusCode).toBe(422);
    const after = (await get(url)).json<Doc>();
    expect(after.title).toBe('y'.repeat(255));
    expect(after.summary).toBe('x'.repeat(2000));
  });
});

describe('the tri-state patch', () => {
  it('a field left out keeps its value; a saved summary is edited; null clears it and writes it again', async () => {
    const doc = await uploaded({ filename: 'tri.txt', data: text(prose) });
    const url = `${base}${doc.id}/`;
    const titled = (await send('PATCH', url, { title: 'New title' })).json<Doc>();
    expect(titled).toMatchObject({
      title: 'New title',
      included_in_context: true,
      summary: doc.summary,
      summary_edited: false,
    });
    const excluded = (await send('PATCH', url, { included_in_context: false })).json<Doc>();
    expect(excluded).toMatchObject({ title: 'New title', included_in_context: false, summary: doc.summary });
    const edited = (await send('PATCH', url, { summary: 'We sell invoices.' })).json<Doc>();
    expect(edited).toMatchObject({
      title: 'New title',
      included_in_context: false,
      summary: 'We sell invoices.',
      summary_edited: true,
    });
    const cleared = (await send('PATCH', url, { summary: null })).json<Doc>();
    expect(cleared).toMatchObject({
      summary: null,
      summary_edited: false,
      title: 'New title',
      included_in_context: false,
      status: 'pending',
      steps: [],
    });
    const again = await settled(doc.id);
    expect(again.summary!.split('\n')[0]).toBe(localSummaryHeading);
    expect(again.summary_edited).toBe(false);
    expect((await send('PATCH', url, {})).json()).toMatchObject({
      title: 'New title',
      included_in_context: false,
      summary: again.summary,
    });
    expect((await send('PATCH', url, { status: 'ready' })).statusCode).toBe(422);
  });
});

describe('the prompt budget', () => {
  it('counts included ready summaries oldest first; later ones report false; a single read reports true', async () => {
    const ws = await ownWorkspace();
    const docs: Doc[] = [];
    for (const name of ['one', 'two', 'three', 'four'])
      docs.push(await uploaded({ filename: `${name}.txt`, data: text(prose) }, ws.apiKey));
    const patchAs = (id: string, body: object) => send('PATCH', `${base}${id}/`, body, ws.apiKey);
    await patchAs(docs[0]!.id, { summary: 'a'.repeat(40) });
    await patchAs(docs[1]!.id, { summary: 'b'.repeat(60) });
    await patchAs(docs[2]!.id, { summary: 'c'.repeat(10) });
    await patchAs(docs[3]!.id, { summary: 'd'.repeat(1) });
    stack.integrations.businessDocuments.contextChars = 100;
    const flags = async () => ((await get(base, ws.apiKey)).json().documents as Doc[]).map((d) => d.in_prompt_budget);
    expect(await flags()).toEqual([true, true, false, false]);
    expect((await get(base, ws.apiKey)).json().max_context_chars).toBe(100);
    expect((await get(`${base}${docs[2]!.id}/`, ws.apiKey)).json().in_prompt_budget).toBe(true);
    // Leaving the second one out frees its characters for the later ones.
    await patchAs(docs[1]!.id, { included_in_context: false });
    expect(await flags()).toEqual([true, true, true, true]);
  });

  it("the assistant's system prompt reads the included summaries within the budget, oldest first", async () => {
    const ws = await ownWorkspace();
    const first = await uploaded({ filename: 'first.txt', data: text(prose) }, ws.apiKey);
    const second = await uploaded({ filename: 'second.txt', data: text(prose) }, ws.apiKey);
    const third = await uploaded({ filename: 'third.txt', data: text(prose) }, ws.apiKey);
    await send('PATCH', `${base}${first.id}/`, { summary: 'FIRST-SUMMARY sells widgets' }, ws.apiKey);
    await send('PATCH', `${base}${second.id}/`, { summary: 'SECOND-SUMMARY sells gadgets' }, ws.apiKey);
    await send(
      'PATCH',
      `${base}${third.id}/`,
      { summary: 'THIRD-SUMMARY excluded', included_in_context: false },
      ws.apiKey,
    );
    stack.integrations.chatModel = openAiChatModel({ apiKey: 'local', model: 'local-model', baseUrl: model.url });
    modelAnswer = () => 'Hello.';
    const before = model.requests.length;
    const conversation = (await send('POST', '/assistant/conversations/', {}, ws.apiKey)).json<{ id: string }>();
    const asked = await send(
      'POST',
      `/assistant/conversations/${conversation.id}/messages/`,
      { content: 'What do we sell?' },
      ws.apiKey,
    );
    expect(asked.statusCode, asked.body).toBe(200);
    const system = model.requests.slice(before).find((r) => r.messages[0]?.role === 'system')!.messages[0]!.content!;
    expect(system).toContain('What this workspace sells');
    expect(system.indexOf('FIRST-SUMMARY')).toBeGreaterThan(-1);
    expect(system.indexOf('SECOND-SUMMARY')).toBeGreaterThan(system.indexOf('FIRST-SUMMARY'));
    expect(system).not.toContain('THIRD-SUMMARY');
  });
});

describe('re-reads', () => {
  it('start a new run with steps empty and keep an edited summary unless asked to regenerate', async () => {
    const doc = await uploaded({ filename: 'r.txt', data: text(prose) });
    const url = `${base}${doc.id}/`;
    await send('PATCH', url, { summary: 'Edited by hand.' });
    const rerun = await send('POST', `${url}reread/`, {});
    expect(rerun.statusCode, rerun.body).toBe(202);
    expect(rerun.json()).toMatchObject({ status: 'pending', steps: [] });
    const kept = await settled(doc.id);
    expect(kept).toMatchObject({ status: 'ready', summary: 'Edited by hand.', summary_edited: true });
    expect(kept.steps.map((s) => s.name)).toEqual(['extract', 'chunk', 'summarise']);
    expect(kept.steps[0]!.detail).toMatch(/text kept from the last read/);
    expect((await send('POST', `${url}reread/`, { regenerate_summary: true })).statusCode).toBe(202);
    const regenerated = await settled(doc.id);
    expect(regenerated.summary!.split('\n')[0]).toBe(localSummaryHeading);
    expect(regenerated.summary_edited).toBe(false);
    const [row] = await stack.sql<{ run: number }[]>`select run from business_documents where id = ${doc.id}`;
    expect(row!.run).toBe(3);
  });

  it('two re-reads at once run one: the other is 409', async () => {
    const doc = await uploaded({ filename: 'twice.txt', data: text(prose) });
    const answers = await Promise.all([
      send('POST', `${base}${doc.id}/reread/`, {}),
      send('POST', `${base}${doc.id}/reread/`, {}),
    ]);
    expect(answers.map((a) => a.statusCode).sort()).toEqual([202, 409]);
    const done = await settled(doc.id);
    expect(done.status).toBe('ready');
    const [row] = await stack.sql<{ run: number }[]>`select run from business_documents where id = ${doc.id}`;
    expect(row!.run).toBe(2);
    expect(done.steps.map((s) => s.name)).toEqual(['extract', 'chunk', 'summarise']);
  });

  it('an unknown document is 404; delete removes it', async () => {
    const doc = await uploaded({ filename: 'del.txt', data: text(prose) });
    expect((await send('DELETE', `${base}${doc.id}/`)).statusCode).toBe(204);
    expect((await get(`${base}${doc.id}/`)).statusCode).toBe(404);
    expect((await send('POST', `${base}${doc.id}/reread/`, {})).statusCode).toBe(404);
    expect((await send('DELETE', `${base}${doc.id}/`)).statusCode).toBe(404);
  });
});

describe('a document from a company domain', () => {
  it('reads the home page and same-site pages and writes each fact with its page and confidence (local, saying so)', async () => {
    const res = await send('POST', `${base}generate/`, { domain: 'acme.example' });
    expect(res.statusCode, res.body).toBe(202);
    const doc = res.json<Doc>();
    expect(doc).toMatchObject({
      status: 'pending',
      filename: 'acme.example.md',
      content_type: 'text/markdown',
      title: 'acme.example',
    });
    const done = await settled(doc.id);
    expect(done.status, done.error ?? '').toBe('ready');
    const written = await storedText(doc.id);
    expect(written).toMatch(/no chat model configured/);
    expect(written).toContain(
      `Acme makes invoice automation for accounting teams. (source: ${site.url}/; confidence: high)`,
    );
    expect(written).toContain(`(source: ${site.url}/pricing; confidence: medium)`);
    expect(written).toContain('## Offers');
    expect(written).not.toContain('/customers;');
  });

  it('with a chat model, the model writes the facts; one naming a page not read is left out', async () => {
    stack.integrations.chatModel = openAiChatModel({ apiKey: 'local', model: 'local-model', baseUrl: model.url });
    modelAnswer = (request) =>
      request.response_format
        ? JSON.stringify({
            does: [{ fact: 'Invoice automation', source_url: `${site.url}/`, confidence: 'high' }],
            for_whom: [{ fact: 'Finance teams', source_url: 'https://elsewhere.example/', confidence: 'low' }],
            offers: [{ fact: 'Starter plan, 99 euros a month', source_url: `${site.url}/pricing`, confidence: 'high' }],
          })
        : '- Acme: invoice automation.';
    const doc = await settled((await send('POST', `${base}generate/`, { domain: 'acme.example' })).json<Doc>().id);
    const written = await storedText(doc.id);
    expect(written).toMatch(/Written by the chat model local-model/);
    expect(written).toContain(`- Starter plan, 99 euros a month (source: ${site.url}/pricing; confidence: high)`);
    expect(written).not.toContain('Finance teams');
  });

  it('a URL, a path, a port or an IP address is 422', async () => {
    for (const domain of [
      'https://acme.example',
      'acme.example/about',
      'acme.example:8080',
      '127.0.0.1',
      '',
      'localhost',
    ]) {
      expect((await send('POST', `${base}generate/`, { domain })).statusCode, domain).toBe(422);
    }
  });

  it('a site the page reader refuses (a private address, without the local override) is 422 with the reason', async () => {
    const reader = stack.integrations.businessDocuments.pageReader;
    stack.integrations.businessDocuments.pageReader = webPageReader();
    try {
      const res = await send('POST', `${base}generate/`, { domain: 'acme.example' });
      expect(res.statusCode).toBe(422);
      expect(res.json().detail).toMatch(/could not be read/);
    } finally {
      stack.integrations.businessDocuments.pageReader = reader;
    }
  });
});

describe('exactly once', () => {
  it('a retried or replayed activity changes nothing and records no step twice; a finished run writes nothing more', async () => {
    const ws = await ownWorkspace();
    // Committed pending with no workflow: the activities are called by hand, as retries after a worker died would call them.
    const inserted = await insertDocument(
      stack.sql,
      ws.workspaceId,
      { title: 'Crash', filename: 'crash.txt', contentType: 'text/plain', content: text(prose) },
      25,
    );
    if (inserted === 'full') throw new Error('full');
    const extractor = createDocumentExtractor(stack.integrations.chatAttachments);
    const activities = createDocumentActivities({ sql: stack.sql, extractor, chatModel: () => null });
    const args = { documentId: inserted.id, run: 1 };
    try {
      expect(await activities.beginDocumentRun(args)).toBe(true);
      expect(await activities.beginDocumentRun(args)).toBe(true);
      expect((await activities.readDocumentText(args)).continue).toBe(true);
      expect((await activities.readDocumentText(args)).continue).toBe(true);
      expect((await activities.summariseDocument(args)).ready).toBe(true);
      // The run is over: a late retry of any activity, or a failure report, writes nothing.
      expect((await activities.summariseDocument(args)).ready).toBe(false);
      expect(await activities.beginDocumentRun(args)).toBe(false);
      expect((await activities.readDocumentText(args)).continue).toBe(false);
      expect((await activities.failDocumentRun({ ...args, error: 'late' })).steps).toEqual([]);
      // A stale run (1) cannot touch the next one (2).
      expect((await send('POST', `${base}${inserted.id}/reread/`, {}, ws.apiKey)).statusCode).toBe(202);
      expect(await activities.beginDocumentRun(args)).toBe(false);
      const done = await settled(inserted.id, ws.apiKey);
      expect(done.status).toBe('ready');
      expect(done.steps.map((s) => s.name)).toEqual(['extract', 'chunk', 'summarise']);
      const [row] = await stack.sql<
        { run: number; status: string }[]
      >`select run, status from business_documents where id = ${inserted.id}`;
      expect(row).toEqual({ run: 2, status: 'ready' });
    } finally {
      await extractor.close();
    }
  });
});

describe('the OpenAPI document', () => {
  it('lists every business-context operation under its tag, with its error bodies', async () => {
    const doc = (await stack.app.inject({ method: 'GET', url: '/openapi.json' })).json<{
      paths: Record<
        string,
        Record<string, { operationId: string; tags: string[]; responses: Record<string, unknown> }>
      >;
    }>();
    const ops = Object.entries(doc.paths)
      .filter(([path]) => path.startsWith('/business-context/'))
      .flatMap(([path, methods]) => Object.entries(methods).map(([method, op]) => ({ path, method, op })));
    expect(ops.map((o) => o.op.operationId).sort()).toEqual([
      'deleteBusinessDocument',
      'generateBusinessDocument',
      'linkDriveDocuments',
      'listBusinessDocuments',
      'readBusinessDocument',
      'rereadBusinessDocument',
      'updateBusinessDocument',
      'uploadBusinessDocument',
    ]);
    for (const { op } of ops) {
      expect(op.tags).toEqual(['business-context']);
      expect(op.responses['500']).toBeDefined();
      expect(JSON.stringify(op.responses['422'])).toContain('ValidationBody');
    }
  });
});
