/**
 * The workspace verbs (2.11) a card runs, through the services that already do each thing: a
 * quote before the card is raised (checks, the rows it covers, the price), the column a card
 * prepares, the apply, and the end of work that outlives the apply (a column run). Every step
 * is safe to repeat for the same card: a retried activity never does a thing twice.
 */
import type { Client } from '@temporalio/client';
import type { Sql } from '../../db/sql.js';
import { type AppliedResult, type PreparedColumn, type Price, type Verb } from '../../domain/assistant/assistant.js';
import {
  isBuiltVerb,
  refusedVerbs,
  VerbInputSchemas,
  type BuiltVerb,
  type VerbInput,
} from '../../domain/assistant/verbs.js';
import { runRowsMax } from '../../domain/tables/enrichments.js';
import { ApiError, notFound } from '../../domain/shared/errors.js';
import type { EnrichmentProviders } from '../../integrations/enrichment-providers/index.js';
import { startCall, type ProposalRow } from '../../store/assistant/proposals.js';
import type { OperationDoor } from '../../domain/assistant/tool-cards.js';
import type { EndpointCaller } from '../../integrations/web/web-endpoint.js';
import { pageUrl } from '../../integrations/web/web-page.js';
import {
  columnMadeSince,
  rowsOfTable,
  runFundedBy,
  setPreparedColumn,
  tableRowIds,
} from '../../store/assistant/workspace.js';
import { enrolRows, findSequenceRow } from '../../store/sequences/sequences.js';
import { deleteColumn, createColumn } from '../../store/tables/columns.js';
import { findRunColumn } from '../../store/tables/column-runs.js';
import { requireTable } from '../../store/tables/tables.js';
import { startContacts } from '../sequences/sequence-client.js';
import { createColumnRun } from '../tables/column-runs.js';
import { createEnrichmentColumn } from '../tables/enrichments.js';

export interface VerbDeps {
  sql: Sql;
  providers: EnrichmentProviders;
  temporal: { client: Client; taskQueue: string };
  /** The API's own operations, for tool cards (read when used: the app binds it once built). */
  operations?: () => OperationDoor | null;
  /** Outside endpoints, for call_endpoint. */
  endpoints?: () => EndpointCaller;
}

/** What a card says before anyone decides: the checks passed, what it covers and what it may cost. */
export interface Quote {
  input: Record<string, unknown>;
  summary: string;
  lines: string[];
  price: Price;
  destructive: boolean;
  loss: string | null;
  sends: boolean;
  sourceColumnId: string | null;
  runsColumnId: string | null;
  /** add_column: the column is made right after the card is written. */
  prepares: boolean;
}

export type Applied =
  | { kind: 'done'; result: AppliedResult; charged: number; outcome: 'done' | 'already_pending' | 'sent' }
  | { kind: 'waiting' };

const refusal = (message: string) => new ApiError('unprocessable', message);

/** A refusal the model reads as the tool's error (bad input, an unknown id, a verb this build lacks). */
export class VerbRefused extends Error {
  override name = 'VerbRefused';
}

function parseInput<V extends BuiltVerb>(verb: V, raw: unknown): VerbInput<V> {
  const parsed = VerbInputSchemas[verb].safeParse(raw);
  if (!parsed.success) {
    const first = parsed.error.issues[0]!;
    throw new VerbRefused(`Invalid input for ${verb}: ${first.path.join('.') || 'input'}: ${first.message}`);
  }
  return parsed.data as VerbInput<V>;
}

async function enrichmentPrice(deps: VerbDeps, provider: string | null): Promise<number> {
  const info = provider ? deps.providers.get(provider)?.info : undefined;
  if (!info) throw new VerbRefused(`The provider ${provider ?? '(none)'} is not available in this environment.`);
  return info.price_credits;
}

function runPrice(perRow: number, rows: number): Price {
  const credits = perRow * rows;
  return {
    credits: credits > 0 ? credits : null,
    per: 'call',
    expected: credits > 0 ? credits : null,
    aside:
      credits > 0
        ? `${perRow} per row that gets a result, ${rows} row${rows === 1 ? '' : 's'}; an empty result costs nothing`
        : 'Costs no credits',
  };
}

