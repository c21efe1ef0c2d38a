/**
 * A receiving SMTP server (the `smtp-server` package) that keeps a record of every message it
 * accepts: its Message-ID, envelope sender and recipients, subject and the moment it was taken.
 * The sequence benchmark and fault test point the worker's SMTP_URL at it and judge "never twice"
 * here, at the receiving end, where a duplicate would really land.
 *
 * A message is recorded only once it arrived in full (the DATA terminator seen), just before the
 * server answers 250: a sender killed mid-message leaves nothing behind, as with a real server.
 * `refuseRate` answers a share of messages 451 (a transient refusal: the sender must try again).
 * `keepText` also parses each message and keeps its From, Subject and text body (`npm run
 * smtp:local` prints them, sim/smtp-sink-main.ts); without it only the headers are read.
 */
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';

export interface SinkMessage {
  /** The Message-ID header, angle brackets included (null when the message had none). */
  messageId: string | null;
  /** Envelope recipients (RCPT TO), lower-case. */
  to: string[];
  /** Envelope sender (MAIL FROM). */
  from: string | null;
  subject: string | null;
  /** Date.now() when the message was taken (the end of DATA). */
  receivedAt: number;
  bytes: number;
  /**
   * With `keepText`: the message as a mail program shows it: the From header (display name and
   * address), the decoded Subject and the text body (null where the message had none or did not parse).
   */
  parsed?: { from: string | null; subject: string | null; text: string | null };
}

export interface SmtpSinkOptions {
  /** Share of messages answered 451 instead of being taken (0 to 1). */
  refuseRate?: number;
  /** Randomness for the refusals (a seeded one makes a run repeatable). */
  random?: () => number;
  /** Called with each message taken, in order. */
  onMessage?: (message: SinkMessage) => void;
  port?: number;
  /** Also parse each message and keep its From header, decoded Subject and text body (`parsed`). */
  keepText?: boolean;
}

export interface SmtpSink {
  url: string;
  port: number;
  readonly messages: readonly SinkMessage[];
  /** Messages refused on purpose (451), and transactions the sender abandoned mid-message. */
  readonly refused: number;
  readonly abandoned: number;
  /** Message-IDs taken more than once, with how many times. */
  duplicateMessageIds(): Map<string, number>;
  close(): Promise<void>;
}

/** The headers of a raw message, unfolded, by lower-case name (first occurrence wins). */
export function parseHeaders(raw: Buffer): Map<string, string> {
  const text = raw.toString('latin1');
  const end = text.search(/\r?\n\r?\n/);
  const block = (end === -1 ? text : text.slice(0, end)).replace(/\r?\n[ \t]+/g, ' ');
  const headers = new Map<string, string>();
  for (const line of block.split(/\r?\n/)) {
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    if (!headers.has(name)) headers.set(name, line.slice(colon + 1).trim());
  }
  return headers;
}

export async function startSmtpSink(options: SmtpSinkOptions = {}): Promise<SmtpSink> {
  const messages: SinkMessage[] = [];
  const random = options.random ?? Math.random;
  let refused = 0;
  let abandoned = 0;
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    // No reverse DNS of 127.0.0.1 per connection (it can take seconds on a machine without a resolver).
    disableReverseLookup: true,
    // Many workers' connections at once during the benchmark.
    maxClients: 1000,
    // Closing waits this long for a sender still connected (one the fault test killed may never say QUIT).
    closeTimeout: 1000,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      let ended = false;
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('error', () => {
        if (!ended) abandoned += 1;
      });
      stream.on('end', () => {
        ended = true;
        if (options.refuseRate && random() < options.refuseRate) {
          refused += 1;
          const error = Object.assign(new Error('Try again later (refused on purpose by the test sink)'), {
            responseCode: 451,
          });
          callback(error);
          return;
        }
        const raw = Buffer.concat(chunks);
        const headers = parseHeaders(raw);
        const message: SinkMessage = {
          messageId: headers.get('message-id') ?? null,
          to: session.envelope.rcptTo.map((r) => r.address.toLowerCase()),
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : null,
          subject: headers.get('subject') ?? null,
          receivedAt: Date.now(),
          bytes: raw.length,
        };
        const take = () => {
          messages.push(message);
          options.onMessage?.(message);
          callback();
        };
        if (!options.keepText) {
          take();
          return;
        }
        // Recorded once parsed, still before the 250: what was answered taken is what is kept. The
        // parser loads only here, so the benchmarks' sinks never load it.
        import('mailparser')
          .then(({ simpleParser }) => simpleParser(raw))
          .then(
            (mail) => {
              message.parsed = {
                from: mail.from?.text ?? null,
                subject: mail.subject ?? null,
                text: mail.text ?? null,
              };
              take();
            },
            () => {
              message.parsed = { from: null, subject: null, text: null };
              take();
            },
          );
      });
    },
  });
  // A client that drops its connection is routine here (the fault test kills the sender).
  server.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const port = (server.server.address() as AddressInfo).port;
  return {
    url: `smtp://127.0.0.1:${port}`,
    port,
    messages,
    get refused() {
      return refused;
    },
    get abandoned() {
      return abandoned;
    },
    duplicateMessageIds() {
      const counts = new Map<string, number>();
      for (const m of messages) if (m.messageId) counts.set(m.messageId, (counts.get(m.messageId) ?? 0) + 1);
      return new Map([...counts].filter(([, n]) => n > 1));
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
