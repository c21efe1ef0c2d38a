/** Sequence fixtures for the sequence tests: an audience table, a sender, a sequence, and a local SMTP server. */
import type { AddressInfo } from 'node:net';
import { simpleParser, type ParsedMail } from 'mailparser';
import { SMTPServer } from 'smtp-server';
import { expect, vi } from 'vitest';
import { tablesClient, type TablesClient } from './tables.js';
import { withKey, type TestStack, type TestWorkspace } from './test-stack.js';

export interface Audience {
  tableId: string;
  columns: { email: string; profile: string; first: string; last: string; company: string };
  mapping: Record<string, string>;
  addRow: (cells: {
    email?: string | null;
    profile?: string | null;
    first?: string;
    last?: string;
    company?: string;
  }) => Promise<string>;
}

export interface SequencesApi extends TablesClient {
  put: (url: string, payload: object) => Promise<import('fastify').LightMyRequestResponse>;
  audience: () => Promise<Audience>;
  sender: (name?: string) => Promise<string>;
  sequence: (body: object) => Promise<{ id: string; revision: number; [k: string]: unknown }>;
  launch: (sequenceId: string) => Promise<void>;
  enrol: (
    sequenceId: string,
    rowIds: string[],
  ) => Promise<{ row_id: string; status: string; reason: string | null; contact: { id: string } | null }[]>;
  contact: (
    sequenceId: string,
    contactId: string,
  ) => Promise<{ status: string; wait: { reason: string; until: string | null } | null; [k: string]: unknown }>;
  /** Polls a contact until `done` says so (workflows move on their own). */
  waitFor: (
    sequenceId: string,
    contactId: string,
    done: (c: Record<string, unknown>) => boolean,
    ms?: number,
  ) => Promise<Record<string, unknown>>;
}

export function sequencesApi(stack: TestStack, ws: TestWorkspace): SequencesApi {
  const base = tablesClient(stack, withKey(ws.apiKey));
  const api: SequencesApi = {
    ...base,
    put: (url, payload) => stack.app.inject({ method: 'PUT', url, headers: withKey(ws.apiKey), payload }),
    async audience() {
      const table = await base.table({ name: `Audience ${Math.random().toString(36).slice(2, 8)}` });
      const col = async (name: string) => (await base.column(table.id, { kind: 'input', name })).id;
      const columns = {
        email: await col('Email'),
        profile: await col('Profile'),
        first: await col('First name'),
        last: await col('Last name'),
        company: await col('Company'),
      };
      return {
        tableId: table.id,
        columns,
        mapping: {
          email_column_id: columns.email,
          profile_url_column_id: columns.profile,
          first_name_column_id: columns.first,
          last_name_column_id: columns.last,
          company_name_column_id: columns.company,
        },
        async addRow(cells) {
          const res = await base.post(`/tables/${table.id}/rows/`, {
            cells: {
              ...(cells.email ? { [columns.email]: cells.email } : {}),
              ...(cells.profile ? { [columns.profile]: cells.profile } : {}),
              ...(cells.first ? { [columns.first]: cells.first } : {}),
              ...(cells.last ? { [columns.last]: cells.last } : {}),
              ...(cells.company ? { [columns.company]: cells.company } : {}),
            },
          });
          if (res.statusCode !== 201) throw new Error(`add row: ${res.statusCode} ${res.body}`);
          return res.json().id;
        },
      };
    },
    async sender(name = `Sender ${Math.random().toString(36).slice(2, 8)}`) {
      const res = await base.post('/sender-profiles/', { name });
      if (res.statusCode !== 201) throw new Error(`sender: ${res.statusCode} ${res.body}`);
      return res.json().id;
    },
    async sequence(body) {
      const res = await base.post('/sequences/', { name: 'Outreach', ...body });
      if (res.statusCode !== 201) throw new Error(`sequence: ${res.statusCode} ${res.body}`);
      return res.json();
    },
    async launch(sequenceId) {
      const current = (await base.get(`/sequences/${sequenceId}/`)).json();
      const res = await base.post(`/sequences/${sequenceId}/launch/`, { expected_revision: current.revision });
      if (res.statusCode !== 200) throw new Error(`launch: ${res.statusCode} ${res.body}`);
    },
    async enrol(sequenceId, rowIds) {
      const res = await base.post(`/sequences/${sequenceId}/contacts/`, { row_ids: rowIds });
      if (res.statusCode !== 200) throw new Error(`enrol: ${res.statusCode} ${res.body}`);
      return res.json().results;
    },
    async contact(sequenceId, contactId) {
      return (await base.get(`/sequences/${sequenceId}/contacts/${contactId}/`)).json();
    },
    waitFor(sequenceId, contactId, done, ms = 30_000) {
      return vi.waitFor(
        async () => {
          const c = await api.contact(sequenceId, contactId);
          if (!done(c)) expect.fail(`contact never reached the expected state: ${JSON.stringify(c)}`);
          return c;
        },
        { timeout: ms, interval: 200 },
      );
    },
  };
  return api;
}

/** A real SMTP server on a free local port that keeps every message it is given. */
export async function startSmtpServer() {
  const received: ParsedMail[] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onData(stream, _session, callback) {
      simpleParser(stream)
        .then((mail) => {
          received.push(mail);
          callback();
        })
        .catch((error: Error) => callback(error));
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.server.address() as AddressInfo).port;
  return {
    url: `smtp://127.0.0.1:${port}`,
    received,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
