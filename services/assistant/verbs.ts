/**
 * The workspace verbs a card runs (`AssistantVerb`, the `verbs` of domain/assistant/assistant.ts),
 * one entry each in `verbRegistry`: its label, whether it is a send, its quote before the card is
 * raised (checks, the rows it covers, the price) and its apply, through the services that already
 * do each thing. `quoteVerb` and `applyVerb` read the entry. Beside them: the column a card
 * prepares, taking it back, and the end of work that outlives the apply (a column run). Every step
 * is safe to repeat for the same card: a retried activity never does a thing twice
 * (docs/decisions/034-assistant-turns-and-cards.md).
 */
import {
  verbLabels,
  type AppliedResult,
  type PreparedColumn,
  type Price,
  type Verb,
} from '../../domain/assistant/assistant.js';
import { refusedVerbs, VerbInputSchemas, type BuiltVerb, type VerbInput } from '../../domain/assistant/verbs.js';
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
import type { ServiceDeps } from '../deps.js';
import { startContacts } from '../sequences/sequence-client.js';
import { createColumnRun } from '../tables/column-runs.js';
import { createEnrichmentColumn } from '../tables/enrichments.js';

/**
 * The database and Temporal of `ServiceDeps`, and the three integrations verbs call, each as the
 * caller holds it: the enrichment providers (which the worker's bootstrap and tests may override),
 * and the operation door and endpoint caller read when used (the app binds the door once built).
 */
