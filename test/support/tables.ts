/** A caller of the tables API with one credential, for the tables tests. */
import type { LightMyRequestResponse } from 'fastify';
import { grantWorkspaceCredits } from '../../worker/provisioning.js';
import { withKey, type TestStack, type TestWorkspace } from './test-stack.js';

export interface TablesClient {
  get: (url: string) => Promise<LightMyRequestResponse>;
  post: (url: string, payload?: object) => Promise<LightMyRequestResponse>;
  patch: (url: string, payload: object) => Promise<LightMyRequestResponse>;
  del: (url: string) => Promise<LightMyRequestResponse>;
  /** Creates a table and answers its body (201 expected). */
  table: (payload?: object) => Promise<{ id: string; [field: string]: unknown }>;
  /** Adds a column and answers its body (201 expected). */
  column: (tableId: string, payload: object) => Promise<{ id: string; [field: string]: unknown }>;
}

export function tablesClient(stack: TestStack, headers: Record<string, string>): TablesClient {
  const client: TablesClient = {
    get: (url) => stack.app.inject({ method: 'GET', url, headers }),
    post: (url, payload) => stack.app.inject({ method: 'POST', url, headers, ...(payload ? { payload } : {}) }),
    patch: (url, payload) => stack.app.inject({ method: 'PATCH', url, headers, payload }),
    del: (url) => stack.app.inject({ method: 'DELETE', url, headers }),
    async table(payload = {}) {
      const res = await client.post('/tables/', { name: 'A table', ...payload });
      if (res.statusCode !== 201) throw new Error(`create table: ${res.statusCode} ${res.body}`);
      return res.json();
    },
    async column(tableId, payload) {
      const res = await client.post(`/tables/${tableId}/columns/`, payload);
      if (res.statusCode !== 201) throw new Error(`create column: ${res.statusCode} ${res.body}`);
      return res.json();
    },
  };
  return client;
}

/** A paid workspace of its own with `credits` granted, so balances and ledgers are the test's alone. */
export async function workspaceWithCredits(stack: TestStack, credits: number): Promise<TestWorkspace> {
  const ws = await stack.createWorkspace('paid');
  if (credits > 0)
    await grantWorkspaceCredits(stack.sql, { workspaceId: ws.workspaceId, amount: credits, causeKey: 'test-grant' });
  return ws;
}

/** A workspace of its own with `credits` (see workspaceWithCredits), and a tables client of its API key. */
export async function workspaceWithClient(stack: TestStack, credits: number) {
  const ws = await workspaceWithCredits(stack, credits);
  return { ws, api: tablesClient(stack, withKey(ws.apiKey)) };
}
