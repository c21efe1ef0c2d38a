/**
 * `npm run smtp:local`: a mail server for the walk-throughs (docs/teams-walkthrough.md). It takes
 * every message the service sends and prints it (From, To, Subject and the text), so a person
 * reads an invitation's token in this terminal. Nothing is delivered anywhere (sim/smtp-sink.ts).
 *
 *   SMTP_SINK_PORT  the port to listen on (2525); give the service SMTP_URL=smtp://127.0.0.1:<port>
 */
import { startSmtpSink, type SinkMessage } from './smtp-sink.js';

function printed(message: SinkMessage): string {
  const parsed = message.parsed;
  return [
    `--- ${new Date(message.receivedAt).toISOString()} ---`,
    `From:    ${parsed?.from ?? message.from ?? ''}`,
    `To:      ${message.to.join(', ')}`,
    `Subject: ${parsed?.subject ?? message.subject ?? ''}`,
    '',
    (parsed?.text ?? '(no text body)').trimEnd(),
    '',
    '',
  ].join('\n');
}

async function main(): Promise<void> {
  const port = Number(process.env.SMTP_SINK_PORT || 2525);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error('SMTP_SINK_PORT must be a port number.');
  const sink = await startSmtpSink({
    port,
    keepText: true,
    onMessage: (message) => process.stdout.write(printed(message)),
  });
  process.stdout.write(
    [
      `SMTP_URL=${sink.url}`,
      '',
      'Give the service that SMTP_URL. Every message it sends is printed here, and goes no further.',
      '',
      '',
    ].join('\n'),
  );
  const stop = () => void sink.close().then(() => process.exit(0));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
