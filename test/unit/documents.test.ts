/**
 * The pure rules of business-context documents: the prompt's budget, chunking, the local summariser,
 * kinds and the bounds of the interface spec's AI business context documents.
 */
import { describe, expect, it } from 'vitest';
import {
  BusinessDocumentSchema,
  chunkText,
  companyDocument,
  detectDocumentKind,
  DomainSchema,
  extractiveSummary,
  inPromptBudget,
  localCompanyFacts,
  localSummaryHeading,
  promptDocuments,
  titleFromFilename,
  UpdateBusinessDocumentSchema,
  type BudgetEntry,
} from '../../domain/documents/documents.js';

const doc = (id: string, minute: number, summary: string | null, extra: Partial<BudgetEntry> = {}): BudgetEntry => ({
  id,
  status: 'ready',
  included_in_context: true,
  summary,
  created_at: new Date(Date.UTC(2026, 0, 1, 0, minute)),
  ...extra,
});

describe('inPromptBudget', () => {
  it('counts included ready summaries oldest first; the first past the budget and every later one are out', () => {
    const docs = [
      doc('c', 3, 'x'.repeat(10)),
      doc('a', 1, 'x'.repeat(40)),
      doc('b', 2, 'x'.repeat(60)),
      doc('d', 4, 'x'.repeat(1)),
    ];
    const budget = inPromptBudget(docs, 100);
    expect(Object.fromEntries(budget)).toEqual({ a: true, b: true, c: false, d: false });
    expect(promptDocuments(docs, 100).map((d) => d.id)).toEqual(['a', 'b']);
  });

  it('exactly at the budget is in; one past is out', () => {
    expect(inPromptBudget([doc('a', 1, 'x'.repeat(100))], 100).get('a')).toBe(true);
    expect(inPromptBudget([doc('a', 1, 'x'.repeat(101))], 100).get('a')).toBe(false);
  });

  it('excluded, unready and summary-less documents report true and take no budget', () => {
    const docs = [
      doc('x', 0, 'x'.repeat(500), { included_in_context: false }),
      doc('p', 1, 'x'.repeat(500), { status: 'processing' }),
      doc('n', 2, null),
      doc('a', 3, 'x'.repeat(100)),
    ];
    expect(Object.fromEntries(inPromptBudget(docs, 100))).toEqual({ x: true, p: true, n: true, a: true });
  });
});

describe('chunkText', () => {
  it('joins back to the text, each chunk within the size, cut at paragraph breaks when it can', () => {
    const text = Array.from({ length: 50 }, (_, i) => `Paragraph ${i} says something of some length here.`).join(
      '\n\n',
    );
    const chunks = chunkText(text, 300);
    expect(chunks.join('')).toBe(text);
    for (const c of chunks) expect(c.length).toBeLessThanOrEqual(300);
    for (const c of chunks.slice(0, -1)) expect(c.endsWith('\n\n')).toBe(true);
  });

  it('cuts a word longer than a chunk where it must; empty text is one empty chunk', () => {
    expect(chunkText('a'.repeat(25), 10)).toEqual(['a'.repeat(10), 'a'.repeat(10), 'a'.repeat(5)]);
    expect(chunkText('', 10)).toEqual(['']);
  });
});

describe('the local extractive summariser', () => {
  const text =
    'Acme sells invoice automation software for mid-sized accounting teams. ' +
    'Our invoice automation reads supplier invoices and posts them to the ledger. ' +
    'The weather was nice on the day we founded the company in a garage. ' +
    'Pricing starts at 99 dollars per month for invoice automation with unlimited users.';

  it('says it is an extract on its first line and takes sentences as written, in order', () => {
    const summary = extractiveSummary(text)!;
    const [first, ...rest] = summary.split('\n');
    expect(first).toBe(localSummaryHeading);
    expect(first).toMatch(/no model/i);
    for (const line of rest) expect(text).toContain(line.slice(2));
    expect(rest.length).toBeGreaterThan(0);
    const positions = rest.map((line) => text.indexOf(line.slice(2)));
    expect([...positions].sort((a, b) => a - b)).toEqual(positions);
  });

  it('stays within its size and the 2000 bound; no sentences is null', () => {
    const long = Array.from(
      { length: 400 },
      (_, i) => `Sentence number ${i} talks about invoices and ledgers at length.`,
    ).join(' ');
    expect(extractiveSummary(long, 5000)!.length).toBeLessThanOrEqual(2000);
    expect(extractiveSummary(long, 600)!.length).toBeLessThanOrEqual(600);
    expect(extractiveSummary('   \n  ')).toBeNull();
  });
});

