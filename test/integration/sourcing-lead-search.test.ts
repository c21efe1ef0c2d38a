/**
 * Lead searches against the local Apollo twin (sim/lead-search-server.ts): providers listed only
 * when configured, paging into a new table, dedupe on a repeated search, credits per landed row
 * only, a 429 waited out, credits running out, cancel, and the request's bounds.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLeadSearchProviders } from '../../integrations/lead-search/index.js';
import { openAiChatModel } from '../../integrations/chat-model.js';
import {
  serveChatModel,
  type ChatModelScript,
  type ChatModelServer,
  type ChatModelServerRequest,
} from '../../sim/chat-model-server.js';
import { readStream } from '../support/assistant.js';
import { serveLeadSearchTwin, twinPeople } from '../../sim/lead-search-server.js';
import { grantWorkspaceCredits } from '../../worker/provisioning.js';
import { leadSearchProgressQuery } from '../../workflows/sourcing/lead-search.contract.js';
import { useTestStack, withKey } from '../support/test-stack.js';

const { stack, paid, free } = useTestStack();
let twin: Awaited<ReturnType<typeof serveLeadSearchTwin>>;
let model: ChatModelServer;
let script: (request: ChatModelServerRequest) => ChatModelScript = () => ({ content: 'Hello.' });
let limited = false;
let alwaysLimited = false;

beforeAll(async () => {
  twin = await serveLeadSearchTwin({
    apiKey: 'twin-key',
    people: twinPeople(30),
    rateLimit: (n) => alwaysLimited || (limited && n % 3 === 2),
    retryAfter: 1,
  });
  model = await serveChatModel((request) => script(request));
  stack.integrations.chatModel = openAiChatModel({ apiKey: 'local', model: 'local-model', baseUrl: model.url });
});
afterAll(async () => {
  await twin?.close();
  await model?.close();
});

const configure = (pageSize = 4, pricePerRow = 2) => {
  stack.integrations.sourcing.leadSearch = createLeadSearchProviders({
    apollo: { apiKey: 'twin-key', baseUrl: twin.url, pricePerRow, pageSize },
  });
};

async function balance(workspaceId: string) {
  const [row] = await stack.sql<
    { available: number }[]
  >`select available::int from credit_balances where workspace_id = ${workspaceId}`;
  return row?.available ?? 0;
}

async function start(apiKey: string, body: Record<string, unknown>) {
  return stack.app.inject({ method: 'POST', url: '/lead-searches/', headers: withKey(apiKey), payload: body });
}

async function finished(apiKey: string, id: string) {
  await stack.client.workflow.getHandle(`lead-search/${id}`).result();
  return (await stack.app.inject({ method: 'GET', url: `/lead-searches/${id}/`, headers: withKey(apiKey) })).json();
}

describe('lead search', () => {
  it('lists a provider only when it is configured, and refuses a search without one', async () => {
    stack.integrations.sourcing.leadSearch = createLeadSearchProviders({ apollo: null });
    const none = await stack.app.inject({
      method: 'GET',
      url: '/lead-searches/providers/',
      headers: withKey(paid.apiKey),
    });
    expect(none.json()).toEqual({ providers: [] });
    const refused = await start(paid.apiKey, { query: { titles: ['sales'] } });
    expect(refused.statusCode, refused.body).toBe(422);
    expect(refused.json().detail).toMatch(/APOLLO_API_KEY/);
    configure();
    const listed = await stack.app.inject({
      method: 'GET',
      url: '/lead-searches/providers/',
      headers: withKey(paid.apiKey),
    });
    expect(listed.json().providers).toEqual([
      expect.objectContaining({ key: 'apollo', kinds: ['people', 'companies'], price_per_row: 2 }),
    ]);
  });

  it('pages into a new table, waits out a 429, charges per landed row, and a repeat lands nothing and costs nothing', async () => {
    configure(4, 2);
    limited = true;
    const before = await balance(paid.workspaceId);
    const res = await start(paid.apiKey, { query: { titles: ['head of sales'] }, max_results: 100 });
    expect(res.statusCode).toBe(202);
    const created = res.json();
    expect(created).toMatchObject({
      status: 'pending',
      provider: 'apollo',
      kind: 'people',
      workflow_id: `lead-search/${created.id}`,
    });
    const done = await finished(paid.apiKey, created.id);
    limited = false;
    // 15 of the 30 are heads of sales: four pages of 4, the last short.
    expect(done).toMatchObject({
      status: 'succeeded',
      rows_landed: 15,
      duplicates: 0,
      credits_charged: 30,
      total_available: 15,
      pages_read: 4,
      error: null,
    });
    expect(done.rate_limited).toBeGreaterThanOrEqual(1);
    expect(before - (await balance(paid.workspaceId))).toBe(30);
    const progress = await stack.client.workflow.getHandle(`lead-search/${created.id}`).query(leadSearchProgressQuery);
    expect(progress).toMatchObject({ status: 'succeeded', rows_landed: 15, credits_charged: 30 });

    const rows = await stack.app.inject({
      method: 'GET',
      url: `/tables/${done.table_id}/rows/?limit=100`,
      headers: withKey(paid.apiKey),
    });
    expect(rows.statusCode).toBe(200);
    const columns = await stack.app.inject({
      method: 'GET',
      url: `/tables/${done.table_id}/columns/`,
      headers: withKey(paid.apiKey),
    });
    const names = (columns.json().columns ?? columns.json()).map((c: { name: string }) => c.name);
    expect(names).toEqual([
      'Name',
      'Title',
      'Seniority',
      'Company',
      'Company domain',
      'Email',
      'Profile URL',
      'Location',
    ]);
    const [{ n }] = (await stack.sql<
      { n: number }[]
    >`select count(*)::int as n from table_rows where table_id = ${done.table_id}`) as unknown as [{ n: number }];
    expect(n).toBe(15);

    // The same search into the same table: every result is a duplicate, nothing is charged.
    const again = await finished(
      paid.apiKey,
      (
        await start(paid.apiKey, { query: { titles: ['head of sales'] }, max_results: 100, table_id: done.table_id })
      ).json().id,
    );
    expect(again).toMatchObject({ status: 'succeeded', rows_landed: 0, duplicates: 15, credits_charged: 0 });
    expect(before - (await balance(paid.workspaceId))).toBe(30);
    const [{ m }] = (await stack.sql<
      { m: number }[]
    >`select count(*)::int as m from table_rows where table_id = ${done.table_id}`) as unknown as [{ m: number }];
    expect(m).toBe(15);
  });

  it('stops at max_results, and ends failed with the rows it could pay for when credits run out', async () => {
    configure(4, 2);
    const capped = await finished(
      paid.apiKey,
      (await start(paid.apiKey, { query: { titles: ['vp'] }, max_results: 6 })).json().id,
    );
    expect(capped).toMatchObject({ status: 'succeeded', rows_landed: 6, results_seen: 6, credits_charged: 12 });

    const poor = await stack.createWorkspace('paid');
    await grantWorkspaceCredits(stack.sql, { workspaceId: poor.workspaceId, amount: 5, causeKey: 'poor' });
    const broke = await finished(
      poor.apiKey,
      (await start(poor.apiKey, { query: { titles: ['vp'] }, max_results: 100 })).json().id,
    );
    expect(broke).toMatchObject({ status: 'failed', rows_landed: 2, credits_charged: 4 });
    expect(broke.error).toMatch(/ran out of credits after 2 rows/);
    expect(await balance(poor.workspaceId)).toBe(1);
  });

  it('cancels a search waiting on the rate limit; cancelling again is 409', async () => {
    configure(4, 2);
    alwaysLimited = true;
    try {
      const other = await stack.createWorkspace('paid');
      const res = await start(other.apiKey, { query: { titles: ['vp'] }, max_results: 100 });
      expect(res.statusCode, res.body).toBe(202);
      const created = res.json();
      const handle = stack.client.workflow.getHandle(`lead-search/${created.id}`);
      await expect
        .poll(async () => (await handle.query(leadSearchProgressQuery)).rate_limited, { timeout: 10_000 })
        .toBeGreaterThanOrEqual(1);
      const cancelled = await stack.app.inject({
        method: 'POST',
        url: `/lead-searches/${created.id}/cancel/`,
        headers: withKey(other.apiKey),
      });
      expect(cancelled.statusCode).toBe(200);
      expect(cancelled.json()).toMatchObject({ status: 'cancelled', rows_landed: 0 });
      expect(await handle.result()).toEqual({ status: 'cancelled' });
      const again = await stack.app.inject({
        method: 'POST',
        url: `/lead-searches/${created.id}/cancel/`,
        headers: withKey(other.apiKey),
      });
      expect(again.statusCode).toBe(409);
    } finally {
      alwaysLimited = false;
    }
  });

  it('refuses bounds past their limits and lists searches', async () => {
    configure();
    const bad = [
      { query: {}, max_results: 0 },
      { query: {}, max_results: 10_001 },
      { query: { titles: Array.from({ length: 26 }, (_, i) => `t${i}`) } },
      { query: { company_domains: ['not a domain'] } },
      { query: { head_count_ranges: ['50,10'] } },
      { query: {}, table_id: '00000000-0000-4000-8000-000000000000', table_name: 'x' },
    ];
    for (const body of bad)
      expect((await start(paid.apiKey, body)).statusCode, JSON.stringify(body).slice(0, 80)).toBe(422);
    const unknownTable = await start(paid.apiKey, { query: {}, table_id: '00000000-0000-4000-8000-000000000000' });
    expect(unknownTable.statusCode).toBe(404);
    const atBounds = await start(paid.apiKey, {
      query: { titles: Array.from({ length: 25 }, (_, i) => `nobody${i}`) },
      max_results: 10_000,
    });
    expect(atBounds.statusCode).toBe(202);
    expect(await finished(paid.apiKey, atBounds.json().id)).toMatchObject({ status: 'succeeded', rows_landed: 0 });
    const list = await stack.app.inject({
      method: 'GET',
      url: '/lead-searches/?limit=2',
      headers: withKey(paid.apiKey),
    });
    expect(list.json().searches).toHaveLength(2);
    expect(list.json().total_count).toBeGreaterThanOrEqual(4);
    const other = await stack.app.inject({
      method: 'GET',
      url: `/lead-searches/${atBounds.json().id}/`,
      headers: withKey(free.apiKey),
    });
    expect(other.statusCode).toBe(404);
  });
});

describe("the assistant's search verbs", () => {
  it('create_table_from_search raises a card whose approval starts the search into a new table; start_search lands in a table and finds duplicates', async () => {
    configure(4, 1);
    const post = (url: string, payload: object) =>
      stack.app.inject({ method: 'POST', url, headers: withKey(paid.apiKey), payload });
    const conversation = (await post('/assistant/conversations/', {})).json().id as string;
    const call = (name: string, args: unknown) => {
      script = (request) =>
        request.messages.some((m) => m.role === 'tool')
          ? { content: 'Proposed.' }
          : { toolCalls: [{ name, arguments: args }] };
    };
    const proposeAndApprove = async (text: string) => {
      const res = await post(`/assistant/conversations/${conversation}/messages/`, { content: text });
      expect(res.statusCode, res.body).toBe(200);
      const proposal = readStream(res.body).parts.find((p) => p.type === 'data-proposal')!.data as {
        id: string;
        summary: string;
        price_credits: number | null;
        price_aside: string;
      };
      expect(proposal.price_credits).toBeNull();
      expect(proposal.price_aside).toMatch(/charged as it lands/);
      const approved = await post(`/assistant/actions/${proposal.id}/approve/`, {});
      expect(approved.statusCode, approved.body).toBe(200);
      let card = approved.json();
      for (let i = 0; i < 50 && card.status === 'applying'; i += 1) {
        await new Promise((r) => setTimeout(r, 100));
        card = (
          await stack.app.inject({
            method: 'GET',
            url: `/assistant/actions/${proposal.id}/`,
            headers: withKey(paid.apiKey),
          })
        ).json();
      }
      return { proposal, card };
    };

    call('create_table_from_search', { table_name: 'Assistant VPs', query: { titles: ['vp'] }, max_results: 5 });
    const made = await proposeAndApprove('Make a table of VPs');
    expect(made.proposal.summary).toMatch(/up to 5 people into a new table "Assistant VPs"/);
    expect(made.card).toMatchObject({ status: 'applied', applied_result: { opens: 'table', made: 1 } });
    const tableId = made.card.applied_result.entity_id as string;
    const [search] = (await stack.sql<
      { id: string }[]
    >`select id from lead_searches where table_id = ${tableId}`) as unknown as [{ id: string }];
    expect(await finished(paid.apiKey, search.id)).toMatchObject({
      status: 'succeeded',
      rows_landed: 5,
      credits_charged: 5,
    });

    call('start_search', { table_id: tableId, query: { titles: ['vp'] }, max_results: 8 });
    const more = await proposeAndApprove('Find more VPs for that table');
    expect(more.card).toMatchObject({ status: 'applied', applied_result: { entity_id: tableId } });
    const searches = await stack.sql<
      { id: string }[]
    >`select id from lead_searches where table_id = ${tableId} order by created_at desc`;
    expect(await finished(paid.apiKey, searches[0]!.id)).toMatchObject({
      status: 'succeeded',
      rows_landed: 3,
      duplicates: 5,
    });
  });
});