export interface VerbDeps extends Pick<ServiceDeps, 'sql' | 'temporal'> {
  providers: EnrichmentProviders;
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

/** What a verb's own quote says; `quoteVerb` fills in the rest (not destructive, no column, its entry's `sends`). */
type VerbQuote = Pick<Quote, 'input' | 'summary' | 'lines' | 'price'> &
  Partial<Pick<Quote, 'sourceColumnId' | 'runsColumnId' | 'prepares'>>;

/** One workspace verb: everything the service knows of it. */
export interface VerbEntry {
  /** The card's `verb_label`. */
  label: string;
  /** A send reaches people or systems outside the workspace: it always asks and is never granted. */
  sends: boolean;
  /** Checks the input against the workspace and prices it. Refusals are VerbRefused (or not_found ApiErrors). */
  quote(deps: VerbDeps, workspaceId: string, raw: unknown): Promise<VerbQuote>;
  /** Does what the card says, safe to repeat for the card. `holdId` is the card's hold when it has a price. */
  apply(deps: VerbDeps, card: ProposalRow, holdId: string | null): Promise<Applied>;
}

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

/** Makes the column an add_column card proposes, once: a retry finds the one it made before. */
export async function prepareColumn(
  deps: Pick<VerbDeps, 'sql' | 'providers'>,
  card: ProposalRow,
): Promise<PreparedColumn> {
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
export async function withdrawCard(deps: Pick<ServiceDeps, 'sql'>, card: ProposalRow): Promise<void> {
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

/** The end of a card's column run, once it has ended: what it made and what it cost. */
export async function fundedRunOutcome(deps: Pick<ServiceDeps, 'sql'>, card: ProposalRow) {
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

// ---- The verbs, one entry each ----

/** add_column: the column is prepared as the card is raised (found again here, or made if that failed); approving runs an enrichment column. */
const addColumn: VerbEntry = {
  label: verbLabels.add_column,
  sends: false,
  async quote(deps, workspaceId, raw) {
    const input = parseInput('add_column', raw);
    const table = await requireTable(deps.sql, workspaceId, input.table_id);
    if (input.column.kind !== 'enrichment') {
      return {
        input,
        summary: `Add the ${input.column.kind} column "${input.column.name}"`,
        lines: [`Table ${input.table_id}`],
        price: free,
        prepares: true,
      };
    }
    const perRow = await enrichmentPrice(deps, input.column.provider);
    const rowIds = await tableRowIds(deps.sql, table.id, runRowsMax);
    const more = table.row_count > rowIds.length ? ` (the first ${rowIds.length} of ${table.row_count})` : '';
    return {
      input: { ...input, row_ids: rowIds },
      summary: `Add the enrichment column "${input.column.name}" and run it on ${rowIds.length} rows${more}`,
      lines: [`Provider ${input.column.provider}`, `Table ${input.table_id}`],
      price: runPrice(perRow, rowIds.length),
      prepares: true,
    };
  },
  async apply(deps, card, holdId) {
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
  },
};

/** run_column (every row of the table, up to the run's limit) and enrich_rows (the rows named): an enrichment column's run, paid by the card. */
function columnRunVerb(verb: 'run_column' | 'enrich_rows'): VerbEntry {
  return {
    label: verbLabels[verb],
    sends: false,
    async quote(deps, workspaceId, raw) {
      const input = parseInput(verb, raw);
      const table = await requireTable(deps.sql, workspaceId, input.table_id);
      const column = await findRunColumn(deps.sql, table.id, input.column_id);
      if (!column) throw notFound('Column');
      if (column.kind !== 'enrichment' || column.parent_column_id !== null)
        throw new VerbRefused(`"${column.name}" is not an enrichment column; only enrichment columns run.`);
      const perRow = await enrichmentPrice(deps, column.provider);
      const rowIds =
        'row_ids' in input
          ? await rowsOfTable(deps.sql, table.id, input.row_ids)
          : await tableRowIds(deps.sql, table.id, runRowsMax);
      if (rowIds.length === 0) throw new VerbRefused('None of those rows is in the table.');
      return {
        input: { ...input, row_ids: rowIds },
        summary: `Run "${column.name}" on ${rowIds.length} row${rowIds.length === 1 ? '' : 's'}`,
        lines: [`Provider ${column.provider}`],
        price: runPrice(perRow, rowIds.length),
        sourceColumnId: input.column_id,
        runsColumnId: input.column_id,
      };
    },
    async apply(deps, card, holdId) {
      const input = card.input as { table_id: string; column_id: string };
      return startFundedRun(deps, card, input.table_id, input.column_id, holdId);
    },
  };
}

/** add_contacts_to_sequence: each row enrolled on its own (stops and cooldowns still apply), its contacts' workflows started. */
const addContactsToSequence: VerbEntry = {
  label: verbLabels.add_contacts_to_sequence,
  sends: false,
  async quote(deps, workspaceId, raw) {
    const input = parseInput('add_contacts_to_sequence', raw);
    const sequence = await findSequenceRow(deps.sql, workspaceId, input.sequence_id);
    if (!sequence) throw notFound('Sequence');
    const n = input.row_ids.length;
    return {
      input,
      summary: `Enrol ${n} row${n === 1 ? '' : 's'} in the sequence "${(sequence as { name: string }).name}"`,
      lines: [
        'Each row is checked on its own: do-not-contact, cooldown and other sequences still apply',
        'Its steps are priced when they are queued',
      ],
      price: free,
    };
  },
  async apply(deps, card) {
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
    await startContacts(deps.temporal, [...new Map(live.map((c) => [c.id, c])).values()]);
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
  },
};

/** start_search (into a table the workspace has) and create_table_from_search (into a new one): a lead search, each new row charged as it lands. */
function searchVerb(verb: 'start_search' | 'create_table_from_search'): VerbEntry {
  return {
    label: verbLabels[verb],
    sends: false,
    async quote(deps, workspaceId, raw) {
      const input = parseInput(verb, raw);
      const into =
        'table_id' in input
          ? (await requireTable(deps.sql, workspaceId, input.table_id), `into table ${input.table_id}`)
          : `into a new table${input.table_name ? ` "${input.table_name}"` : ''}`;
      return {
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
    },
    apply: (deps, card) => applySearchCard(deps, card),
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

/**
 * call_endpoint: JSON to an outside endpoint, sent at most once. Its outcome is `sent`, but it is
 * not a send in the grant rule's sense (it may be granted), as it has always been.
 */
const callEndpoint: VerbEntry = {
  label: verbLabels.call_endpoint,
  sends: false,
  async quote(_deps, _workspaceId, raw) {
    const input = parseInput('call_endpoint', raw);
    let url: URL;
    try {
      url = pageUrl(input.url);
    } catch (error) {
      throw new VerbRefused((error as Error).message);
    }
    const body = JSON.stringify(input.body);
    return {
      input: { ...input, url: url.href },
      summary: `Send a ${input.method} to ${url.host}`,
      lines: [url.href, body.length > 500 ? `${body.slice(0, 500)}…` : body],
      price: free,
    };
  },
  async apply(deps, card) {
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
  },
};

/**
 * A verb this build refuses, with its reason (`refusedVerbs`, domain/assistant/verbs.ts): quoting
 * it is the tool call's error (no card is raised), and applying a card of it fails the card.
 */
function refusedVerb(verb: Verb, sends: boolean): VerbEntry {
  const reason = refusedVerbs[verb] ?? `There is no workspace verb named ${verb}.`;
  return {
    label: verbLabels[verb],
    sends,
    quote: async () => {
      throw new VerbRefused(reason);
    },
    apply: async () => {
      throw refusal(reason);
    },
  };
}

/** Every workspace verb, one entry each (the type makes it total; test/unit/assistant-verbs.test.ts checks the runtime keys). */
export const verbRegistry: Readonly<Record<Verb, VerbEntry>> = {
  create_table_from_search: searchVerb('create_table_from_search'),
  add_column: addColumn,
  run_column: columnRunVerb('run_column'),
  enrich_rows: columnRunVerb('enrich_rows'),
  add_contacts_to_sequence: addContactsToSequence,
  // Pushing rows to a destination reaches systems outside the workspace: a send, which always asks.
  push_to_destination: refusedVerb('push_to_destination', true),
  call_endpoint: callEndpoint,
  start_search: searchVerb('start_search'),
};

/** The entry of a verb named by the model or stored on a card; undefined for any other name. */
const verbEntry = (name: string): VerbEntry | undefined =>
  Object.hasOwn(verbRegistry, name) ? verbRegistry[name as Verb] : undefined;

/** Checks a verb's input against the workspace and prices it. Refusals are VerbRefused (or not_found ApiErrors). */
export async function quoteVerb(deps: VerbDeps, workspaceId: string, verb: string, raw: unknown): Promise<Quote> {
  const entry = verbEntry(verb);
  if (!entry) throw new VerbRefused(`There is no workspace verb named ${verb}.`);
  const quoted = await entry.quote(deps, workspaceId, raw);
  return {
    destructive: false,
    loss: null,
    sends: entry.sends,
    sourceColumnId: null,
    runsColumnId: null,
    prepares: false,
    ...quoted,
  };
}

/** Does what the card says: a tool card calls its operation, a verb card its verb's apply. `holdId` is the card's hold when it has a price. */
export async function applyVerb(deps: VerbDeps, card: ProposalRow, holdId: string | null): Promise<Applied> {
  if (card.kind === 'tool') return applyToolCard(deps, card);
  const entry = verbEntry(card.verb);
  if (!entry) throw refusal(`There is no workspace verb named ${card.verb}.`);
  return entry.apply(deps, card, holdId);
}
