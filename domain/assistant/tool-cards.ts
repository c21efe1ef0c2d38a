/**
 * Tool cards (interface spec 2.12 Action proposal `kind: tool`): any operation of the service's own API, called on the person's
 * behalf. The model finds operations with `find_operations` and calls one with `call_operation`.
 * A read runs at once and its answer goes back to the model; a write becomes a card that waits
 * for approval like a verb's (a send and a destructive call never run on a standing grant).
 * Pure: which operations the assistant may call, which of them send or destroy, and the search.
 */
import type { CatalogueOperation } from './operations.js';
import type { ToolDefinition } from './verbs.js';
import type { Price } from './assistant.js';

/**
 * What the assistant never calls: its own decisions and settings (a card must not approve cards
 * or widen its own grants), credentials, who may act (members' roles and removal), and the
 * agent's sending switch.
 */
const excludedTags = new Set(['assistant', 'api-keys']);
const excludedOperations = new Set([
  'updateAgentSending',
  'rotateInboxWebhookSecret',
  'receiveInboundEmail',
  'updateMemberRole',
  'removeMember',
]);

/** Operations that reach people outside the workspace: always asked, never granted. */
export const sendingOperations: ReadonlySet<string> = new Set([
  'replyInboxThread',
  'approveInboxSuggestion',
  'approveSequenceMessage',
  'approveTask',
  'queueStep',
  'retryStep',
  'launchSequence',
  'resumeSequence',
]);

/** A call that takes something away: a DELETE, or an operation named for deleting, cancelling, archiving or disconnecting. */
export const isDestructiveOperation = (op: Pick<CatalogueOperation, 'method' | 'name'>) =>
  op.method === 'DELETE' || /^(delete|cancel|archive|abandon|disconnect)/.test(op.name);

export function assistantOperations(catalogue: CatalogueOperation[]): CatalogueOperation[] {
  return catalogue.filter((op) => !excludedOperations.has(op.name) && !op.tags.some((t) => excludedTags.has(t)));
}

/** An operation's schema is offered inline only when it is small; a big one is named and summarised. */
const inlineSchemaMax = 4000;

/** The operations whose name, summary or tags best match the words of `query`, best first. */
export function findOperations(operations: CatalogueOperation[], query: string, limit = 8) {
  const words = query
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((w) => w.length > 1);
  const score = (op: CatalogueOperation) => {
    const haystack = `${op.name} ${op.summary} ${op.tags.join(' ')} ${op.path}`.toLowerCase();
    return words.reduce((n, w) => n + (haystack.includes(w) ? (op.name.toLowerCase().includes(w) ? 3 : 1) : 0), 0);
  };
  return operations
    .map((op) => ({ op, score: score(op) }))
    .filter((s) => s.score > 0)
    .sort((a, b) => b.score - a.score || a.op.name.localeCompare(b.op.name))
    .slice(0, limit)
    .map(({ op }) => {
      const schema = JSON.stringify(op.input_schema);
      return {
        name: op.name,
        method: op.method,
        path: op.path,
        summary: op.summary,
        access: op.access,
        input_schema:
          schema.length <= inlineSchemaMax
            ? op.input_schema
            : { note: 'Large input: see the API reference for this operation.' },
      };
    });
}

export const operationTools: ToolDefinition[] = [
  {
    name: 'find_operations',
    description:
      'Search the workspace API\'s operations by words (for example "list rows of a table"). Answers names, summaries, access and inputs.',
    parameters: {
      type: 'object',
      properties: { query: { type: 'string', minLength: 1, maxLength: 200 } },
      required: ['query'],
      additionalProperties: false,
    },
  },
  {
    name: 'call_operation',
    description:
      'Call an operation of the workspace API by name with its input (path and query parameters by name, the JSON body under `body`). ' +
      'A read runs at once; a write is proposed as a card the person approves.',
    parameters: {
      type: 'object',
      properties: { operation: { type: 'string' }, input: { type: 'object' } },
      required: ['operation'],
      additionalProperties: false,
    },
  },
];

/** The door to the API in this process: the catalogue, and a call made as a member of the workspace. */
export interface OperationDoor {
  catalogue(): CatalogueOperation[];
  call(
    memberId: string,
    request: { method: string; url: string; body?: unknown },
  ): Promise<{ status: number; body: unknown }>;
}

/** An answer read back to the model, cut to a size a prompt can take. */
export function briefAnswer(body: unknown, max = 8000): string {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  return text.length <= max ? text : `${text.slice(0, max)}… (cut: ${text.length} characters in all)`;
}

/**
 * What a tool card for a write operation says before anyone decides: its label and summary, the
 * lines it shows, its price (the route's fixed price, else free), and whether it destroys or sends.
 * The assistant's cards and a connected app's cards (decision 040) are quoted the same way.
 */
export function toolCardQuote(op: CatalogueOperation, request: { method: string; url: string; body?: unknown }) {
  const destructive = isDestructiveOperation(op);
  const price: Price = op.price_credits
    ? { credits: op.price_credits, per: 'call', expected: op.price_credits, aside: `${op.method} ${op.path}` }
    : { credits: null, per: 'call', expected: null, aside: 'Costs no credits' };
  return {
    verbLabel: op.summary || op.name,
    input: { operation: op.name, request } as Record<string, unknown>,
    summary: `${op.summary || op.name} (${request.method} ${request.url})`,
    lines: [
      `${request.method} ${request.url}`,
      ...(request.body !== undefined ? [briefAnswer(request.body, 500)] : []),
    ],
    price,
    destructive,
    loss: destructive ? `${op.summary || op.name}: what it removes cannot be brought back from here.` : null,
    sends: sendingOperations.has(op.name),
  };
}
