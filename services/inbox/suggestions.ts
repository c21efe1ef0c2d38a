import { type Channel } from '../../domain/inbox/inbox.js';
import type { ChatModel } from '../../integrations/chat-model.js';

// ---------------------------------------------------------------------------------------------
// Suggested replies

export interface SuggestionDraft {
  subject: string | null;
  body: string;
  modelKey: string;
}

export interface SuggestionContext {
  channel: Channel;
  contactName: string | null;
  subject: string | null;
  /** Oldest first; the last inbound one is the message answered. */
  messages: { direction: 'inbound' | 'outbound'; body: string }[];
  answering: string;
  /** The workspace's business context (domain/documents businessContextSection); empty when it has none. */
  business?: string;
}

export const firstName = (name: string | null) => (name ?? '').trim().split(/\s+/)[0] || 'there';
export const replySubject = (subject: string | null) =>
  subject ? (/^re:/i.test(subject) ? subject : `Re: ${subject}`) : null;

/**
 * Without a model: a short reply chosen by what the message asks for. Labelled as a template,
 * never as a model's writing.
 */
export function templateSuggestion(ctx: SuggestionContext): SuggestionDraft {
  const text = ctx.answering.toLowerCase();
  const hi = `Hi ${firstName(ctx.contactName)},`;
  let middle: string;
  if (/(unsubscribe|not interested|remove me|stop (emailing|messaging)|no thanks)/.test(text)) {
    middle = 'Understood, thank you for letting me know. I will not reach out again.';
  } else if (/(call|meet|chat|time|calendar|schedule|available)/.test(text)) {
    middle = 'Thanks for getting back to me. Happy to find a time: which days work best for you this week or next?';
  } else if (text.includes('?')) {
    middle = 'Thanks for your question. Let me get you a proper answer; I will follow up shortly with the details.';
  } else {
    middle = 'Thanks for getting back to me, I appreciate it. Would a short call be useful to go through it together?';
  }
  return {
    subject: ctx.channel === 'email' ? replySubject(ctx.subject) : null,
    body: `${hi}\n\n${middle}\n\nBest regards`,
    modelKey: 'local-template-writer',
  };
}

/** With a model: it writes from the conversation. An empty answer is a failure (nothing is charged). */
export async function modelSuggestion(model: ChatModel, ctx: SuggestionContext): Promise<SuggestionDraft> {
  const transcript = ctx.messages
    .slice(-10)
    .map((m) => `${m.direction === 'inbound' ? 'THEM' : 'US'}: ${m.body.slice(0, 2000)}`)
    .join('\n\n');
  const answer = await model.complete({
    messages: [
      {
        role: 'system',
        content:
          'You write short, friendly, professional replies for a salesperson. Answer only with the reply text: no subject, no placeholders, no signature block beyond a simple sign-off. ' +
          'If the person asks not to be contacted, acknowledge politely and promise no further contact.' +
          (ctx.business ? `\n\n${ctx.business}` : ''),
      },
      {
        role: 'user',
        content: `Contact: ${ctx.contactName ?? 'unknown'}\nChannel: ${ctx.channel}\nSubject: ${ctx.subject ?? '(none)'}\n\nConversation:\n${transcript}\n\nWrite the reply to their last message.`,
      },
    ],
    maxTokens: 600,
    temperature: 0.4,
  });
  const body = answer.content.trim().slice(0, 8000);
  if (!body) throw new Error('The model wrote nothing.');
  return { subject: ctx.channel === 'email' ? replySubject(ctx.subject) : null, body, modelKey: model.key };
}