const free: Price = { credits: null, per: 'call', expected: null, aside: 'Costs no credits' };

/** Checks a verb's input against the workspace and prices it. Refusals are VerbRefused (or not_found ApiErrors). */
export async function quoteVerb(deps: VerbDeps, workspaceId: string, verb: string, raw: unknown): Promise<Quote> {
  if (!isBuiltVerb(verb)) {
    const reason = refusedVerbs[verb as Verb];
    throw new VerbRefused(reason ?? `There is no workspace verb named ${verb}.`);
  }
  const { sql } = deps;
  const base = {
    destructive: false,
    loss: null,
    sends: false,
    sourceColumnId: null,
    runsColumnId: null,
    prepares: false,
  };
  switch (verb) {
    case 'add_column': {
      const input = parseInput('add_column', raw);
      const table = await requireTable(sql, workspaceId, input.table_id);
      if (input.column.kind !== 'enrichment') {
        return {
          ...base,
          input,
          summary: `Add the ${input.column.kind} column "${input.column.name}"`,
          lines: [`Table ${input.table_id}`],
          price: free,
          prepares: true,
        };
      }
      const perRow = await enrichmentPrice(deps, input.column.provider);
      const rowIds = await tableRowIds(sql, table.id, runRowsMax);
      const more = table.row_count > rowIds.length ? ` (the first ${rowIds.length} of ${table.row_count})` : '';
      return {
        ...base,
        input: { ...input, row_ids: rowIds },
        summary: `Add the enrichment column "${input.column.name}" and run it on ${rowIds.length} rows${more}`,
        lines: [`Provider ${input.column.provider}`, `Table ${input.table_id}`],
        price: runPrice(perRow, rowIds.length),
        prepares: true,
      };
    }
    case 'run_column':
    case 'enrich_rows': {
      const input = verb === 'run_column' ? parseInput('run_column', raw) : parseInput('enrich_rows', raw);
      const table = await requireTable(sql, workspaceId, input.table_id);
      const column = await findRunColumn(sql, table.id, input.column_id);
      if (!column) throw notFound('Column');
      if (column.kind !== 'enrichment' || column.parent_column_id !== null)
        throw new VerbRefused(`"${column.name}" is not an enrichment column; only enrichment columns run.`);
      const perRow = await enrichmentPrice(deps, column.provider);
      const rowIds =
        'row_ids' in input
          ? await rowsOfTable(sql, table.id, input.row_ids as string[])
          : await tableRowIds(sql, table.id, runRowsMax);
      if (rowIds.length === 0) throw new VerbRefused('None of those rows is in the table.');
      return {
        ...base,
        input: { ...input, row_ids: rowIds },
        summary: `Run "${column.name}" on ${rowIds.length} row${rowIds.length === 1 ? '' : 's'}`,
        lines: [`Provider ${column.provider}`],
        price: runPrice(perRow, rowIds.length),
        sourceColumnId: input.column_id,
        runsColumnId: input.column_id,
      };
    }
    case 'call_endpoint': {
      const input = parseInput('call_endpoint', raw);
      let url: URL;
      try {
        url = pageUrl(input.url);
      } catch (error) {
        throw new VerbRefused((error as Error).message);
      }
      const body = JSON.stringify(input.body);
      return {
        ...base,
        input: { ...input, url: url.href },
        summary: `Send a ${input.method} to ${url.host}`,
        lines: [url.href, body.length > 500 ? `${body.slice(0, 500)}…` : body],
        price: free,
      };
    }
    case 'start_search':
    case 'create_table_from_search': {
      const input =
        verb === 'start_search' ? parseInput('start_search', raw) : parseInput('create_table_from_search', raw);
      const into =
        'table_id' in input
          ? (await requireTable(sql, workspaceId, input.table_id), `into table ${input.table_id}`)
          : `into a new table${input.table_name ? ` "${input.table_name}"` : ''}`;
      return {
        ...base,
        input,
        summary: `Search for up to ${input.max_results} ${input.kind} ${into}`,
        lines: [
          `Query ${JSON.stringify(input.query)}`,
          'Results the table already has (same profile URL, email or domain) are skipped',
        ],
        price: {
          credits: null,
          per: 'call',
          expected: null,
          aside:
            'Each new row costs the search provider’s price (GET /lead-searches/providers/), charged as it lands; duplicates cost nothing',
        },
      };
    }
    case 'add_contacts_to_sequence': {
      const input = parseInput('add_contacts_to_sequence', raw);
      const sequence = await findSequenceRow(sql, workspaceId, input.sequence_id);
      if (!sequence) throw notFound('Sequence');
      const n = input.row_ids.length;
      return {
        ...base,
        input,
        summary: `Enrol ${n} row${n === 1 ? '' : 's'} in the sequence "${(sequence as { name: string }).name}"`,
        lines: [
          'Each row is checked on its own: do-not-contact, cooldown and other sequences still apply',
          'Its steps are priced when they are queued',
        ],
        price: free,
      };
    }
  }
}

