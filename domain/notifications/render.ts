/** How an event reads in team chat (text and Block Kit blocks) and in an email to a member. */
import { eventTitles, type EventType } from './events.js';
import { textOf } from '../shared/text.js';

const field = (key: string, value: unknown) =>
  value === null || value === undefined || value === '' ? null : `${key.replace(/_/g, ' ')}: ${textOf(value)}`;

export function eventLines(payload: Record<string, unknown>): string[] {
  return Object.entries(payload)
    .map(([k, v]) => field(k, typeof v === 'object' ? JSON.stringify(v) : v))
    .filter((l): l is string => l !== null)
    .map((l) => (l.length > 300 ? `${l.slice(0, 299)}…` : l));
}

export function teamChatMessage(event: {
  id: string;
  type: EventType;
  occurred_at: string;
  payload: Record<string, unknown>;
}) {
  const title = eventTitles[event.type] ?? event.type;
  const lines = eventLines(event.payload);
  return {
    text: `${title}${lines.length ? ` — ${lines.join('; ')}` : ''}`.slice(0, 3000),
    blocks: [
      { type: 'header', text: { type: 'plain_text', text: title.slice(0, 150) } },
      ...(lines.length
        ? [
            {
              type: 'section',
              text: {
                type: 'mrkdwn',
                text: lines
                  .map((l) => `• ${l}`)
                  .join('\n')
                  .slice(0, 3000),
              },
            },
          ]
        : []),
      {
        type: 'context',
        elements: [{ type: 'mrkdwn', text: `\`${event.type}\` · ${event.occurred_at} · event ${event.id}` }],
      },
    ],
  };
}

export function memberEmail(event: {
  id: string;
  type: EventType;
  occurred_at: string;
  payload: Record<string, unknown>;
}) {
  const title = eventTitles[event.type] ?? event.type;
  return {
    subject: title,
    text: [
      title,
      '',
      ...eventLines(event.payload),
      '',
      `Event ${event.id} (${event.type}) at ${event.occurred_at}.`,
    ].join('\n'),
  };
}

export function digestEmail(events: { type: EventType; occurred_at: Date; payload: Record<string, unknown> }[]) {
  const lines = events.map(
    (e) => `- ${e.occurred_at.toISOString()} ${eventTitles[e.type] ?? e.type}: ${eventLines(e.payload).join('; ')}`,
  );
  return {
    subject: `Your daily digest: ${events.length} event${events.length === 1 ? '' : 's'}`,
    text: ['Since your last digest:', '', ...lines].join('\n'),
  };
}
