/**
 * The pure parts of an assistant turn (services/assistant/answer.ts and propose-card.ts apply
 * them): the system prompt a model step is asked with, the stream parts that open and close a
 * step, a tool call's arguments, what the model reads back of a card, and the pages a
 * read_attachment call asks for. Unit-tested in test/unit/assistant-turn.test.ts.
 */
import { businessContextSection } from '../documents/documents.js';
import type { ChatAttachment } from './attachments.js';
import type { ProposalStatus } from './assistant.js';
import type { StreamPart } from './stream.js';

/** The workspace as the prompt names it (store/assistant/workspace.ts workspaceBrief). */
export interface WorkspaceBrief {
  tables: { id: string; name: string; row_count: number }[];
  sequences: { id: string; name: string; status: string }[];
}

export function systemPrompt(
  brief: WorkspaceBrief,
  attachments: Pick<ChatAttachment, 'id' | 'filename' | 'kind' | 'status' | 'page_count'>[],
  business: { title: string; summary: string }[] = [],
): string {
  const tables =
    brief.tables.map((t) => `- table "${t.name}" (${t.id}), ${t.row_count} rows`).join('\n') || '- no tables yet';
  const sequences =
    brief.sequences.map((s) => `- sequence "${s.name}" (${s.id}), ${s.status}`).join('\n') || '- no sequences yet';
  return [
    "You are the workspace's sales assistant. Answer in plain words and keep it short.",
    'To change anything in the workspace, call a tool: each call becomes a card that quotes its price in credits,',
    'and the person approves it unless they granted that verb. Never claim an action happened before its card was applied.',
    'The workspace now:',
    tables,
    sequences,
    ...(attachments.length
      ? [
          'Files attached to this conversation (read them with read_attachment):',
          ...attachments.map(
            (a) =>
              `- "${a.filename}" (${a.id}), ${a.kind}, ${a.status === 'ready' ? `${a.page_count} ${a.kind === 'pdf' ? 'pages' : 'rows'}` : a.status}`,
          ),
        ]
      : []),
    // Business context (decision 035): the workspace's included document summaries, oldest first, within the budget.
    ...(business.length ? ['', businessContextSection(business)] : []),
  ].join('\n');
}

/** A tool call's arguments: `{}` when empty, undefined when they are not JSON. */
export function parseArguments(raw: string): unknown {
  try {
    return raw.trim() === '' ? {} : (JSON.parse(raw) as unknown);
  } catch {
    return undefined;
  }
}

/** The text block id of a step's attempt: a retried step writes a new block beside the interrupted one. */
export const stepTextId = (step: number, attempt: number) => `text-${step}-${attempt}`;

/**
 * The parts a step's attempt opens with. A retried attempt first closes the interrupted attempt's
 * text blocks (`openBlocks`), so a reader shows each whole and apart from the new one, and says
 * the step is asked again.
 */
export function stepOpening(attempt: number, openBlocks: string[]): StreamPart[] {
  const opening: StreamPart[] = [];
  if (attempt > 1) {
    for (const id of openBlocks) opening.push({ type: 'text-end', id });
    opening.push({
      type: 'data-notice',
      data: { code: 'step_restarted', text: 'The answer was interrupted; this step is asked again.' },
    });
  }
  opening.push({ type: 'start-step' });
  return opening;
}

/** The parts a step ends with: its text block's end (when it wrote one), each tool call's input, `finish-step`. */
export function stepClosing(
  textId: string,
  started: boolean,
  toolCalls: { id: string; name: string; arguments: string }[],
): StreamPart[] {
  const closing: StreamPart[] = [];
  if (started) closing.push({ type: 'text-end', id: textId });
  for (const call of toolCalls)
    closing.push({
      type: 'tool-input-available',
      toolCallId: call.id,
      toolName: call.name,
      input: parseArguments(call.arguments),
    });
  closing.push({ type: 'finish-step' });
  return closing;
}

/** What the model reads back of a card it raised. */
export function cardToolResult(
  card: { id: string; status: ProposalStatus; summary: string; price_label: string; error: string | null },
  autoRun: boolean,
): string {
  return card.status === 'failed'
    ? `The card could not be prepared: ${card.error ?? 'unknown reason'}`
    : `Card ${card.id} proposed: ${card.summary} (${card.price_label}). ${autoRun ? 'It runs now under a standing grant.' : 'It waits for the person to approve it.'}`;
}

/** The pages a read_attachment call asks for: from `offset` (0 by default), 1 to 10 of them (10 by default). */
export function attachmentPageWindow(args: { offset?: unknown; limit?: unknown }): { offset: number; limit: number } {
  const offset = Math.max(0, Math.trunc(Number(args.offset ?? 0)) || 0);
  const limit = Math.min(10, Math.max(1, Math.trunc(Number(args.limit ?? 10)) || 10));
  return { offset, limit };
}