/** Makes the column an add_column card proposes, once: a retry finds the one it made before. */
export async function prepareColumn(deps: VerbDeps, card: ProposalRow): Promise<PreparedColumn> {
  if (card.prepared_column) return card.prepared_column;
  const input = card.input as VerbInput<'add_column'>;
  const again = await columnMadeSince(deps.sql, input.table_id, input.column.name, card.proposed_at);
  const column = again
    ? { id: again.id, kind: again.kind }
    : input.column.kind === 'enrichment'
      ? await createEnrichmentColumn(deps.sql, card.workspace_id, input.table_id, input.column, deps.providers)
      : await createColumn(deps.sql, card.workspace_id, input.table_id, input.column);
  const prepared: PreparedColumn = {
    table_id: input.table_id,
    column_id: column.id,
    name: input.column.name,
    kind: column.kind,
  };
  await setPreparedColumn(deps.sql, card.id, prepared);
  return prepared;
}

/** A dismissed card takes back what it prepared. */
export async function withdrawCard(deps: VerbDeps, card: ProposalRow): Promise<void> {
  if (!card.prepared_column) return;
  await deleteColumn(deps.sql, card.workspace_id, card.prepared_column.table_id, card.prepared_column.column_id).catch(
    (error: unknown) => {
      if (!(error instanceof ApiError && error.code === 'not_found')) throw error;
    },
  );
}

/** Runs an enrichment column on the card's rows, paid ahead by the card's hold; the run already started by this card is found again. */
async function startFundedRun(
  deps: VerbDeps,
  card: ProposalRow,
  tableId: string,
  columnId: string,
  holdId: string | null,
): Promise<Applied> {
  const rowIds = (card.input as { row_ids: string[] }).row_ids;
  if (holdId && (await runFundedBy(deps.sql, holdId))) return { kind: 'waiting' };
  try {
    await createColumnRun(
      deps.sql,
      deps.temporal,
      deps.providers,
      { workspaceId: card.workspace_id, tableId, columnId },
      { row_ids: rowIds },
      holdId ? { fundingHoldId: holdId } : {},
    );
  } catch (error) {
    if (error instanceof ApiError && error.code === 'conflict' && /already going/.test(error.detail)) {
      const result: AppliedResult = {
        content: error.detail,
        link: null,
        link_label: null,
        entity_id: columnId,
        opens: 'column',
        made: 0,
      };
      return { kind: 'done', result, charged: 0, outcome: 'already_pending' };
    }
    throw error;
  }
  return { kind: 'waiting' };
}

