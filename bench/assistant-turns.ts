/**
 * The assistant's own overhead, measured against a local model that answers at once (the model's
 * time is not ours): the stream's time to first byte and to first text at C concurrent
 * conversations, and approve-all of 50 cards (every card applied exactly once). Run by
 * `npm run bench:assistant` (bench/assistant.ts) against the stack it starts.
 */
import { performance } from 'node:perf_hooks';
import { request } from 'undici';
import type { Sql } from '../db/sql.js';
import type { ChatModelScript, ChatModelServerRequest } from '../sim/chat-model-server.js';

export interface TurnBenchOptions {
  apiUrl: string;
  apiKey: string;
  sql: Sql;
  log: (line: string) => void;
  /** Scripts the local model's next answers. */
  setScript: (script: (request: ChatModelServerRequest) => ChatModelScript) => void;
  conversations?: number;
  questionsEach?: number;
  approveAllRounds?: number;
}

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
};
const ms = (v: number) => `${v.toFixed(1)} ms`;

async function call<T>(o: TurnBenchOptions, method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
  const res = await request(o.apiUrl + path, {
    method,
    headers: { 'x-api-key': o.apiKey, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.body.text();
  if (res.statusCode >= 300) throw new Error(`${method} ${path}: ${res.statusCode} ${text}`);
  return JSON.parse(text) as T;
}

/** Asks a question and times the answer's first byte, first text and end. */
async function timedAnswer(o: TurnBenchOptions, conversationId: string, content: string) {
  const started = performance.now();
  const res = await request(`${o.apiUrl}/assistant/conversations/${conversationId}/messages/`, {
    method: 'POST',
    headers: { 'x-api-key': o.apiKey, 'content-type': 'application/json' },
    body: JSON.stringify({ content }),
  });
  if (res.statusCode !== 200) throw new Error(`ask: ${res.statusCode} ${await res.body.text()}`);
  let firstByte = NaN;
  let firstText = NaN;
  let body = '';
  for await (const chunk of res.body) {
    if (Number.isNaN(firstByte)) firstByte = performance.now() - started;
    body += (chunk as Buffer).toString('utf8');
    if (Number.isNaN(firstText) && body.includes('"text-delta"')) firstText = performance.now() - started;
  }
  if (!body.includes('data: [DONE]') || !body.includes('"finish"'))
    throw new Error(`the answer did not finish: ${body.slice(-300)}`);
  return { firstByte, firstText, total: performance.now() - started };
}

export async function benchStream(o: TurnBenchOptions) {
  const conversations = o.conversations ?? 20;
  const questions = o.questionsEach ?? 10;
  o.setScript(() => ({ content: 'Here is a short answer from the local model.' }));
  const ids = await Promise.all(
    [...Array(conversations)].map(() =>
      call<{ id: string }>(o, 'POST', '/assistant/conversations/', {}).then((c) => c.id),
    ),
  );
  await timedAnswer(o, ids[0]!, 'warm up');
  // One conversation at a time first: the overhead of an answer alone, beside the same at C at once.
  const alone: number[] = [];
  for (let q = 0; q < 20; q += 1) alone.push((await timedAnswer(o, ids[0]!, `Alone ${q}`)).firstByte);
  o.log(
    `stream, one conversation at a time: first byte p50 ${ms(percentile(alone, 50))}, p99 ${ms(percentile(alone, 99))}`,
  );
  const samples: Awaited<ReturnType<typeof timedAnswer>>[] = [];
  const t = performance.now();
  await Promise.all(
    ids.map(async (id) => {
      for (let q = 0; q < questions; q += 1) samples.push(await timedAnswer(o, id, `Question ${q}`));
    }),
  );
  const seconds = (performance.now() - t) / 1000;
  const row = (name: string, values: number[]) =>
    `| ${name} | ${ms(percentile(values, 50))} | ${ms(percentile(values, 95))} | ${ms(percentile(values, 99))} |`;
  o.log(
    `stream: ${samples.length} answers over ${conversations} concurrent conversations in ${seconds.toFixed(1)} s (${(samples.length / seconds).toFixed(1)} answers/s)`,
  );
  o.log('| measure | p50 | p95 | p99 |');
  o.log('|---|---|---|---|');
  o.log(
    row(
      'first byte (the `start` event)',
      samples.map((s) => s.firstByte),
    ),
  );
  o.log(
    row(
      'first text delta',
      samples.map((s) => s.firstText),
    ),
  );
  o.log(
    row(
      'whole answer',
      samples.map((s) => s.total),
    ),
  );
  const p99 = percentile(
    samples.map((s) => s.firstByte),
    99,
  );
  o.log(
    `target: first byte p99 < 50 ms at ${conversations} concurrent conversations: ${p99 < 50 ? 'met' : 'missed'} (${ms(p99)}, ratio ${(p99 / 50).toFixed(2)}x of the target)`,
  );
  return { samples, p99 };
}

export async function benchApproveAll(o: TurnBenchOptions) {
  const rounds = o.approveAllRounds ?? 5;
  const table = await call<{ id: string }>(o, 'POST', '/tables/', { name: 'Approve-all bench' });
  const latencies: number[] = [];
  for (let round = 0; round < rounds; round += 1) {
    const calls = [...Array(50)].map((_, i) => ({
      name: 'add_column',
      arguments: { table_id: table.id, column: { kind: 'input', name: `R${round} C${i}` } },
    }));
    o.setScript((r) =>
      r.messages.some((m) => m.role === 'tool') ? { content: 'Fifty cards.' } : { toolCalls: calls },
    );
    const conversation = await call<{ id: string }>(o, 'POST', '/assistant/conversations/', {});
    await timedAnswer(o, conversation.id, 'Add fifty columns');
    const listed = await call<{ actions: { id: string; status: string }[] }>(
      o,
      'GET',
      `/assistant/actions/?conversation_id=${conversation.id}&limit=100`,
    );
    if (listed.actions.length !== 50) throw new Error(`expected 50 cards, found ${listed.actions.length}`);
    const t = performance.now();
    const answer = await call<{ actions: { id: string; status: string }[] }>(
      o,
      'POST',
      '/assistant/actions/approve-all/',
      { proposal_ids: listed.actions.map((a) => a.id) },
    );
    latencies.push(performance.now() - t);
    const notApplied = answer.actions.filter((a) => a.status !== 'applied');
    if (notApplied.length > 0) throw new Error(`${notApplied.length} cards not applied: ${notApplied[0]!.status}`);
    const [counts] = await o.sql<{ columns: number; outcomes: number; decisions: number }[]>`
      select (select count(*)::int from table_columns where table_id = ${table.id} and name like ${`R${round} C%`}) as columns,
        (select count(*)::int from assistant_activity where conversation_id = ${conversation.id} and cause_key like 'outcome:%') as outcomes,
        (select count(*)::int from assistant_activity where conversation_id = ${conversation.id} and cause_key like 'decision:%') as decisions`;
    if (counts!.columns !== 50 || counts!.outcomes !== 50 || counts!.decisions !== 50)
      throw new Error(`not exactly once: ${JSON.stringify(counts)}`);
  }
  const p99 = percentile(latencies, 99);
  o.log(
    `approve-all of 50 cards, ${rounds} rounds: p50 ${ms(percentile(latencies, 50))}, p99 ${ms(p99)}; every card applied exactly once (50 columns, 50 decisions, 50 outcomes a round)`,
  );
  o.log(`target: p99 < 2 s: ${p99 < 2000 ? 'met' : 'missed'} (ratio ${(p99 / 2000).toFixed(2)}x of the target)`);
  return { latencies, p99 };
}

/** Starts the stack with a local model and runs both measures; bench/assistant.ts calls this beside the attachment pages. */
export async function runTurnBenchmarks(log: (line: string) => void) {
  const { mkdtempSync, chmodSync, rmSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const { createSql } = await import('../db/sql.js');
  const { createWorkspaceWithAdmin } = await import('../worker/provisioning.js');
  const { serveChatModel } = await import('../sim/chat-model-server.js');
  const { startBenchStack } = await import('./stack.js');
  let script: (request: ChatModelServerRequest) => ChatModelScript = () => ({ content: 'ok' });
  const model = await serveChatModel((r) => script(r));
  const dataDir = mkdtempSync(join(tmpdir(), 'bench-assistant-'));
  chmodSync(dataDir, 0o755);
  // The stack's worker and API read these when they start (startServe passes this process's environment).
  process.env.OPENAI_API_KEY = 'local';
  process.env.OPENAI_MODEL = 'local-model';
  process.env.OPENAI_BASE_URL = model.url;
  log(`starting the stack (DATA_DIR ${dataDir}); local model at ${model.url}`);
  const { serve } = await startBenchStack(dataDir, `${dataDir}.log`, log, { onFailure: () => model.close() });
  const sql = createSql(serve.databaseUrl, { max: 2 });
  try {
    const admin = await createWorkspaceWithAdmin(sql, { name: 'Bench assistant', plan: 'paid' });
    const options: TurnBenchOptions = {
      apiUrl: serve.apiUrl,
      apiKey: admin.api_key,
      sql,
      log,
      setScript: (s) => (script = s),
    };
    const stream = await benchStream(options);
    const approveAll = await benchApproveAll(options);
    return { stream, approveAll };
  } finally {
    await sql.end();
    await serve.stop();
    await model.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