describe('bounds of the interface spec (AI business context documents)', () => {
  const base = {
    id: '00000000-0000-4000-8000-000000000000',
    source: 'upload',
    status: 'ready',
    error: null,
    title: 't',
    filename: 'f.md',
    content_type: 'text/markdown',
    size_bytes: 1,
    summary: null,
    summary_edited: false,
    summary_generated_at: null,
    included_in_context: true,
    drive_file_id: null,
    drive_web_view_link: null,
    in_prompt_budget: true,
    steps: [],
    created_at: '2026-01-01T00:00:00Z',
    updated_at: '2026-01-01T00:00:00Z',
  };
  const step = {
    name: 's',
    detail: null,
    started_at: '2026-01-01T00:00:00Z',
    finished_at: '2026-01-01T00:00:00Z',
    duration_ms: 0,
  };

  it('summary at most 2000, title 1 to 255, steps at most 40', () => {
    expect(UpdateBusinessDocumentSchema.safeParse({ summary: 'x'.repeat(2000) }).success).toBe(true);
    expect(UpdateBusinessDocumentSchema.safeParse({ summary: 'x'.repeat(2001) }).success).toBe(false);
    expect(UpdateBusinessDocumentSchema.safeParse({ summary: null }).success).toBe(true);
    expect(UpdateBusinessDocumentSchema.safeParse({ title: '' }).success).toBe(false);
    expect(UpdateBusinessDocumentSchema.safeParse({ title: 'x' }).success).toBe(true);
    expect(UpdateBusinessDocumentSchema.safeParse({ title: 'x'.repeat(255) }).success).toBe(true);
    expect(UpdateBusinessDocumentSchema.safeParse({ title: 'x'.repeat(256) }).success).toBe(false);
    expect(BusinessDocumentSchema.safeParse({ ...base, steps: Array(40).fill(step) }).success).toBe(true);
    expect(BusinessDocumentSchema.safeParse({ ...base, steps: Array(41).fill(step) }).success).toBe(false);
    expect(BusinessDocumentSchema.safeParse({ ...base, source: 'website' }).success).toBe(false);
  });

  it('a domain is bare: no scheme, path, port or IP address', () => {
    expect(DomainSchema.parse('Example.COM')).toBe('example.com');
    for (const bad of [
      'https://example.com',
      'example.com/about',
      'example.com:8080',
      '10.0.0.1',
      '[::1]',
      'localhost',
      'exa mple.com',
      '-a.com',
    ]) {
      expect(DomainSchema.safeParse(bad).success, bad).toBe(false);
    }
  });
});

describe('kinds and titles', () => {
  const bytes = (s: string) => new Uint8Array(Buffer.from(s));
  it('judges PDF, DOCX, Markdown, HTML and text; refuses the rest', () => {
    expect(detectDocumentKind(bytes('%PDF-1.7'), 'x.bin', '')).toBe('pdf');
    expect(detectDocumentKind(bytes('PK\u0003\u0004'), 'a.docx', '')).toBe('docx');
    expect(detectDocumentKind(bytes('PK\u0003\u0004'), 'a.xlsx', '')).toHaveProperty('refused');
    expect(detectDocumentKind(bytes('# Hi'), 'a.md', '')).toBe('markdown');
    expect(detectDocumentKind(bytes('<!doctype html><p>x'), 'a', '')).toBe('html');
    expect(detectDocumentKind(bytes('hello'), 'a.txt', '')).toBe('text');
    expect(detectDocumentKind(bytes('a,b'), 'a.csv', 'text/csv')).toHaveProperty('refused');
    expect(detectDocumentKind(new Uint8Array([1, 0, 2]), 'a.txt', '')).toHaveProperty('refused');
  });
  it('titles come from the file name', () => {
    expect(titleFromFilename('Pricing 2026.pdf')).toBe('Pricing 2026');
    expect(titleFromFilename('.md')).toBe('Untitled document');
    expect(titleFromFilename(`${'x'.repeat(300)}.md`)).toHaveLength(255);
  });
});

describe('the company document', () => {
  it('names each fact with its page and confidence, and says when it is a local extract', () => {
    const facts = localCompanyFacts([
      {
        url: 'https://acme.test/',
        role: 'home',
        title: 'Acme',
        description: 'Acme automates invoices.',
        text: 'We help finance teams close the books faster every month.',
      },
      {
        url: 'https://acme.test/pricing',
        role: 'pricing',
        title: 'Pricing',
        description: null,
        text: 'The starter plan costs 99 dollars per month per company.',
      },
    ]);
    expect(facts.does[0]).toEqual({
      fact: 'Acme automates invoices.',
      source_url: 'https://acme.test/',
      confidence: 'high',
    });
    expect(facts.offers[0]!.source_url).toBe('https://acme.test/pricing');
    const md = companyDocument('acme.test', facts, 'local', ['https://acme.test/'], new Date('2026-01-01T00:00:00Z'));
    expect(md).toMatch(/no chat model configured/);
    expect(md).toContain('(source: https://acme.test/pricing; confidence: medium)');
  });
});