/** What a tool card keeps as its input: the operation and the request it stands for. */
export interface ToolCardInput {
  operation: string;
  request: { method: string; url: string; body?: unknown };
}

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Calls the operation a tool card stands for, as the member the card acts for. A POST is made at
 * most once (the card notes the call's start first); the other methods are idempotent and a retry
 * repeats them harmlessly. A refusal by the API (4xx) fails the card with its detail.
 */
async function applyToolCard(deps: VerbDeps, card: ProposalRow): Promise<Applied> {
  const door = deps.operations?.();
  if (!door) throw new VerbRefused('The API cannot be called from this process.');
  if (!card.member_id) throw new VerbRefused('This card has no member to act for.');
  const { request } = card.input as unknown as ToolCardInput;
  if (request.method === 'POST' && !(await startCall(deps.sql, card.id))) {
    throw new VerbRefused(
      'The call was interrupted and may or may not have happened: check, and ask again if it did not.',
    );
  }
  const answer = await door.call(card.member_id, request);
  const detail = (answer.body as { detail?: unknown } | null)?.detail;
  if (answer.status >= 500 || answer.status === 429) {
    if (request.method === 'POST')
      throw new VerbRefused(
        `The API answered ${answer.status}: ${typeof detail === 'string' ? detail : 'try again later'}.`,
      );
    throw new Error(`The API answered ${answer.status}.`);
  }
  if (answer.status >= 400)
    throw new VerbRefused(typeof detail === 'string' ? detail : `The API answered ${answer.status}.`);
  const id = (answer.body as { id?: unknown } | null)?.id;
  return {
    kind: 'done',
    charged: 0,
    outcome: 'done',
    result: {
      content: `${card.verb_label}: done (${answer.status}).`,
      link: request.method === 'DELETE' ? null : request.url,
      link_label: request.method === 'DELETE' ? null : 'Open',
      entity_id: typeof id === 'string' && uuidPattern.test(id) ? id : null,
      opens: 'none',
      made: 1,
    },
  };
}

/** Starts the card's lead search through the API's own operation (POST /lead-searches/), at most once, as the member the card acts for. */
async function applySearchCard(deps: VerbDeps, card: ProposalRow): Promise<Applied> {
  const door = deps.operations?.();
  if (!door) throw new VerbRefused('The API cannot be called from this process.');
  if (!card.member_id) throw new VerbRefused('This card has no member to act for.');
  if (!(await startCall(deps.sql, card.id)))
    throw new VerbRefused(
      'Starting the search was interrupted and may or may not have happened: check the lead searches, and ask again if it did not.',
    );
  const answer = await door.call(card.member_id, { method: 'POST', url: '/lead-searches/', body: card.input });
  const body = answer.body as { id?: string; table_id?: string; detail?: string } | null;
  if (answer.status !== 202 || !body?.id || !body.table_id)
    throw new VerbRefused(body?.detail ?? `The API answered ${answer.status}.`);
  return {
    kind: 'done',
    charged: 0,
    outcome: 'done',
    result: {
      content: `Started the search; its results land in the table as they come (follow it at /lead-searches/${body.id}/).`,
      link: `/tables/${body.table_id}/`,
      link_label: 'Open the table',
      entity_id: body.table_id,
      opens: 'table',
      made: card.verb === 'create_table_from_search' ? 1 : 0,
    },
  };
}

/** Does what the card says. `holdId` is the card's hold when it has a price. */
export async function applyVerb(deps: VerbDeps, card: ProposalRow, holdId: string | null): Promise<Applied> {
  if (card.kind === 'tool') return applyToolCard(deps, card);
  switch (card.verb as BuiltVerb) {
    case 'add_column': {
      const prepared = await prepareColumn(deps, card);
      if (prepared.kind === 'enrichment')
        return startFundedRun(deps, card, prepared.table_id, prepared.column_id, holdId);
      return {
        kind: 'done',
        charged: 0,
        outcome: 'done',
        result: {
          content: `Added the column "${prepared.name}".`,
          link: `/tables/${prepared.table_id}/columns/${prepared.column_id}/`,
          link_label: 'Open the column',
          entity_id: prepared.column_id,
          opens: 'column',
          made: 1,
        },
      };
    }
    case 'run_column':
    case 'enrich_rows': {
      const input = card.input as { table_id: string; column_id: string };
      return startFundedRun(deps, card, input.table_id, input.column_id, holdId);
    }
    case 'add_contacts_to_sequence': {
      const input = card.input as VerbInput<'add_contacts_to_sequence'>;
      const { results } = await enrolRows(
        deps.sql,
        card.workspace_id,
        input.sequence_id,
        input.row_ids,
        input.sender_profile_id,
      );
      const live = results.flatMap((r) =>
        r.contact && ['active', 'paused', 'failed'].includes(r.contact.status)
          ? [{ ...r.contact, workspace_id: card.workspace_id }]
          : [],
      );
      await startContacts(deps.temporal.client, deps.temporal.taskQueue, [
        ...new Map(live.map((c) => [c.id, c])).values(),
      ]);
      const enrolled = results.filter((r) => r.status === 'enrolled').length;
      const already = results.filter((r) => r.status === 'already_enrolled').length;
      const refused = results.length - enrolled - already;
      return {
        kind: 'done',
        charged: 0,
        outcome: enrolled === 0 && already > 0 && refused === 0 ? 'already_pending' : 'done',
        result: {
          content: `Enrolled ${enrolled} contact${enrolled === 1 ? '' : 's'}${already ? `, ${already} already enrolled` : ''}${refused ? `, ${refused} refused (see the sequence's contacts)` : ''}.`,
          link: `/sequences/${input.sequence_id}/contacts/`,
          link_label: 'Open the contacts',
          entity_id: input.sequence_id,
          opens: 'sequence',
          made: enrolled,
        },
      };
    }
    case 'start_search':
    case 'create_table_from_search':
      return applySearchCard(deps, card);
    case 'call_endpoint': {
      const input = card.input as VerbInput<'call_endpoint'>;
      const caller = deps.endpoints?.();
      if (!caller) throw new VerbRefused('Outside endpoints cannot be called from this process.');
      // Sent at most once: a retry after a crash mid-call cannot know whether the endpoint got it.
      if (!(await startCall(deps.sql, card.id)))
        throw new VerbRefused(
          'The call was interrupted and may or may not have reached the endpoint: check, and ask again if it did not.',
        );
      let answer;
      try {
        answer = await caller.send(input.url, input.method, input.body);
      } catch (error) {
        throw new VerbRefused((error as Error).message);
      }
      const host = new URL(input.url).host;
      if (answer.status < 200 || answer.status >= 300)
        throw new VerbRefused(`${host} answered ${answer.status}: ${answer.text.slice(0, 300)}`);
      return {
        kind: 'done',
        charged: 0,
        outcome: 'sent',
        result: {
          content: `${host} answered ${answer.status}.`,
          link: null,
          link_label: null,
          entity_id: null,
          opens: 'none',
          made: 1,
        },
      };
    }
    default:
      throw refusal(refusedVerbs[card.verb as Verb] ?? `There is no workspace verb named ${card.verb}.`);
  }
}

/** The end of a card's column run, once it has ended: what it made and what it cost. */
export async function fundedRunOutcome(deps: VerbDeps, card: ProposalRow) {
  if (!card.hold_id) return null;
  const run = await runFundedBy(deps.sql, card.hold_id);
  if (!run || !['completed', 'cancelled', 'failed'].includes(run.status)) return null;
  const result: AppliedResult = {
    content: `The run ${run.status}: ${run.rows_done} row${run.rows_done === 1 ? '' : 's'} got a result for ${run.credits_charged} credits.`,
    link: `/tables/${run.table_id}/columns/${run.column_id}/runs/${run.id}/`,
    link_label: 'Open the run',
    entity_id: run.id,
    opens: 'run',
    made: run.rows_done,
  };
  return {
    status: run.status === 'completed' ? ('applied' as const) : ('failed' as const),
    result,
    charged: run.credits_charged,
    error: run.status === 'completed' ? null : (run.error ?? `The run was ${run.status}.`),
  };
}
