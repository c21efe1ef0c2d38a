import nodemailer from 'nodemailer';

export interface OutboundEmail {
  /** The stable Message-ID, angle brackets included. */
  messageId: string;
  from: { name: string | null; address: string };
  to: string;
  subject: string;
  text: string;
  /** The same text as HTML, with the open-tracking pixel, when the service has a public address. */
  html?: string;
  /** A reply's threading headers: the message it answers, and the thread's Message-IDs. */
  inReplyTo?: string | null;
  references?: string[];
}

export interface Mailer {
  /** Where sequence emails come from when the sender has no mailbox of its own. */
  readonly defaultFrom: string;
  /** The Message-ID domain. */
  readonly domain: string;
  send(mail: OutboundEmail): Promise<{ accepted: string[]; response: string }>;
}

/**
 * An SMTP transport from a URL such as smtp://user:pass@host:587 or smtps://host:465. Pooled: a
 * few connections stay open and carry message after message, instead of a connect, greeting, TLS
 * and login per email (the URL's own `?pool=false` or `maxConnections=` still win).
 */
export function smtpMailer(url: string, options: { from: string }): Mailer {
  const transport = nodemailer.createTransport({ url, pool: true, maxConnections: 4, maxMessages: 500 });
  const domain = options.from.split('@')[1] ?? 'sequences.local';
  return {
    defaultFrom: options.from,
    domain,
    async send(mail) {
      const info = await transport.sendMail({
        messageId: mail.messageId,
        from: mail.from.name ? { name: mail.from.name, address: mail.from.address } : mail.from.address,
        to: mail.to,
        subject: mail.subject,
        text: mail.text,
        ...(mail.html ? { html: mail.html } : {}),
        ...(mail.inReplyTo ? { inReplyTo: mail.inReplyTo } : {}),
        ...(mail.references?.length ? { references: mail.references } : {}),
      });
      return { accepted: info.accepted.map(String), response: info.response };
    },
  };
}

/** The mailer of this environment, or null when SMTP_URL is not set (emails then wait, and say so). */
export function mailerFrom(env: NodeJS.ProcessEnv): Mailer | null {
  if (!env.SMTP_URL) return null;
  return smtpMailer(env.SMTP_URL, { from: env.SMTP_FROM ?? 'sequences@localhost' });
}

/** Errors after which the server certainly did not take the message: the claim is given back. */
export function certainlyNotSent(error: unknown): boolean {
  const e = error as { code?: string; responseCode?: number };
  // No connection, or the server answered with a refusal (envelope or message): nothing was taken.
  // A socket dropped or timed out mid-message is not on this list: it may have been delivered.
  return (
    ['ECONNECTION', 'EDNS', 'ETLS', 'EAUTH', 'EENVELOPE', 'EMESSAGE'].includes(e.code ?? '') ||
    (typeof e.responseCode === 'number' && e.responseCode >= 400)
  );
}

export const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** The text as HTML paragraphs, with a 1x1 pixel whose load records the open (the `opened` branch). */
export function htmlWithPixel(text: string, pixelUrl: string): string {
  const body = escapeHtml(text).replace(/\r?\n/g, '<br>');
  return `<!doctype html><html><body><div>${body}</div><img src="${escapeHtml(pixelUrl)}" width="1" height="1" alt="" style="display:none"></body></html>`;
}
